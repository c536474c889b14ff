//! The dashboard in a real browser: headless Chromium driven over WebDriver (chromedriver)
//! against a real `cairn serve --examples` with a token. It asks for the token, lists runs and
//! follows new ones live without reloading, filters, shows one run (input, output, timeline with
//! retries, sleeps and waits, journal, signals), and its buttons cancel, signal, pause, resume
//! and restart; it lists schedules, triggers, pauses and resumes them. It saves a screenshot of each page under `target/tmp/` and checks it is not blank.
//! A page on another origin, in the same browser, changes nothing.
//!
//! Needs `chromium` and `chromedriver` on `PATH` (Debian: `apt-get install chromium
//! chromium-driver`; or `CAIRN_CHROMIUM` and `CAIRN_CHROMEDRIVER`). Without them it is skipped
//! with a loud message, unless `CAIRN_REQUIRE_BROWSER=1`, under which it fails.

use crate::common::browser::{Browser, axe_script, browser_programs};
use crate::common::{Server, await_status, http_with};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;

const TOKEN: &str = "dashboard-secret";
/// The row of run `id` on the runs page shows `status`.
fn row_shows(id: &str, status: &str) -> String {
    format!("return document.querySelector('tr.run[data-id=\"{id}\"][data-status=\"{status}\"]') !== null")
}

