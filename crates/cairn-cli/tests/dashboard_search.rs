//! The dashboard's runs page in a real browser (headless Chromium over WebDriver) with 10,000
//! runs stored: older pages are read as the page scrolls, and each search finds what the API
//! finds (a run id's start, an input field, a time range, error text, stranded runs), with
//! counts that match, filters kept in the URL and workflows listed before they have runs. Runs
//! are started, events published and the runs a search selects cancelled, paused and resumed
//! from the page.

use crate::common::browser::{Browser, axe_script, browser_programs};
use crate::common::{Server, await_status, http};
use serde_json::{Value, json};

/// How many runs the test stores.
const RUNS: usize = 10_000;

/// Starts `hello` runs `n-00000` … with input `{"name": "c<i % 100>"}`, eight at a time.
fn start_hello_runs(address: &str, count: usize) {
    std::thread::scope(|scope| {
        for lane in 0..8 {
            scope.spawn(move || {
                for i in (lane..count).step_by(8) {
                    let body = json!({"id": format!("n-{i:05}"), "input": {"name": format!("c{}", i % 100)}});
                    let (status, answer) = http(address, "POST", "/v1/workflows/hello/runs", Some(&body.to_string()));
                    assert_eq!(status, 201, "{answer}");
                }
            });
        }
    });
}

