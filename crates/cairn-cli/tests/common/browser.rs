//! A headless Chromium session over WebDriver (chromedriver), for the dashboard's tests, and
//! finding the two programs: on `PATH` (Debian: `apt-get install chromium chromium-driver`) or
//! named by `CAIRN_CHROMIUM` and `CAIRN_CHROMEDRIVER`. Without them the tests are skipped with a
//! loud message, unless `CAIRN_REQUIRE_BROWSER=1`, under which they fail.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the page may take to show something before the test gives up (not a speed check:
/// it only turns a hang into a failure).
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// The first of `names` on `PATH`, or the file `variable` names.
fn program(variable: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|dir| names.iter().map(move |name| dir.join(name))).find(|p| p.is_file())
}

/// chromedriver and Chromium, or `None` (said loudly) when either is missing and not required.
pub(crate) fn browser_programs() -> Option<(PathBuf, PathBuf)> {
    let driver = program("CAIRN_CHROMEDRIVER", &["chromedriver"]);
    let browser = program("CAIRN_CHROMIUM", &["chromium", "chromium-browser", "google-chrome"]);
    match (driver, browser) {
        (Some(driver), Some(browser)) => Some((driver, browser)),
        _ if std::env::var("CAIRN_REQUIRE_BROWSER").is_ok_and(|v| v == "1") => {
            panic!("CAIRN_REQUIRE_BROWSER=1 but chromium and chromedriver are not both on PATH")
        }
        _ => {
            eprintln!(
                "\n!!! SKIPPED: the dashboard's browser test needs chromium and chromedriver \
                 (apt-get install chromium chromium-driver); set CAIRN_REQUIRE_BROWSER=1 to fail instead !!!\n"
            );
            None
        }
    }
}

/// axe-core's script, read from the file `CAIRN_AXE_JS` names (`axe.min.js` of the npm package
/// `axe-core`), or `None`, said loudly, when it is not set, unless `CAIRN_REQUIRE_AXE=1`, under
/// which it fails.
pub(crate) fn axe_script() -> Option<String> {
    match std::env::var_os("CAIRN_AXE_JS") {
        Some(path) => Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("CAIRN_AXE_JS {path:?}: {e}"))),
        None if std::env::var("CAIRN_REQUIRE_AXE").is_ok_and(|v| v == "1") => {
            panic!("CAIRN_REQUIRE_AXE=1 but CAIRN_AXE_JS does not name axe-core's axe.min.js")
        }
        None => {
            eprintln!(
                "\n!!! SKIPPED: the dashboard's accessibility checks need axe-core (npm install axe-core; \
                 CAIRN_AXE_JS=…/node_modules/axe-core/axe.min.js); set CAIRN_REQUIRE_AXE=1 to fail instead !!!\n"
            );
            None
        }
    }
}

