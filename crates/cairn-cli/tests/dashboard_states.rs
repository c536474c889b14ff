//! The dashboard tells the truth in a real browser (headless Chromium over WebDriver): a run's
//! states as they are (paused is no error, a cancelled run's wait is over), missing runs and
//! wrong URLs said as such, a banner with every action off while the server does not answer
//! and back once it does, pages left that let their streams go, a text selection that survives live updates, no page wider than the
//! window at 800 and 400 pixels, and text that meets WCAG AA contrast in light and dark mode;
//! axe-core finds no violation on any page or state (`CAIRN_AXE_JS`).

/// Asserts that axe-core, when given, finds nothing on the page as it is now (`what` names it).
fn no_axe_violations(browser: &Browser, axe: &Option<String>, what: &str) {
    if let Some(axe) = axe {
        assert_eq!(browser.axe_violations(axe), Vec::<String>::new(), "axe-core on {what}");
    }
}

use crate::common::browser::{Browser, axe_script, browser_programs};
use crate::common::{Server, await_status, http};
use serde_json::{Value, json};
use std::net::TcpListener;

/// Every text on the page whose contrast against its background is below WCAG AA (4.5:1, or
/// 3:1 for large text), as `text ratio < needed (colours)`; disabled controls are exempt, as
/// WCAG exempts inactive parts. Backgrounds are composited up the ancestors, text colour with
/// the opacity of its ancestors.
const LOW_CONTRAST: &str = r#"
const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null;
  const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
const luminance = (c) => 0.2126 * channel(c[0]) + 0.7152 * channel(c[1]) + 0.0722 * channel(c[2]);
const background = (node) => { const layers = [];
  for (let e = node; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c[3] > 0) { layers.push(c); if (c[3] === 1) break; } }
  const root = parse(getComputedStyle(document.documentElement).backgroundColor);
  let base = root && root[3] === 1 ? root.slice(0, 3) : [255, 255, 255];
  for (const c of layers.reverse()) base = base.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
  return base; };
const failures = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  const e = n.parentElement;
  if (!n.nodeValue.trim() || !e || e.closest('[hidden], svg, script, style, option, :disabled')) continue;
  const style = getComputedStyle(e);
  const rect = e.getBoundingClientRect();
  if (style.visibility === 'hidden' || !rect.width || !rect.height) continue;
  let opacity = 1;
  for (let a = e; a; a = a.parentElement) opacity *= Number(getComputedStyle(a).opacity);
  const bg = background(e);
  const c = parse(style.color);
  const fg = c.slice(0, 3).map((v, i) => v * c[3] * opacity + bg[i] * (1 - c[3] * opacity));
  const [high, low] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
  const ratio = (high + 0.05) / (low + 0.05);
  const size = parseFloat(style.fontSize);
  const needed = size >= 24 || (Number(style.fontWeight) >= 700 && size >= 18.66) ? 3 : 4.5;
  if (ratio < needed) failures.push(JSON.stringify(n.nodeValue.trim().slice(0, 40)) + ' ' + ratio.toFixed(2) + ' < '
    + needed + ' (rgb(' + fg.map(Math.round) + ') on rgb(' + bg.map(Math.round) + '))');
}
return failures;
"#;

/// Whether the page is wider than its window (it would scroll sideways).
const WIDER_THAN_WINDOW: &str = "return document.documentElement.scrollWidth > document.documentElement.clientWidth \
    ? document.documentElement.scrollWidth + ' > ' + document.documentElement.clientWidth : false";

fn free_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn start(address: &str, body: &str, workflow: &str) {
    let (status, answer) = http(address, "POST", &format!("/v1/workflows/{workflow}/runs"), Some(body));
    assert_eq!(status, 201, "{answer}");
}