#[test]
fn the_dashboard_in_a_real_browser() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let server = Server::start(Some(TOKEN));
    let address = server.address.clone();
    let api = |method: &str, path: &str, body: Option<&str>| http_with(&address, method, path, body, Some(TOKEN));
    let (status, _) = api("POST", "/v1/workflows/hello/runs", Some(r#"{"id":"h-1","input":{"name":"Ada"}}"#));
    assert_eq!(status, 201);
    await_status(&address, "/v1/workflows/hello/runs/h-1", "completed", Some(TOKEN));

    let browser = Browser::start(&driver, &chromium);
    let home = format!("http://{address}/");
    browser.goto(&home);

    // The API wants a token: the page asks for it, and then shows the runs.
    browser.wait_for("the token form", "return !document.getElementById('token-form').hidden");
    let axe = axe_script();
    if let Some(axe) = &axe {
        assert_eq!(browser.axe_violations(axe), Vec::<String>::new(), "axe-core on the token form");
    }
    browser.type_into("#token-input", TOKEN);
    browser.click("#token-form button");
    browser.wait_for("run h-1 as completed", &row_shows("h-1", "completed"));
    assert_eq!(browser.text("tr[data-workflow=hello] td[data-status=completed]"), "1");
    assert_eq!(browser.script("return document.querySelectorAll('tr.worker').length", json!([])), json!(1));
    assert!(browser.text("#stranded").contains("No stranded runs"), "{}", browser.text("#stranded"));
    browser.screenshot("runs");

    // A run started elsewhere appears without a reload (the mark set on this document survives).
    browser.script("window.cairnMark = 'same page'", json!([]));
    let (status, _) = api("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"a-1"}"#));
    assert_eq!(status, 201);
    browser.wait_for("run a-1 waiting", &row_shows("a-1", "suspended"));
    assert_eq!(browser.script("return window.cairnMark", json!([])), json!("same page"));

    // Filters: by workflow, then by status.
    browser.click("#workflow-filter option[value=hello]");
    browser.wait_for(
        "only hello's runs",
        "return location.hash.includes('workflow=hello') && document.querySelector('tr.run[data-id=\"a-1\"]') === null \
         && document.querySelector('tr.run[data-id=\"h-1\"]') !== null",
    );
    browser.click("#workflow-filter option[value='']");
    browser.click("#status-filter option[value=suspended]");
    browser.wait_for(
        "only suspended runs",
        "return document.querySelectorAll('tr.run').length === 1 && document.querySelector('tr.run[data-id=\"a-1\"]') !== null",
    );

    // One run: waiting for its signal; send it from the form.
    browser.click("tr.run[data-id=a-1] a");
    browser.wait_for("a-1's page", "return document.querySelector('#run-status .status-suspended') !== null");
    browser.wait_for(
        "a waiting wait on the timeline",
        "return document.querySelector('g.step[data-kind=wait][data-phase=waiting] rect.wait') !== null",
    );
    assert!(browser.text("#pending-signals").contains("None"));
    browser.type_into("#signal-name", "approve");
    browser.type_into("#signal-payload", r#"{"by": "browser"}"#);
    browser.click("#send-signal");
    browser.wait_for("a-1 completed", "return document.querySelector('#run-status .status-completed') !== null");
    let output: Value = serde_json::from_str(&browser.text("#output")).unwrap();
    assert_eq!(output, json!({"by": "browser"}));
    browser.wait_for(
        "the consumed signal",
        "return document.querySelector('#consumed-signals tr.signal[data-name=approve]') !== null",
    );
    browser.wait_for(
        "the wait received",
        "return document.querySelector('g.step[data-kind=wait][data-phase=received]') !== null",
    );
    browser.wait_for(
        "the journal",
        "return document.querySelector('#journal tr.entry[data-kind=wait_completed]') !== null",
    );
    assert!(browser.script("return document.getElementById('send-signal').disabled", json!([])) == json!(true));
    assert_eq!(browser.script("return window.cairnMark", json!([])), json!("same page"));
    browser.screenshot("run");
    let stored = api("GET", "/v1/workflows/approval/runs/a-1", None).1;
    assert_eq!(stored["output"], json!({"by": "browser"}));

    // A signal whose payload is not JSON is refused in the page and sends nothing.
    let (status, _) = api("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"a-2"}"#));
    assert_eq!(status, 201);
    browser.goto(&format!("{home}#/runs/approval/a-2"));
    browser.wait_for("a-2 waiting", "return document.querySelector('#run-status .status-suspended') !== null");
    browser.type_into("#signal-name", "approve");
    browser.type_into("#signal-payload", "{not json");
    browser.click("#send-signal");
    browser.wait_for("the refusal", "return document.getElementById('action-result').className === 'bad'");
    assert!(api("GET", "/v1/workflows/approval/runs/a-2/signals", None).1["signals"].as_array().unwrap().is_empty());

    // Pause (for a reason), resume, cancel.
    browser.click("#pause");
    browser.type_into("#confirm-reason", "deploy freeze");
    browser.click("#confirm-yes");
    browser.wait_for("a-2 paused", "return document.querySelector('#run-status .status-paused') !== null");
    let paused = await_status(&address, "/v1/workflows/approval/runs/a-2", "paused", Some(TOKEN));
    assert_eq!(paused["error"], "deploy freeze", "{paused}");
    browser.wait_for(
        "the reason shown",
        "return document.getElementById('outcome').textContent === 'Paused: deploy freeze.'",
    );
    browser.wait_for("resume enabled", "return !document.getElementById('resume').disabled");
    browser.click("#resume");
    browser.wait_for("a-2 waiting again", "return document.querySelector('#run-status .status-suspended') !== null");
    browser.click("#cancel");
    browser.click("#confirm-yes");
    browser.wait_for("a-2 cancelled", "return document.querySelector('#run-status .status-cancelled') !== null");
    assert!(browser.text("#action-result").starts_with("cancel: "), "{}", browser.text("#action-result"));
    await_status(&address, "/v1/workflows/approval/runs/a-2", "cancelled", Some(TOKEN));

    // Retries and sleeps on the timeline: two failed attempts, their waits to retry, the sleep.
    let (status, _) = api("POST", "/v1/workflows/flaky/runs", Some(r#"{"id":"f-1","input":{"failures":2}}"#));
    assert_eq!(status, 201);
    browser.goto(&format!("{home}#/runs/flaky/f-1"));
    browser.wait_for("f-1 completed", "return document.querySelector('#run-status .status-completed') !== null");
    let charge = "g.step[data-path=charge][data-kind=step][data-phase=completed]";
    browser.wait_for("the charge step", &format!("return document.querySelector('{charge}') !== null"));
    let count = |css: &str| browser.script(&format!("return document.querySelectorAll('{css}').length"), json!([]));
    assert_eq!(count(&format!("{charge} rect.attempt.failed")), json!(2));
    assert_eq!(count(&format!("{charge} rect.attempt:not(.failed)")), json!(1));
    assert_eq!(count(&format!("{charge} rect.retry-wait")), json!(2));
    assert_eq!(count("g.step[data-path=cool-down][data-kind=sleep][data-phase=slept] rect.sleep"), json!(1));
    let failure = browser.text(&format!("{charge} rect.attempt.failed title"));
    assert!(failure.contains("the card service is down"), "{failure}");
    browser.script(
        "document.querySelector('#timeline').previousElementSibling.previousElementSibling.scrollIntoView()",
        json!([]),
    );
    browser.screenshot("timeline");
    if let Some(axe) = &axe {
        assert_eq!(browser.axe_violations(axe), Vec::<String>::new(), "axe-core on a timeline with retries");
    }

    // Restart h-1 from its step: the page follows to the new run, linked to the old one.
    browser.goto(&format!("{home}#/runs/hello/h-1"));
    browser.wait_for("h-1 completed", "return document.querySelector('#run-status .status-completed') !== null");
    browser.wait_for("the restart step", "return document.querySelector('#restart-step option[value=greet]') !== null");
    browser.click("#restart");
    browser.click("#confirm-yes");
    browser.wait_for("the restarted run", "return document.getElementById('restarted-from')?.textContent === 'h-1'");
    browser.wait_for("it completed", "return document.querySelector('#run-status .status-completed') !== null");
    let new_id = browser.script("return decodeURIComponent(location.hash.split('/').pop())", json!([]));
    let new_id = new_id.as_str().unwrap();
    assert_ne!(new_id, "h-1");
    let restarted = api("GET", &format!("/v1/workflows/hello/runs/{new_id}"), None).1;
    assert_eq!((restarted["restarted_from"].as_str(), &restarted["output"]), (Some("h-1"), &json!("Hello, Ada!")));
    browser.goto(&format!("{home}#/runs/hello/h-1"));
    browser.wait_for(
        "the link to the restart",
        &format!("return document.querySelector('a.restart-link')?.textContent === '{new_id}'"),
    );

    // Schedules: listed with when they fire and their last firing (a link to its run); the
    // buttons trigger one now, pause and resume it.
    let every = r#"{"workflow":"hello","every":"1s","input":{"name":"Tick"}}"#;
    assert_eq!(api("PUT", "/v1/schedules/ticking", Some(every)).0, 200);
    let cron = r#"{"workflow":"hello","cron":["0 3 * * *"],"timeZone":"Europe/Berlin","input":{"name":"Cron"}}"#;
    assert_eq!(api("PUT", "/v1/schedules/nightly", Some(cron)).0, 200);
    browser.click("#nav-schedules");
    let nightly = "tr.schedule[data-name=nightly]";
    browser
        .wait_for("the schedules", &format!("return document.querySelector('{nightly}[data-state=active]') !== null"));
    assert!(browser.text(nightly).contains("0 3 * * * (Europe/Berlin)"), "{}", browser.text(nightly));
    assert!(browser.text("tr.schedule[data-name=ticking]").contains("every 1.00 s"));
    browser.wait_for(
        "a firing of ticking",
        "return document.querySelector('tr.schedule[data-name=ticking] a[href*=\"ticking%40\"]') !== null",
    );
    browser.screenshot("schedules");
    let hello_runs = || api("GET", "/v1/workflows/hello/runs?limit=1000", None).1["runs"].as_array().unwrap().len();
    let before = hello_runs();
    browser.click(&format!("{nightly} button[data-action=trigger]"));
    browser.wait_for(
        "the triggered run",
        "return document.getElementById('action-result').textContent.includes('started run nightly@')",
    );
    assert!(hello_runs() > before);
    browser.click(&format!("{nightly} button[data-action=pause]"));
    browser
        .wait_for("nightly paused", &format!("return document.querySelector('{nightly}[data-state=paused]') !== null"));
    assert_eq!(api("GET", "/v1/schedules/nightly", None).1["paused"], json!(true));
    browser.click(&format!("{nightly} button[data-action=resume]"));
    browser
        .wait_for("nightly active", &format!("return document.querySelector('{nightly}[data-state=active]') !== null"));
    assert_eq!(api("GET", "/v1/schedules/nightly", None).1["paused"], json!(false));
    browser.click("tr.schedule[data-name=ticking] a[href*=\"ticking%40\"]");
    browser.wait_for("the fired run", "return document.querySelector('#run-status .status-completed') !== null");
    let output: Value = serde_json::from_str(&browser.text("#output")).unwrap();
    assert_eq!(output, json!("Hello, Tick!"));
}

/// Serves `page` to every request on a port of its own (another origin than the server's), for
/// as long as the test runs; its address.
fn serve_page(page: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    address
}

/// A page on another origin that tries, as a hostile page would, to start and pause runs on the
/// server named in its URL's query: JSON with `fetch` (which needs CORS), and the requests a page
/// may send without asking (a `text/plain` body, a form post, a bodiless post). It sets
/// `window.done` with what each attempt saw, once each has its answer (the form's in a frame).
const OTHER_ORIGIN_PAGE: &str = r#"<!doctype html><html><body>
<form id="form" method="post" enctype="text/plain" target="sink"><input name='{"id":"form","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
const server = 'http://' + location.search.slice(1);
const start = server + '/v1/workflows/hello/runs';
const attempt = (name, request) => request.then((r) => name + ':' + (r.type === 'opaque' ? 'opaque' : r.status),
                                                  (e) => name + ':refused');
const form = new Promise((resolve) => { document.querySelector('iframe').onload = () => resolve('form:answered'); });
document.getElementById('form').action = start;
document.getElementById('form').submit();
Promise.all([
  form,
  attempt('json', fetch(start, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                 body: '{"id":"json","input":{"name":"x"}}' })),
  attempt('plain', fetch(start, { method: 'POST', mode: 'no-cors', body: '{"id":"plain","input":{"name":"x"}}' })),
  attempt('pause', fetch(server + '/v1/workflows/approval/runs/held/pause', { method: 'POST', mode: 'no-cors' })),
]).then((results) => { window.done = results.join(' '); });
</script></body></html>"#;

/// In a real browser, a page on another origin changes nothing on a server without a token: its
/// JSON start is refused by the browser (no CORS for that origin), and what it may send without
/// asking is refused by the server. Allowed by `CAIRN_ALLOW_ORIGINS`, the same page's JSON start
/// is served, so the test sees the difference.
#[test]
fn a_page_on_another_origin_changes_nothing_in_a_real_browser() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let page = serve_page(OTHER_ORIGIN_PAGE);
    let browser = Browser::start(&driver, &chromium);
    let dir = tempfile::tempdir().unwrap();
    for allowed in [false, true] {
        let origins = if allowed { format!("http://{page}") } else { String::new() };
        let db = dir.path().join(format!("allowed-{allowed}.db"));
        let server = Server::start_at(db, None, &[("CAIRN_ALLOW_ORIGINS", &origins)]);
        let address = server.address.clone();
        let (status, _) = http_with(&address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"held"}"#), None);
        assert_eq!(status, 201);
        await_status(&address, "/v1/workflows/approval/runs/held", "suspended", None);

        browser.goto(&format!("http://{page}/?{address}"));
        let seen = browser.wait_for("every attempt's end", "return window.done");
        let exists = |id: &str| http_with(&address, "GET", &format!("/v1/runs/{id}"), None, None).0 == 200;
        let held = http_with(&address, "GET", "/v1/workflows/approval/runs/held", None, None).1;
        assert_eq!(held["pause_requested"], json!(false), "allowed={allowed} {seen}: {held}");
        assert!(!exists("plain") && !exists("form"), "allowed={allowed}: {seen}");
        if allowed {
            assert!(seen.as_str().unwrap().contains("json:201"), "{seen}");
            assert!(exists("json"), "the allowed origin's JSON start was not served: {seen}");
        } else {
            assert!(seen.as_str().unwrap().contains("json:refused"), "{seen}");
            assert!(!exists("json"), "a page on another origin started a run: {seen}");
        }
    }
}
