//! What a browser may make the server do. A request that changes something must carry its body
//! as JSON (`415` otherwise: a page can post a form or `text/plain` to any address without
//! asking, but not JSON) and must come from the server's own origin or one the allow-list names
//! (`403` otherwise). Allowed origins get CORS headers, and their preflights are answered.

use crate::body::has_body;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Guards every route with the `allowed` origins (`scheme://host[:port]`, as browsers send them).
pub(crate) async fn guard(State(allowed): State<Arc<[String]>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let origin = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let allowed_origin = origin.as_ref().filter(|origin| allowed.iter().any(|a| a == *origin)).cloned();
    if request.method() == Method::OPTIONS
        && let Some(origin) = &allowed_origin
    {
        return preflight(origin);
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        if let Some(origin) = &origin
            && allowed_origin.is_none()
            && !same_origin(origin, headers)
        {
            let message = format!("requests from {origin:?} may not change anything here (see --allow-origin)");
            return ApiError::new(StatusCode::FORBIDDEN, "cross_origin", message).into_response();
        }
        if has_body(headers) && !is_json(headers) {
            let message = "a request body must be JSON (Content-Type: application/json)";
            return ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
                .into_response();
        }
    }
    let mut response = next.run(request).await;
    if let Some(origin) = allowed_origin.and_then(|origin| HeaderValue::from_str(&origin).ok()) {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// The answer to an allowed origin's preflight.
fn preflight(origin: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    if let Ok(origin) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("authorization, content-type"));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// Whether `origin` names the host the request was sent to (the page is the server's own).
fn same_origin(origin: &str, headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok());
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    host.is_some_and(|host| authority.is_some_and(|authority| authority.eq_ignore_ascii_case(host)))
}

/// Whether the body says it is JSON: `application/json` or `application/<something>+json`,
/// parameters (`; charset=utf-8`) aside.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_str(value).unwrap())).collect()
    }

    #[test]
    fn json_is_told_by_the_essence_of_the_content_type() {
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/merge-patch+json", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
        ] {
            assert_eq!(is_json(&headers(&[(header::CONTENT_TYPE, value)])), json, "{value}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn an_origin_is_the_servers_own_when_it_names_the_host() {
        let host = headers(&[(header::HOST, "127.0.0.1:7700")]);
        assert!(same_origin("http://127.0.0.1:7700", &host));
        assert!(same_origin("https://127.0.0.1:7700", &host));
        assert!(!same_origin("http://evil.example", &host));
        assert!(!same_origin("http://127.0.0.1:7701", &host));
        assert!(!same_origin("null", &host));
        assert!(!same_origin("http://127.0.0.1:7700", &HeaderMap::new()));
    }
}