/// A headless Chromium session over WebDriver, with its chromedriver; both end when dropped.
pub(crate) struct Browser {
    driver: Child,
    address: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub(crate) fn start(driver: &PathBuf, browser: &PathBuf) -> Browser {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let address = format!("127.0.0.1:{port}");
        let since = Instant::now();
        while TcpStream::connect(&address).is_err() {
            assert!(since.elapsed() < PATIENCE, "chromedriver did not listen on {address}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let mut browser_ = Browser { driver: child, address, session: String::new(), _profile: profile };
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--window-size=1280,1000",
                         format!("--user-data-dir={}", browser_._profile.path().display())],
            },
        }}});
        let created = browser_.call("POST", "/session", &capabilities);
        browser_.session = created["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {created}")).to_owned();
        browser_
    }

    /// One WebDriver command; its `value`.
    pub(crate) fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        let body = if method == "GET" || method == "DELETE" { String::new() } else { body.to_string() };
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.address,
            body.len()
        )
        .unwrap();
        // chromedriver may hold the connection open after its answer: read the head, then
        // exactly the body its Content-Length announces, and turn a stall into a failure.
        stream.set_read_timeout(Some(PATIENCE * 2)).unwrap();
        let mut response = Vec::new();
        let mut chunk = [0u8; 8192];
        let (head, body) = loop {
            let read = stream.read(&mut chunk).unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
            response.extend_from_slice(&chunk[..read]);
            let text = String::from_utf8_lossy(&response).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| line.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok());
                if length.is_some_and(|length| body.len() >= length) || (length.is_none() && read == 0) {
                    break (head.to_owned(), body.to_owned());
                }
            }
            assert!(read > 0, "WebDriver {method} {path}: connection closed mid-answer");
        };
        let answer: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{head}\n{body}"));
        assert!(head.contains(" 200 "), "WebDriver {method} {path}: {answer}");
        answer["value"].clone()
    }

    pub(crate) fn command(&self, method: &str, path: &str, body: Value) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), &body)
    }

    pub(crate) fn goto(&self, url: &str) {
        self.command("POST", "/url", json!({ "url": url }));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; its return value.
    pub(crate) fn script(&self, script: &str, args: Value) -> Value {
        self.command("POST", "/execute/sync", json!({ "script": script, "args": args }))
    }

    /// Waits until `script` returns something truthy; returns that.
    pub(crate) fn wait_for(&self, what: &str, script: &str) -> Value {
        let since = Instant::now();
        loop {
            let value = self.script(script, json!([]));
            if !matches!(value, Value::Null | Value::Bool(false)) && value != json!("") && value != json!(0) {
                return value;
            }
            if since.elapsed() > PATIENCE {
                let page = self.script("return document.getElementById('view').innerText", json!([]));
                panic!("the page never showed {what}; it shows:\n{page}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The element `css` selects (it must exist).
    pub(crate) fn element(&self, css: &str) -> String {
        let found = self.command("POST", "/element", json!({"using": "css selector", "value": css}));
        found.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).unwrap().to_owned()
    }

    /// A real click on `css`, once it is there.
    pub(crate) fn click(&self, css: &str) {
        self.wait_for(css, &format!("return document.querySelector({css:?}) !== null"));
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/click"), json!({}));
    }

    /// Types `text` into the field `css` (real key events).
    pub(crate) fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/clear"), json!({}));
        self.command("POST", &format!("/element/{element}/value"), json!({ "text": text }));
    }

    /// Saves a screenshot of the page as `dashboard-<name>.png` under `target/tmp/` and checks
    /// that it is not blank: at least 2 % of its pixels differ from its most common colour.
    pub(crate) fn screenshot(&self, name: &str) {
        use base64::Engine as _;
        let encoded = self.command("GET", "/screenshot", Value::Null);
        let png = base64::engine::general_purpose::STANDARD.decode(encoded.as_str().unwrap()).unwrap();
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("dashboard-{name}.png"));
        std::fs::write(&path, &png).unwrap();
        let mut decoder = png::Decoder::new(std::io::Cursor::new(&png));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let frame = reader.next_frame(&mut pixels).unwrap();
        let mut colours = std::collections::HashMap::<&[u8], usize>::new();
        for pixel in pixels[..frame.buffer_size()].chunks_exact(frame.color_type.samples()) {
            *colours.entry(pixel).or_default() += 1;
        }
        let total: usize = colours.values().sum();
        let background = colours.values().copied().max().unwrap_or_default();
        assert!(
            (total - background) * 50 >= total,
            "{} is blank: {background} of its {total} pixels are one colour",
            path.display()
        );
    }

    /// Runs `script` (a function body whose last argument is the callback) in the page and
    /// waits for what it passes to the callback.
    pub(crate) fn script_async(&self, script: &str, args: Value) -> Value {
        self.command("POST", "/execute/async", json!({ "script": script, "args": args }))
    }

    /// axe-core's violations on the page as it is (`axe`: the script [`axe_script`] read; put
    /// into the page the first time), one line each: rule, impact, help and the first nodes.
    pub(crate) fn axe_violations(&self, axe: &str) -> Vec<String> {
        if self.script("return typeof window.axe", json!([])) != json!("object") {
            self.script(&format!("{axe}\nreturn true"), json!([]));
        }
        let run = "const done = arguments[arguments.length - 1]; \
            axe.run(document, { resultTypes: ['violations'] }).then((r) => done(r.violations.map((v) => \
              v.id + ' (' + v.impact + '): ' + v.help + ' at ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | '))), \
              (e) => done(['axe failed: ' + e]))";
        serde_json::from_value(self.script_async(run, json!([]))).unwrap()
    }

    /// How many elements `css` selects.
    pub(crate) fn count(&self, css: &str) -> u64 {
        self.script(&format!("return document.querySelectorAll({css:?}).length"), json!([])).as_u64().unwrap_or(0)
    }

    /// Resizes the window to `width` × `height` CSS pixels.
    pub(crate) fn window(&self, width: u32, height: u32) {
        self.command("POST", "/window/rect", json!({ "width": width, "height": height }));
    }

    /// A Chrome DevTools Protocol command (`Emulation.setEmulatedMedia`, …) through chromedriver.
    pub(crate) fn devtools(&self, command: &str, params: Value) -> Value {
        self.command("POST", "/goog/cdp/execute", json!({ "cmd": command, "params": params }))
    }

    pub(crate) fn text(&self, css: &str) -> String {
        self.script(&format!("const e = document.querySelector({css:?}); return e ? e.textContent : null"), json!([]))
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.call("DELETE", &path, &Value::Null)));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
