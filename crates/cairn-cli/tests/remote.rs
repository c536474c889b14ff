//! `cairn … --url` against a real `cairn serve --examples` with a token: every `runs` command,
//! `workflows` and `events publish` print exactly what they print on the server's store itself
//! (`--db`, the same SQLite file), text and `--json`; changes made through the server show in
//! the store; errors are the same.

use crate::common::{Server, await_status, http_with};
use serde_json::{Value, json};
use std::process::{Command, Output};

const TOKEN: &str = "remote-secret";

/// `cairn ARGS` with `CAIRN_URL`/`CAIRN_TOKEN`/`CAIRN_DB` cleared, then `extra` environment.
fn cairn(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command.args(args).env_remove("CAIRN_URL").env_remove("CAIRN_TOKEN").env_remove("CAIRN_DB");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn ok(output: &Output) -> String {
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn json_of(output: &Output) -> Value {
    serde_json::from_str(&ok(output)).unwrap()
}

#[test]
fn every_command_prints_the_same_through_the_server_as_on_its_store() {
    let server = Server::start(Some(TOKEN));
    let address = server.address.clone();
    let url = format!("http://{address}");
    let db = server.db.to_str().unwrap().to_owned();
    let api = |method: &str, path: &str, body: Option<&str>| http_with(&address, method, path, body, Some(TOKEN));
    // Through the server: --url with the token from the environment; on the store: --db.
    let remote = |args: &[&str]| cairn(&[args, &["--url", &url]].concat(), &[("CAIRN_TOKEN", TOKEN)]);
    let local = |args: &[&str]| cairn(&[args, &["--db", &db]].concat(), &[]);

    // Runs in several states, started through the CLI over HTTP.
    let start =
        ["runs", "start", "hello", r#"{"name":"Ada"}"#, "--id", "h-1", "--idempotency-key", "k1", "--priority", "-5"];
    let started = json_of(&remote(&[&start[..], &["--json"]].concat()));
    assert_eq!((&started["id"], &started["created"]), (&json!("h-1"), &json!(true)), "{started}");
    let shown = ok(&local(&["runs", "show", "h-1"]));
    assert!(shown.contains("priority  -5\n"), "{shown}");
    await_status(&address, "/v1/workflows/hello/runs/h-1", "completed", Some(TOKEN));
    let again = ok(&remote(&["runs", "start", "hello", r#"{"name":"Ada"}"#, "--idempotency-key", "k1"]));
    assert_eq!(again, "h-1 already exists with this idempotency key (completed)\n");
    for id in ["a-1", "a-2", "a-3"] {
        assert_eq!(api("POST", "/v1/workflows/approval/runs", Some(&format!(r#"{{"id":"{id}"}}"#))).0, 201);
        await_status(&address, &format!("/v1/workflows/approval/runs/{id}"), "suspended", Some(TOKEN));
    }

    // Reading: the same bytes either way.
    let reads: Vec<Vec<&str>> = vec![
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "list", "--workflow", "approval", "--status", "suspended", "--json"],
        vec!["runs", "list", "--limit", "2", "--json"],
        vec!["runs", "list", "--stranded", "--json"],
        vec!["runs", "list", "--input", "name=Ada", "--json"],
        vec!["runs", "list", "--input", "name.first=Ada"],
        vec!["runs", "list", "--id-prefix", "a-", "--json"],
        vec!["runs", "list", "--error", "NO SUCH ERROR", "--json"],
        vec!["runs", "show", "h-1"],
        vec!["runs", "show", "h-1", "--json"],
        vec!["runs", "show", "a-1"],
        vec!["runs", "steps", "h-1"],
        vec!["runs", "steps", "a-1", "--json"],
        vec!["workflows"],
        vec!["workflows", "--json"],
        vec!["runs", "prune", "--dry-run", "--older-than", "0s", "--json"],
        vec!["runs", "count"],
        vec!["runs", "count", "--workflow", "approval", "--status", "suspended", "--json"],
        vec!["runs", "count", "--id-prefix", "a-", "--at-most", "2"],
    ];
    for args in &reads {
        let (through_server, on_store) = (remote(args), local(args));
        assert_eq!(ok(&through_server), ok(&on_store), "cairn {}", args.join(" "));
        assert_eq!(through_server.stderr, on_store.stderr, "cairn {}", args.join(" "));
    }
    assert_eq!(json_of(&remote(&["runs", "list", "--json"])).as_array().unwrap().len(), 4);
    let ada = json_of(&remote(&["runs", "list", "--input", "name=Ada", "--json"]));
    assert_eq!(ada.as_array().unwrap().iter().map(|r| &r["id"]).collect::<Vec<_>>(), [&json!("h-1")]);
    let approvals = json_of(&remote(&["runs", "list", "--id-prefix", "a-", "--json"]));
    assert_eq!(approvals.as_array().unwrap().len(), 3, "{approvals}");
    assert_eq!(ok(&remote(&["runs", "count", "--id-prefix", "a-", "--at-most", "2"])), "at least 2\n");

    // Acting on what a filter selects: a bulk pause through the server, a bulk resume on the
    // store, each run as its own command would.
    let paused = ok(&remote(&["runs", "bulk", "pause", "--workflow", "approval", "--id-prefix", "a-", "--limit", "2"]));
    assert_eq!(paused, "a-3  approval  paused\na-2  approval  paused\n2 done, 0 refused\n", "{paused}");
    let resumed = json_of(&local(&["runs", "bulk", "resume", "--id-prefix", "a-", "--json"]));
    assert_eq!((&resumed["done"], &resumed["refused"], &resumed["more"]), (&json!(2), &json!(1), &json!(false)));
    assert_eq!(resumed["runs"][2]["error"]["code"], json!("not_paused"), "{resumed}");
    for id in ["a-2", "a-3"] {
        await_status(&address, &format!("/v1/workflows/approval/runs/{id}"), "suspended", Some(TOKEN));
    }

    // Changing: through the server, seen in the store.
    let sent = json_of(&remote(&["runs", "signal", "a-1", "approve", r#"{"by":"cli"}"#, "--json"]));
    assert_eq!((&sent["run"], &sent["event"]), (&json!("a-1"), &json!("approve")), "{sent}");
    await_status(&address, "/v1/workflows/approval/runs/a-1", "completed", Some(TOKEN));
    assert_eq!(json_of(&local(&["runs", "show", "a-1", "--json"]))["run"]["output"], json!({"by": "cli"}));
    let cancelled = json_of(&remote(&["runs", "cancel", "a-2", "--reason", "wrong customer", "--json"]));
    assert_eq!(cancelled["run"], json!("a-2"));
    await_status(&address, "/v1/workflows/approval/runs/a-2", "cancelled", Some(TOKEN));
    assert_eq!(json_of(&local(&["runs", "show", "a-2", "--json"]))["run"]["error"], json!("wrong customer"));
    json_of(&remote(&["runs", "pause", "a-3", "--reason", "deploy freeze", "--json"]));
    await_status(&address, "/v1/workflows/approval/runs/a-3", "paused", Some(TOKEN));
    assert_eq!(json_of(&local(&["runs", "show", "a-3", "--json"]))["run"]["error"], json!("deploy freeze"));
    assert_eq!(json_of(&remote(&["runs", "resume", "a-3", "--json"])), json!({"run": "a-3", "outcome": "resumed"}));
    json_of(&local(&["runs", "pause", "a-3", "--reason", "paused on the store", "--json"]));
    assert_eq!(json_of(&remote(&["runs", "show", "a-3", "--json"]))["run"]["error"], json!("paused on the store"));
    assert_eq!(json_of(&local(&["runs", "resume", "a-3", "--json"])), json!({"run": "a-3", "outcome": "resumed"}));
    let restart = ["runs", "restart", "h-1", "--from-step", "greet", "--reason", "a second greeting", "--json"];
    let restarted = json_of(&remote(&restart));
    assert_eq!((&restarted["restarted_from"], &restarted["from_step"]), (&json!("h-1"), &json!("greet")));
    let steps = json_of(&local(&["runs", "steps", restarted["run"].as_str().unwrap(), "--json"]));
    assert_eq!(steps["journal"][0]["event"]["started"]["reason"], json!("a second greeting"), "{steps}");
    let published =
        json_of(&remote(&["events", "publish", "user.signup", r#"{"name":"Bo"}"#, "--id", "e-1", "--json"]));
    assert_eq!(published["runs"].as_array().unwrap().len(), 1, "{published}");
    let republished =
        json_of(&local(&["events", "publish", "user.signup", r#"{"name":"Bo"}"#, "--id", "e-1", "--json"]));
    assert_eq!(republished["already_started"][0]["id"], published["runs"][0]["id"]);
    json_of(&local(&["events", "publish", "order.placed", "--id", "e-2", "--json"]));
    for args in [
        vec!["events", "list"],
        vec!["events", "list", "--json"],
        vec!["events", "list", "--topic", "user.signup", "--json"],
        vec!["events", "list", "--limit", "1"],
    ] {
        assert_eq!(ok(&remote(&args)), ok(&local(&args)), "cairn {}", args.join(" "));
    }
    let events = json_of(&remote(&["events", "list", "--json"]));
    assert_eq!(
        (&events["events"][0]["id"], &events["events"][1]["runs"][0]["id"]),
        (&json!("e-2"), &published["runs"][0]["id"])
    );
    let cursor =
        json_of(&local(&["events", "list", "--limit", "1", "--json"]))["next_cursor"].as_str().unwrap().to_owned();
    let older = json_of(&remote(&["events", "list", "--limit", "1", "--cursor", &cursor, "--json"]));
    assert_eq!(older["events"][0]["id"], json!("e-1"), "{older}");

    // Schedules: declared through the server, read the same either way, steered either way.
    let put = ["schedules", "put", "new-year", "--workflow", "hello", "--cron", "0 0 1 1 *", "--tz", "Asia/Tokyo"];
    let declared =
        json_of(&remote(&[&put[..], &["--input", r#"{"name":"Yuki"}"#, "--catch-up", "skip", "--json"]].concat()));
    assert_eq!((&declared["time_zone"], &declared["catch_up"]), (&json!("Asia/Tokyo"), &json!("skip")), "{declared}");
    for args in [vec!["schedules", "list"], vec!["schedules", "list", "--json"], vec!["schedules", "show", "new-year"]]
    {
        assert_eq!(ok(&remote(&args)), ok(&local(&args)), "cairn {}", args.join(" "));
    }
    assert_eq!(ok(&local(&["schedules", "pause", "new-year"])), "paused new-year\n");
    assert_eq!(json_of(&remote(&["schedules", "show", "new-year", "--json"]))["paused"], json!(true));
    assert!(ok(&remote(&["schedules", "resume", "new-year"])).starts_with("resumed new-year; next firing 20"));
    let triggered = ok(&remote(&["schedules", "trigger", "new-year"]));
    assert!(triggered.starts_with("started new-year@") && triggered.contains("(hello v1)"), "{triggered}");
    let bad = remote(&["schedules", "put", "bad", "--workflow", "hello", "--cron", "not cron"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("CAIRN-E0311"), "{}", String::from_utf8_lossy(&bad.stderr));
    assert_eq!(ok(&remote(&["schedules", "delete", "new-year"])), "deleted new-year\n");
    let gone = local(&["schedules", "show", "new-year"]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("CAIRN-E0310"), "{}", String::from_utf8_lossy(&gone.stderr));

    // Workers: the server's own, through it as in its store (their heartbeat times move, so
    // compared by content); `--all` too (`GET /v1/workers?all=true`).
    let workers = json_of(&remote(&["workers", "--json"]));
    let [worker] = &workers.as_array().unwrap()[..] else { panic!("{workers}") };
    let local_workers = json_of(&local(&["workers", "--json"]));
    assert_eq!((&worker["id"], &worker["serves"]), (&local_workers[0]["id"], &local_workers[0]["serves"]));
    assert!(ok(&remote(&["workers"])).contains("hello@1"));
    let all = json_of(&remote(&["workers", "--all", "--json"]));
    let local_all = json_of(&local(&["workers", "--all", "--json"]));
    let ids = |workers: &Value| workers.as_array().unwrap().iter().map(|w| w["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&all), ids(&local_all), "{all}");

    // A debounced start through the server: the second joins the first.
    let debounced = ["runs", "start", "approval", "null", "--debounce", "k", "--quiet", "1h", "--json"];
    let (first, second) = (json_of(&remote(&debounced)), json_of(&remote(&debounced)));
    assert_eq!((&first["created"], &second["created"], &second["id"]), (&json!(true), &json!(false), &first["id"]));
    assert_eq!(second["waiting_for"], json!("debounce"), "{second}");

    // Errors: the same message, and nothing changed.
    let before = ok(&local(&["runs", "list", "--json"]));
    let failures: Vec<Vec<&str>> = vec![
        vec!["runs", "show", "nope"],
        vec!["runs", "cancel", "a-2"],
        vec!["runs", "resume", "a-1"],
        vec!["runs", "signal", "a-1", "approve", "{not json"],
        vec!["runs", "list", "--status", "sleeping"],
        vec!["runs", "restart", "a-3", "--from-step", "approve"],
        vec!["events", "publish", "user..signup"],
        vec!["events", "list", "--topic", "user.*"],
        vec!["runs", "cancel", "a-3", "--reason", ""],
        vec!["runs", "pause", "a-3", "--reason", ""],
        vec!["runs", "restart", "h-1", "--from-step", "greet", "--reason", "a\nb"],
        vec!["runs", "list", "--input", "name"],
        vec!["runs", "start", "approval", "null", "--debounce", "", "--quiet", "1s"],
    ];
    for args in &failures {
        let (through_server, on_store) = (remote(args), local(args));
        assert!(!through_server.status.success(), "cairn {} --url succeeded", args.join(" "));
        let said = String::from_utf8_lossy(&through_server.stderr);
        let code = |text: &str| text.split_once("[CAIRN-E").map(|(_, rest)| rest[..4].to_owned());
        assert_eq!(code(&said), code(&String::from_utf8_lossy(&on_store.stderr)), "cairn {}: {said}", args.join(" "));
        assert!(said.starts_with("error: "), "{said}");
    }
    assert_eq!(ok(&local(&["runs", "list", "--json"])), before, "a refused command changed the store");

    // Without the token, or with a wrong one, or no server: a clear error.
    let refused = cairn(&["runs", "list", "--url", &url], &[]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("bearer token (set CAIRN_TOKEN or --token)"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let wrong = cairn(&["runs", "list", "--url", &url, "--token", "nope"], &[]);
    assert!(!wrong.status.success());
    let ftp = cairn(&["runs", "list", "--url", "ftp://example.com"], &[]);
    assert!(String::from_utf8_lossy(&ftp.stderr).contains("http:// or https://"));
    let nobody = cairn(&["runs", "list"], &[("CAIRN_URL", "http://127.0.0.1:1")]);
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("cannot reach"),
        "{}",
        String::from_utf8_lossy(&nobody.stderr)
    );
}

/// A TLS proxy on a port of its own in front of `backend` (plain HTTP), serving `certificate`
/// (PEM) with `key` (PEM); its port. It runs on a thread of its own for the rest of the test.
#[cfg(feature = "https")]
fn tls_proxy(backend: String, certificate: &str, key: &str) -> u16 {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    let chain = vec![rustls::pki_types::CertificateDer::from_pem_slice(certificate.as_bytes()).unwrap()];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing to serve.
                    let Ok(mut secured) = acceptor.accept(stream).await else { return };
                    let mut plain = tokio::net::TcpStream::connect(backend).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut secured, &mut plain).await;
                });
            }
        });
    });
    port
}

/// `--url https://…` speaks TLS: through a TLS proxy in front of `cairn serve`, trusting its
/// certificate (`SSL_CERT_FILE`), a start and a list work and print what they print over plain
/// HTTP; trusting another certificate, the command fails on the certificate and starts nothing.
/// Built with the `https` feature (`.ci/run` runs it).
#[cfg(feature = "https")]
#[test]
fn https_urls_are_spoken_and_checked() {
    let server = Server::start(None);
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let trusted = dir.path().join("proxy.pem");
    std::fs::write(&trusted, made.cert.pem()).unwrap();
    let port = tls_proxy(server.address.clone(), &made.cert.pem(), &made.signing_key.serialize_pem());
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let untrusted = dir.path().join("other.pem");
    std::fs::write(&untrusted, other.cert.pem()).unwrap();

    let https = format!("https://localhost:{port}");
    let trusting = [("SSL_CERT_FILE", trusted.to_str().unwrap())];
    let start = ["runs", "start", "hello", r#"{"name":"Ada"}"#, "--id", "tls-1", "--json"];
    let started = json_of(&cairn(&[&start[..], &["--url", &https]].concat(), &trusting));
    assert_eq!((&started["id"], &started["created"]), (&json!("tls-1"), &json!(true)), "{started}");
    await_status(&server.address, "/v1/runs/tls-1", "completed", None);
    let plain = format!("http://{}", server.address);
    let list = ["runs", "list", "--workflow", "hello", "--json"];
    assert_eq!(
        json_of(&cairn(&[&list[..], &["--url", &https]].concat(), &trusting)),
        json_of(&cairn(&[&list[..], &["--url", &plain]].concat(), &[]))
    );

    let doubting = [("SSL_CERT_FILE", untrusted.to_str().unwrap())];
    let start = ["runs", "start", "hello", r#"{"name":"Bo"}"#, "--id", "tls-2", "--url", &https];
    let refused = cairn(&start, &doubting);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.to_lowercase().contains("certificate"), "{stderr}");
    assert_eq!(http_with(&server.address, "GET", "/v1/runs/tls-2", None, None).0, 404, "nothing started");
}
