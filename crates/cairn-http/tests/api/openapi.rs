//! The OpenAPI document against the router.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_matches_the_router() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let (status, document) = api.call("GET", "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"), "{}", document["openapi"]);
    assert_eq!(document, cairn_http::served_openapi(&cairn_http::ApiConfig::default()));
    // Without a token the document asks for none; with one, every route but two needs it.
    assert_eq!(document.get("security"), None);
    let secured = cairn_http::openapi();
    assert_eq!(secured["security"], json!([{"bearer": []}]));
    assert!(secured["paths"]["/v1/runs"]["get"]["responses"]["401"]["description"].is_string());
    assert_eq!(document["paths"]["/v1/runs"]["get"]["responses"].get("401"), None);

    // Every route the issue fixes is documented, and nothing else.
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.push((method.to_uppercase(), path.clone()));
        }
    }
    documented.sort();
    let mut expected: Vec<(String, String)> = [
        ("GET", "/"),
        ("GET", "/healthz"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/workers"),
        ("GET", "/v1/live/runs"),
        ("GET", "/v1/workflows/{name}/runs/{id}/live"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/workflows"),
        ("POST", "/v1/workflows/{name}/runs"),
        ("GET", "/v1/workflows/{name}/runs"),
        ("GET", "/v1/workflows/{name}/runs/{id}"),
        ("DELETE", "/v1/workflows/{name}/runs/{id}"),
        ("GET", "/v1/workflows/{name}/runs/{id}/steps"),
        ("GET", "/v1/workflows/{name}/runs/{id}/signals"),
        ("POST", "/v1/workflows/{name}/runs/{id}/signals/{event}"),
        ("POST", "/v1/workflows/{name}/runs/{id}/pause"),
        ("POST", "/v1/workflows/{name}/runs/{id}/resume"),
        ("POST", "/v1/workflows/{name}/runs/{id}/restart"),
        ("POST", "/v1/events/{topic}"),
        ("GET", "/v1/events"),
        ("GET", "/v1/runs/{id}"),
        ("DELETE", "/v1/runs/{id}"),
        ("GET", "/v1/runs/{id}/steps"),
        ("GET", "/v1/runs/{id}/signals"),
        ("POST", "/v1/runs/{id}/signals/{event}"),
        ("POST", "/v1/runs/{id}/pause"),
        ("POST", "/v1/runs/{id}/resume"),
        ("POST", "/v1/runs/{id}/restart"),
        ("GET", "/v1/runs/{id}/result"),
        ("POST", "/v1/runs/prune"),
        ("GET", "/v1/run-count"),
        ("POST", "/v1/runs/bulk"),
        ("GET", "/metrics"),
        ("GET", "/v1/workflows/{name}/runs/{id}/result"),
        ("GET", "/v1/schedules"),
        ("PUT", "/v1/schedules/{name}"),
        ("GET", "/v1/schedules/{name}"),
        ("DELETE", "/v1/schedules/{name}"),
        ("POST", "/v1/schedules/{name}/pause"),
        ("POST", "/v1/schedules/{name}/resume"),
        ("POST", "/v1/schedules/{name}/trigger"),
    ]
    .iter()
    .map(|(m, p)| (m.to_string(), p.to_string()))
    .collect();
    expected.sort();
    assert_eq!(documented, expected);

    // A `u32` the server takes (a version or a retention up to 4,294,967,295) is not documented
    // as `int32`, which tools read as at most 2,147,483,647 (Schemathesis sent 2,147,483,648 as
    // "schema-violating" and failed the server for taking it).
    let retention = &document["components"]["schemas"]["StartBody"]["properties"]["retentionDays"];
    assert_eq!((&retention["format"], &retention["maximum"]), (&json!("int64"), &json!(u32::MAX)), "{retention}");
    let text = document.to_string();
    assert!(!text.contains(r#""format":"int32","maximum":4294967295"#), "a u32 documented as int32");
    assert_eq!(document["components"]["schemas"]["RunView"]["properties"]["version"]["format"], "int64");

    // Every documented route answers on the real router (its handler, not the fallback), with a
    // status the document lists for it.
    for (method, path) in &documented {
        let uri = (path.replace("{name}", "approval").replace("{id}", "missing"))
            .replace("{event}", "approve")
            .replace("{topic}", "nobody.listens");
        let body = match path.as_str() {
            "/v1/workflows/{name}/runs" if method == "POST" => Some(r#"{"input":null}"#),
            p if p.ends_with("/restart") => Some(r#"{"fromStep":"approve"}"#),
            _ => None,
        };
        let (status, answer) = api.call(method, &uri, body).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        if !status.is_success() {
            assert_ne!(code(&answer), "not_found", "{method} {uri} fell through to the fallback");
        }
        let responses = &document["paths"][path][method.to_lowercase()]["responses"];
        assert!(
            responses.get(status.as_str()).is_some(),
            "{method} {path} answered {status}, not documented: {responses}"
        );
    }
    api.engine.shutdown().await;
}