#[test]
fn the_dashboard_tells_the_truth_in_a_real_browser() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let listen = free_address();
    let server = Server::start_listening(db.clone(), None, &[], &listen);
    let address = server.address.clone();
    let browser = Browser::start(&driver, &chromium);
    let axe = axe_script();
    let home = format!("http://{address}/");
    let page_text = || browser.script("return document.body.textContent", json!([])).as_str().unwrap().to_owned();

    // A page left lets its stream go: a browser holds six connections to a server, so eight
    // loads in a row would otherwise leave the seventh waiting about a minute for one.
    start(&address, r#"{"id":"s-0","input":{"name":"Zed"}}"#, "hello");
    for load in 0..8 {
        browser.goto("about:blank");
        browser.goto(&home);
        browser.wait_for(
            &format!("load {load}'s rows"),
            "return document.querySelector('tr.run[data-id=\"s-0\"]') !== null",
        );
    }

    // A selection in the runs table survives the live update that adds a row above it.
    start(&address, r#"{"id":"s-1","input":{"name":"Ada"}}"#, "hello");
    await_status(&address, "/v1/workflows/hello/runs/s-1", "completed", None);
    browser.goto(&home);
    browser.wait_for("s-1", "return document.querySelector('tr.run[data-id=\"s-1\"]') !== null");
    let select = "const a = document.querySelector('tr.run[data-id=\"s-1\"] a'); const r = document.createRange(); \
        r.selectNodeContents(a); getSelection().removeAllRanges(); getSelection().addRange(r); return getSelection().toString()";
    assert_eq!(browser.script(select, json!([])), json!("s-1"));
    start(&address, r#"{"id":"s-2","input":{"name":"Bo"}}"#, "hello");
    browser.wait_for(
        "s-2 above it",
        "return document.querySelector('tr.run[data-id=\"s-2\"][data-status=completed]') !== null",
    );
    assert_eq!(browser.script("return getSelection().toString()", json!([])), json!("s-1"));

    // Paused is a state, not an error.
    start(&address, r#"{"id":"w-1"}"#, "approval");
    await_status(&address, "/v1/workflows/approval/runs/w-1", "suspended", None);
    browser.goto(&format!("{home}#/runs/approval/w-1"));
    browser.wait_for("w-1 waiting", "return document.querySelector('#run-status .status-suspended') !== null");
    browser.wait_for("its open wait", "return document.querySelector('tr.step-row[data-phase=waiting]') !== null");
    assert_eq!(http(&address, "POST", "/v1/workflows/approval/runs/w-1/pause", None).0, 200);
    browser.wait_for("w-1 paused", "return document.querySelector('#run-status .status-paused') !== null");
    assert_eq!(browser.text("#output"), "Paused: paused by request.");
    assert_eq!(browser.count("#outcome .error-text"), 0);
    no_axe_violations(&browser, &axe, "a paused run");

    // A cancelled run's wait ended with it: no open phase, no growing bar.
    assert_eq!(http(&address, "POST", "/v1/workflows/approval/runs/w-1/resume", None).0, 200);
    assert_eq!(http(&address, "DELETE", "/v1/workflows/approval/runs/w-1", None).0, 200);
    browser.wait_for("w-1 cancelled", "return document.querySelector('#run-status .status-cancelled') !== null");
    browser.wait_for(
        "the wait abandoned",
        "return document.querySelector('g.step[data-kind=wait][data-phase=abandoned] rect.abandoned') !== null",
    );
    assert_eq!(browser.count("tr.step-row[data-phase=waiting]"), 0);
    assert!(!browser.text("#steps").contains("open"), "{}", browser.text("#steps"));
    let steps = http(&address, "GET", "/v1/workflows/approval/runs/w-1/steps", None).1;
    assert_eq!(steps["steps"][0]["phase"], json!("abandoned"), "{steps}");
    assert!(browser.text("#facts").contains(" after "), "the run's length: {}", browser.text("#facts"));
    browser.screenshot("cancelled");
    no_axe_violations(&browser, &axe, "a cancelled run");

    // A missing run, and a run under the wrong workflow, are said as such, with no actions.
    browser.goto(&format!("{home}#/runs/hello/nobody"));
    browser.wait_for(
        "the missing run",
        "return document.getElementById('run-error')?.textContent.includes('There is no run')",
    );
    assert_eq!(browser.script("return document.getElementById('run-body').hidden", json!([])), json!(true));
    no_axe_violations(&browser, &axe, "a missing run");
    browser.goto(&format!("{home}#/runs/hello/w-1"));
    browser
        .wait_for("the right workflow", "return document.getElementById('run-elsewhere')?.textContent === 'approval'");
    browser.click("#run-elsewhere");
    browser.wait_for("w-1 under approval", "return document.querySelector('#run-status .status-cancelled') !== null");
    browser.goto(&format!("{home}#/nowhere"));
    browser.wait_for("no such page", "return document.getElementById('page-error') !== null");

    // The server stops: a banner, every action off; it comes back: the banner goes, the
    // actions work.
    start(&address, r#"{"id":"w-2"}"#, "approval");
    await_status(&address, "/v1/workflows/approval/runs/w-2", "suspended", None);
    browser.goto(&format!("{home}#/runs/approval/w-2"));
    browser.wait_for("w-2 cancellable", "return !document.getElementById('cancel').disabled");
    drop(server);
    browser.wait_for("the banner", "return !document.getElementById('offline').hidden");
    for action in ["cancel", "pause", "send-signal"] {
        let disabled = browser.script(&format!("return document.getElementById('{action}').disabled"), json!([]));
        assert_eq!(disabled, json!(true), "{action} while the server is down");
    }
    browser.screenshot("offline");
    no_axe_violations(&browser, &axe, "the banner of an unreachable server");
    let server = Server::start_listening(db, None, &[], &listen);
    browser.wait_for("the banner gone", "return document.getElementById('offline').hidden");
    browser.wait_for("cancel back", "return !document.getElementById('cancel').disabled");
    browser.click("#cancel");
    browser.type_into("#confirm-reason", "wrong customer");
    browser.click("#confirm-yes");
    browser.wait_for("w-2 cancelled", "return document.querySelector('#run-status .status-cancelled') !== null");
    await_status(&server.address, "/v1/workflows/approval/runs/w-2", "cancelled", None);
    // The reason given is stored, journaled and shown.
    browser.wait_for(
        "the reason",
        "return document.getElementById('output')?.textContent === 'Cancelled: wrong customer.'",
    );
    let run = http(&address, "GET", "/v1/runs/w-2", None).1;
    assert_eq!(run["error"], json!("wrong customer"), "{run}");

    // A restart with a reason: the new run says why it started.
    browser.wait_for("restart allowed", "return !document.getElementById('restart').disabled");
    browser.click("#restart");
    browser.type_into("#confirm-reason", "the customer asked again");
    browser.click("#confirm-yes");
    browser.wait_for("the restarted run", "return document.getElementById('restarted-from')?.textContent === 'w-2'");
    browser.wait_for(
        "its reason",
        "return document.getElementById('start-reason')?.textContent === 'the customer asked again'",
    );
    no_axe_violations(&browser, &axe, "a restarted run with its reason");

    // The events view: an event published from the page appears with the run it started, and
    // one nobody subscribes to says so.
    browser.goto(&format!("{home}#/events"));
    browser.wait_for("no events", "return document.getElementById('events')?.textContent.includes('No events yet')");
    no_axe_violations(&browser, &axe, "the events view, empty");
    browser.click("#publish-panel summary");
    browser.type_into("#publish-topic", "user.signup");
    browser.type_into("#publish-id", "ev-1");
    browser.type_into("#publish-payload", r#"{"name":"Eve"}"#);
    browser.click("#publish-button");
    browser.wait_for(
        "ev-1 listed",
        "return document.querySelector('tr.event-row[data-key=\"ev-1\"] a.event-run') !== null",
    );
    let started = http(&address, "GET", "/v1/events", None).1;
    let hello = started["events"][0]["runs"][0]["id"].as_str().expect("a run").to_owned();
    assert_eq!(browser.text("tr.event-row[data-key=\"ev-1\"] a.event-run"), hello);
    assert_eq!(http(&address, "POST", "/v1/events/order.placed", Some(r#"{"id":"ev-2"}"#)).0, 200);
    browser.wait_for("ev-2 listed", "return document.querySelector('tr.event-row[data-key=\"ev-2\"]') !== null");
    assert!(browser.text("tr.event-row[data-key=\"ev-2\"]").contains("no workflow subscribed"));
    browser.screenshot("events");
    browser.click("tr.event-row[data-key=\"ev-1\"] a.event-run");
    browser.wait_for("the event's run", &format!("return location.hash === '#/runs/hello/{hello}'"));
    browser.goto(&format!("{home}#/events?topic=order.placed"));
    browser.wait_for("by topic", "return document.querySelectorAll('tr.event-row').length === 1");

    // No page is wider than its window at 800 and 400 pixels; text meets AA contrast, in light
    // and dark mode.
    let flaky = r#"{"id":"f-1","input":{"failures":1}}"#;
    start(&address, flaky, "flaky");
    await_status(&address, "/v1/workflows/flaky/runs/f-1", "completed", None);
    for (scheme, background) in [("light", "rgb(248, 249, 251)"), ("dark", "rgb(18, 21, 27)")] {
        browser.devtools(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        for (name, page, ready) in [
            ("runs", "#/", "return document.querySelectorAll('tr.run').length >= 4"),
            ("search", "#/?workflow=hello", "return document.querySelectorAll('tr.run').length === 4"),
            ("run", "#/runs/flaky/f-1", "return document.querySelector('#steps-table') !== null"),
            (
                "schedules",
                "#/schedules",
                "return document.getElementById('schedules').textContent.includes('No schedules')",
            ),
            ("events", "#/events", "return document.querySelectorAll('tr.event-row').length === 2"),
        ] {
            for width in [1280, 800, 400] {
                browser.window(width, 900);
                browser.goto(&format!("{home}{page}"));
                browser.wait_for(page, ready);
                let body = browser.script("return getComputedStyle(document.body).backgroundColor", json!([]));
                assert_eq!(body, json!(background), "{scheme} {page}");
                let wider = browser.script(WIDER_THAN_WINDOW, json!([]));
                assert_eq!(wider, json!(false), "{page} at {width} px in {scheme} mode scrolls sideways");
                let stray = "return [...document.getElementById('view').childNodes] \
                    .filter((n) => n.nodeType === 3 && n.textContent.trim()).map((n) => n.textContent)";
                assert_eq!(browser.script(stray, json!([])), json!([]), "{page}: text outside any element");
                let low: Value = browser.script(LOW_CONTRAST, json!([]));
                assert_eq!(low, json!([]), "{page} at {width} px in {scheme} mode");
                if width != 800 {
                    no_axe_violations(&browser, &axe, &format!("{page} at {width} px in {scheme} mode"));
                }
            }
            if scheme == "dark" {
                browser.window(1280, 1000);
                browser.screenshot(&format!("dark-{name}"));
            }
        }
    }
    browser.window(400, 900);
    browser.goto(&format!("{home}#/runs/flaky/f-1"));
    browser.wait_for("f-1", "return document.querySelector('#steps-table') !== null");
    browser.screenshot("narrow-run");
    assert!(!page_text().contains("[object"), "{}", page_text());

    // Older events are a button away: 50 to a page, then the rest, none twice.
    for i in 0..50 {
        let event = format!(r#"{{"id":"bulk-{i:02}"}}"#);
        assert_eq!(http(&address, "POST", "/v1/events/order.placed", Some(&event)).0, 200);
    }
    browser.window(1280, 900);
    browser.goto(&format!("{home}#/events"));
    browser.wait_for("the first page", "return document.querySelectorAll('tr.event-row').length === 50");
    browser.click("#older-events");
    browser.wait_for("every event", "return document.querySelectorAll('tr.event-row').length === 52");
    assert_eq!(browser.count("#older-events"), 0, "no older page is left");
}

/// A run as people read it: its scopes as a tree with each one's status (an `each` item per
/// scope, a child's scope linked to the child run), its durable values, its input and output
/// as JSON that folds and copies, its flow keys, what it waits for, and a warning for a signal
/// no wait asks for.
#[test]
fn a_run_reads_as_a_graph_with_its_values_keys_and_waits() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let server = Server::start(None);
    let address = server.address.clone();
    let browser = Browser::start(&driver, &chromium);
    let axe = axe_script();
    let home = format!("http://{address}/");

    start(&address, r#"{"id":"f-1","input":{"items":3}}"#, "fanout");
    await_status(&address, "/v1/workflows/fanout/runs/f-1", "completed", None);
    browser.goto(&format!("{home}#/runs/fanout/f-1"));
    browser.wait_for("the graph", "return document.querySelector('li.graph-node[data-path=\"item[2]\"]') !== null");
    for i in 0..3 {
        let item = format!("li.graph-node[data-path=\"item[{i}]\"][data-status=completed][data-kind=scope]");
        assert_eq!(browser.count(&item), 1, "{item}");
        assert_eq!(browser.count(&format!("{item} li.graph-node[data-path=\"item[{i}]/work\"][data-kind=step]")), 1);
    }
    browser.wait_for("the child's link", "return document.querySelector('a.child-run') !== null");
    assert_eq!(browser.text("tr.var[data-name=done] td.mono + td"), "3");
    let output: Value = serde_json::from_str(&browser.text("#output")).unwrap();
    assert_eq!(output, json!("3 items; the child said Hello, child!"));
    let input: Value = serde_json::from_str(&browser.text("#input")).unwrap();
    assert_eq!(input, json!({"items": 3}));
    browser.click("#input details > summary");
    assert_eq!(browser.script("return document.querySelector('#input details').open", json!([])), json!(false));
    let folded = "return getComputedStyle(document.querySelector('#input summary'), '::after').content";
    let folded = browser.script(folded, json!([]));
    assert!(folded.as_str().unwrap().contains("1 key }"), "{folded}");
    browser.click("button[data-copy=input]");
    browser.wait_for("copied", "return document.querySelector('button[data-copy=input]').textContent !== 'Copy'");
    browser.screenshot("graph");
    no_axe_violations(&browser, &axe, "a run's graph, values and JSON");
    browser.click("a.child-run");
    browser.wait_for("the child run", "return location.hash.startsWith('#/runs/hello/') && document.querySelector('#run-status .status-completed') !== null");
    assert!(browser.text("#facts").contains("f-1"), "its parent: {}", browser.text("#facts"));

    // A scope with many children (150 items and the child's scope) shows the first hundred and
    // counts the rest, until asked.
    start(&address, r#"{"id":"f-2","input":{"items":150}}"#, "fanout");
    await_status(&address, "/v1/workflows/fanout/runs/f-2", "completed", None);
    browser.goto(&format!("{home}#/runs/fanout/f-2"));
    browser.wait_for("the graph's count", "return document.querySelector('li.graph-more') !== null");
    assert_eq!(browser.count("ul.graph > li.graph-node[data-path^=item]"), 100);
    assert!(browser.text("li.graph-more").contains("51 more (51 completed)"), "{}", browser.text("li.graph-more"));
    browser.click("li.graph-more button");
    browser.wait_for(
        "every item",
        "return document.querySelectorAll('ul.graph > li.graph-node[data-path^=item]').length === 150",
    );

    // Flow keys, what it waits for, and the signal warning.
    start(&address, r#"{"id":"w-3","priority":5,"fairnessKey":"tenant-7"}"#, "approval");
    await_status(&address, "/v1/workflows/approval/runs/w-3", "suspended", None);
    browser.goto(&format!("{home}#/runs/approval/w-3"));
    browser
        .wait_for("its wait", "return document.getElementById('waiting-for')?.textContent.includes('signal approve')");
    let facts = browser.text("#facts");
    assert!(facts.contains("tenant-7") && facts.contains("priority5"), "{facts}");
    browser.type_into("#signal-name", "aprove");
    browser.wait_for("the warning", "return !document.getElementById('signal-warning').hidden");
    assert!(browser.text("#signal-warning").contains("\"approve\""), "{}", browser.text("#signal-warning"));
    no_axe_violations(&browser, &axe, "a waiting run with a signal warning");
    browser.type_into("#signal-name", "approve");
    browser.wait_for("no warning", "return document.getElementById('signal-warning').hidden");
}