/// The ids of the runs the API lists for `query`, newest first, up to 1,000.
fn api_ids(address: &str, query: &str) -> Vec<String> {
    let (status, page) = http(address, "GET", &format!("/v1/runs?limit=1000&{query}"), None);
    assert_eq!(status, 200, "{page}");
    page["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

/// The run ids the page's table shows, in order.
fn shown_ids(browser: &Browser) -> Vec<String> {
    let ids = browser.script("return [...document.querySelectorAll('tr.run')].map((r) => r.dataset.id)", json!([]));
    serde_json::from_value(ids).unwrap()
}

/// Submits the search form once the field `css` holds `text` (the other fields as they are).
fn search(browser: &Browser, css: &str, text: &str) {
    browser.type_into(css, text);
    browser.click("#search-button");
}

#[test]
fn every_run_is_reachable_and_findable_in_a_real_browser() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let server = Server::start(None);
    let address = server.address.clone();
    let browser = Browser::start(&driver, &chromium);
    let home = format!("http://{address}/");

    // Before any run: the registered workflows, and how to start a first run.
    browser.goto(&home);
    browser.wait_for("approval, with no runs", "return document.querySelector('tr[data-workflow=approval]') !== null");
    browser.wait_for("the empty state", "return document.getElementById('runs').textContent.includes('No runs yet')");

    start_hello_runs(&address, RUNS);
    for i in 0..3 {
        let body = json!({"id": format!("card-{i}"), "input": {"failures": 3, "attempts": 1}}).to_string();
        assert_eq!(http(&address, "POST", "/v1/workflows/flaky/runs", Some(&body)).0, 201);
    }
    // A run of a workflow no worker serves: stranded.
    let ghost = r#"{"id":"ghost","allowUnknown":true}"#;
    let (status, answer) = http(&address, "POST", "/v1/workflows/retired/runs", Some(ghost));
    assert_eq!(status, 201, "{answer}");
    for i in 0..3 {
        await_status(&address, &format!("/v1/workflows/flaky/runs/card-{i}"), "failed", None);
    }
    let completed = || http(&address, "GET", "/v1/run-count?workflow=hello&status=completed&at_most=100000", None).1;
    let since = std::time::Instant::now();
    while completed()["count"] != json!(RUNS) {
        assert!(since.elapsed() < std::time::Duration::from_secs(300), "the runs did not complete: {}", completed());
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // The first page, then older ones as the page scrolls to its end: the API's order, no
    // run twice.
    browser.goto(&home);
    browser.wait_for("the first page", "return document.querySelectorAll('tr.run').length === 50");
    browser.wait_for("the count", "return document.getElementById('runs-count').textContent === '10,000+ runs'");
    // Scrolling to the end of the table reads the next page (the button reads it too).
    let mut rows = 50;
    while rows < 250 {
        browser.script("document.getElementById('more').scrollIntoView()", json!([]));
        let more = format!("const n = document.querySelectorAll('tr.run').length; return n > {rows} && n");
        rows = browser.wait_for("another page", &more).as_u64().unwrap();
    }
    let shown = shown_ids(&browser);
    let listed = api_ids(&address, "");
    assert_eq!(shown[..], listed[..shown.len()], "the page's rows are the API's, in order");
    browser.screenshot("runs-paged");
    if let Some(axe) = axe_script() {
        assert_eq!(browser.axe_violations(&axe), Vec::<String>::new(), "axe-core on the paged runs");
    }

    // A run id's start: the oldest runs, 200 pages down, are one search away.
    search(&browser, "#id-filter", "n-0000");
    browser.wait_for("ten runs", "return document.getElementById('runs-count').textContent === '10 matching runs'");
    browser.wait_for("their rows", "return document.querySelectorAll('tr.run').length === 10");
    let mut found = shown_ids(&browser);
    found.sort();
    assert_eq!(found, (0..10).map(|i| format!("n-{i:05}")).collect::<Vec<_>>());
    assert!(browser.script("return location.hash", json!([])).as_str().unwrap().contains("id=n-0000"));

    // An input field: a hundred runs, a page of 50 and more to read.
    browser.type_into("#id-filter", "");
    search(&browser, "#input-filter", "name=c7");
    browser
        .wait_for("a hundred runs", "return document.getElementById('runs-count').textContent === '100 matching runs'");
    browser.wait_for("a page of them", "return document.querySelectorAll('tr.run').length === 50");
    assert_eq!(shown_ids(&browser), api_ids(&address, "input.name=c7")[..50]);
    assert!(shown_ids(&browser).iter().all(|id| id[2..].parse::<usize>().unwrap() % 100 == 7));

    // A time range, given in the URL: the runs the API finds between two of them.
    let listed = http(&address, "GET", "/v1/runs?limit=1000", None).1;
    let at = |i: usize| listed["runs"][i]["created_at"].as_str().unwrap().to_owned();
    let (from, before) = (at(900), at(100));
    let range = format!("since={from}&until={before}");
    let expected = http(&address, "GET", &format!("/v1/run-count?{range}"), None).1["count"].as_u64().unwrap();
    assert!(expected >= 2, "the range holds runs");
    browser.goto(&format!("{home}#/?{range}"));
    browser.wait_for(
        "the range's count",
        &format!("return document.getElementById('runs-count').textContent === '{expected} matching runs'"),
    );
    let first_page = api_ids(&address, &range).into_iter().take(50).collect::<Vec<_>>();
    browser.wait_for(
        "the range's rows",
        &format!("return document.querySelectorAll('tr.run').length === {}", first_page.len()),
    );
    assert_eq!(shown_ids(&browser), first_page);

    // Error text, any case; the search is a URL another page opens the same.
    browser.goto(&home);
    browser.wait_for("the first page", "return document.querySelectorAll('tr.run').length === 50");
    search(&browser, "#error-filter", "CARD service");
    browser
        .wait_for("the failed runs", "return document.getElementById('runs-count').textContent === '3 matching runs'");
    browser.wait_for("their rows", "return document.querySelectorAll('tr.run[data-status=failed]').length === 3");
    let shared = browser.script("return location.href", json!([])).as_str().unwrap().to_owned();
    browser.goto("about:blank");
    browser.goto(&shared);
    browser.wait_for("the same rows", "return document.querySelectorAll('tr.run[data-status=failed]').length === 3");
    assert_eq!(
        browser.script("return document.getElementById('error-filter').value", json!([])),
        json!("CARD service")
    );
    let mut failed = shown_ids(&browser);
    failed.sort();
    assert_eq!(failed, ["card-0", "card-1", "card-2"]);

    // Stranded runs: the one whose version no worker serves.
    browser.goto(&home);
    browser.wait_for("the first page", "return document.querySelectorAll('tr.run').length === 50");
    browser.click("#stranded-filter");
    browser.click("#search-button");
    browser
        .wait_for("the stranded run", "return document.getElementById('runs-count').textContent === '1 matching run'");
    assert_eq!(shown_ids(&browser), ["ghost"]);
    assert!(browser.text("tr.run[data-id=ghost]").contains("stranded"), "{}", browser.text("tr.run[data-id=ghost]"));

    // A search that finds nothing says so, with the way back.
    search(&browser, "#id-filter", "nothing-starts-so");
    browser.wait_for(
        "no rows",
        "return document.getElementById('runs').textContent.includes('No runs match these filters')",
    );
    assert_eq!(browser.count("#clear-filters"), 1);
    let text: Value = browser.script("return document.body.textContent.includes('[object')", json!([]));
    assert_eq!(text, json!(false));
}

#[test]
fn runs_are_started_published_and_steered_in_bulk_from_the_page() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let server = Server::start(None);
    let address = server.address.clone();
    let browser = Browser::start(&driver, &chromium);
    let home = format!("http://{address}/");
    assert_eq!(
        http(&address, "POST", "/v1/workflows/hello/runs", Some(r#"{"id":"h-1","input":{"name":"Ada"}}"#)).0,
        201
    );
    await_status(&address, "/v1/workflows/hello/runs/h-1", "completed", None);
    let runs = || http(&address, "GET", "/v1/run-count", None).1["count"].as_u64().unwrap();

    // Start: the form offers the newest run's input; a bad input is refused in the page.
    browser.goto(&home);
    browser.click("#start-panel summary");
    browser.wait_for("hello offered", "return document.querySelector('#start-workflow option[value=hello]') !== null");
    browser.click("#start-workflow option[value=hello]");
    browser.wait_for("Ada's input", "return document.getElementById('start-input').value.includes('Ada')");
    let before = runs();
    browser.type_into("#start-input", "{not json");
    browser.click("#start-button");
    browser.wait_for("the refusal", "return document.getElementById('action-result').textContent.includes('not JSON')");
    assert_eq!(runs(), before, "a refused start stores nothing");
    browser.type_into("#start-id", "from-page");
    browser.type_into("#start-input", r#"{"name": "Page"}"#);
    browser.click("#start-button");
    browser.wait_for("the new run's page", "return location.hash === '#/runs/hello/from-page'");
    browser.wait_for("it completed", "return document.querySelector('#run-status .status-completed') !== null");
    assert_eq!(serde_json::from_str::<Value>(&browser.text("#output")).unwrap(), json!("Hello, Page!"));

    // Publish: the runs it started, linked.
    browser.goto(&home);
    browser.click("#publish-panel summary");
    browser.type_into("#publish-topic", "user.signup");
    browser.type_into("#publish-id", "evt-1");
    browser.type_into("#publish-payload", r#"{"name": "Evt"}"#);
    browser.click("#publish-button");
    browser.wait_for("the started run", "return document.querySelector('a.published-run') !== null");
    browser.click("a.published-run");
    browser.wait_for("it completed", "return document.querySelector('#run-status .status-completed') !== null");
    assert_eq!(serde_json::from_str::<Value>(&browser.text("#output")).unwrap(), json!("Hello, Evt!"));

    // Bulk: the runs a search selects, after a confirmation; "Keep it" does nothing.
    for i in 0..3 {
        let body = format!(r#"{{"id":"b-{i}"}}"#);
        assert_eq!(http(&address, "POST", "/v1/workflows/approval/runs", Some(&body)).0, 201);
        await_status(&address, &format!("/v1/workflows/approval/runs/b-{i}"), "suspended", None);
    }
    browser.goto(&format!("{home}#/?workflow=approval&status=suspended"));
    browser.wait_for("the three", "return document.querySelectorAll('tr.run').length === 3");
    browser.click("#bulk-cancel");
    browser.click("#confirm-no");
    assert_eq!(browser.count("#confirm-yes"), 0);
    browser.click("#bulk-pause");
    if let Some(axe) = axe_script() {
        assert_eq!(browser.axe_violations(&axe), Vec::<String>::new(), "axe-core on a bulk confirmation");
    }
    browser.click("#confirm-yes");
    browser.wait_for(
        "the report",
        "return document.getElementById('bulk-result')?.textContent === 'pause: 3 done, 0 refused.'",
    );
    for i in 0..3 {
        assert_eq!(http(&address, "GET", &format!("/v1/runs/b-{i}"), None).1["status"], json!("paused"));
    }
    browser.goto(&format!("{home}#/?workflow=approval"));
    browser.wait_for("paused rows", "return document.querySelectorAll('tr.run[data-status=paused]').length === 3");
    browser.click("#bulk-resume");
    browser.click("#confirm-yes");
    browser.wait_for(
        "the report",
        "return document.getElementById('bulk-result')?.textContent === 'resume: 3 done, 0 refused.'",
    );
    browser.screenshot("bulk");
    for i in 0..3 {
        await_status(&address, &format!("/v1/workflows/approval/runs/b-{i}"), "suspended", None);
    }
}

#[test]
fn schedules_are_declared_edited_triggered_and_deleted_from_the_page() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let server = Server::start(None);
    let address = server.address.clone();
    let browser = Browser::start(&driver, &chromium);
    browser.goto(&format!("http://{address}/#/schedules"));
    browser.wait_for(
        "the empty state",
        "return document.getElementById('schedules').textContent.includes('No schedules')",
    );

    // Declared from the form.
    browser.click("#schedule-panel summary");
    browser
        .wait_for("hello offered", "return document.querySelector('#schedule-workflow option[value=hello]') !== null");
    browser.type_into("#schedule-name", "tick");
    browser.click("#schedule-workflow option[value=hello]");
    browser.type_into("#schedule-every", "1h");
    browser.type_into("#schedule-input", r#"{"name": "Sched"}"#);
    browser.click("#schedule-save");
    let tick = "tr.schedule[data-name=tick]";
    browser.wait_for("tick", &format!("return document.querySelector('{tick}')?.textContent.includes('every 1.0 h')"));
    assert_eq!(http(&address, "GET", "/v1/schedules/tick", None).1["every_ms"], json!(3_600_000));

    // Edited: the form shows it as stored; the change is saved.
    browser.click(&format!("{tick} button[data-action=edit]"));
    browser.wait_for("the stored interval", "return document.getElementById('schedule-every').value === '3600s'");
    assert!(
        browser
            .script("return document.getElementById('schedule-input').value", json!([]))
            .as_str()
            .unwrap()
            .contains("Sched")
    );
    browser.type_into("#schedule-every", "2h");
    browser.click("#schedule-save");
    browser.wait_for(
        "the new interval",
        &format!("return document.querySelector('{tick}')?.textContent.includes('every 2.0 h')"),
    );

    // Triggered: recorded as its last firing, linked, and in its firings.
    browser.click(&format!("{tick} button[data-action=trigger]"));
    browser.wait_for("the triggered run", "return document.getElementById('triggered-run') !== null");
    let run = browser.text("#triggered-run");
    assert!(run.starts_with("tick@"), "{run}");
    let stored = http(&address, "GET", "/v1/schedules/tick", None).1;
    assert_eq!(stored["last_run"], json!(run), "{stored}");
    browser.wait_for(
        "the last firing linked",
        &format!("return document.querySelector('{tick} a[href*=\"tick%40\"]') !== null"),
    );
    browser.click(&format!("{tick} button[data-action=history]"));
    browser.wait_for("its firing", &format!("return document.querySelector('tr.firing[data-id=\"{run}\"]') !== null"));
    assert_eq!(browser.count("tr.firing"), 1);
    browser.screenshot("schedule-firings");
    if let Some(axe) = axe_script() {
        assert_eq!(browser.axe_violations(&axe), Vec::<String>::new(), "axe-core on schedules and firings");
    }

    // Deleted, after a confirmation; its run stays.
    browser.click(&format!("{tick} button[data-action=delete]"));
    browser.click("#confirm-yes");
    browser.wait_for("tick gone", &format!("return document.querySelector('{tick}') === null"));
    assert_eq!(http(&address, "GET", "/v1/schedules/tick", None).0, 404);
    assert_eq!(http(&address, "GET", &format!("/v1/runs/{}", run.replace('@', "%40")), None).0, 200);
}
