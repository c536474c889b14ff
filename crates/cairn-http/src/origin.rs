//! What a browser may make the server do. A request that changes something must carry its body
//! as JSON (`415` otherwise: a page can post a form or `text/plain` to any address without
//! asking, but not JSON) and must come from the server's own origin or one the allow-list names
//! (`403` otherwise). Allowed origins get CORS headers, and their preflights are answered.
//!
//! A server without a token also answers only the hosts it serves (`403 unknown_host`
//! otherwise): a page on an attacker's domain that resolves to 127.0.0.1 (DNS rebinding) is
//! the server's "own origin" by name, and only its `Host` gives it away.

use crate::body::has_body;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// What the guard checks requests against.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// Origins (`scheme://host[:port]`, as browsers send them) whose pages may change things.
    pub(crate) origins: Arc<[String]>,
    /// The hosts a server without a token answers; `None` with a token (which a rebinding page
    /// cannot send).
    pub(crate) hosts: Option<Arc<Hosts>>,
}

/// The hosts a server answers by `Host` (port aside): `localhost`, loopback addresses and the
/// names and addresses it was given. Given an unspecified address (`0.0.0.0`, `::`: it listens
/// on every address), every IP address is its own; a rebinding page can only send a name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hosts {
    names: Vec<String>,
    addresses: Vec<IpAddr>,
    any_address: bool,
}

impl Hosts {
    /// The hosts `given` (names or addresses) add to the loopback ones.
    pub(crate) fn new(given: &[String]) -> Hosts {
        let mut hosts = Hosts { names: vec!["localhost".to_owned()], ..Hosts::default() };
        for host in given.iter().map(|host| host.trim()).filter(|host| !host.is_empty()) {
            match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
                Ok(address) if address.is_unspecified() => hosts.any_address = true,
                Ok(address) => hosts.addresses.push(address),
                Err(_) => hosts.names.push(host.trim_end_matches('.').to_ascii_lowercase()),
            }
        }
        hosts
    }

    /// Whether a request whose `Host` header is `header` is for this server.
    pub(crate) fn serves(&self, header: &str) -> bool {
        let host = match header.strip_prefix('[') {
            Some(rest) => rest.split_once(']').map_or(rest, |(address, _)| address),
            None => header.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(header, |(h, _)| h),
        };
        match host.parse::<IpAddr>() {
            Ok(address) => address.is_loopback() || self.any_address || self.addresses.contains(&address),
            Err(_) => {
                let name = host.trim_end_matches('.');
                self.names.iter().any(|allowed| allowed.eq_ignore_ascii_case(name))
            }
        }
    }
}

/// Guards every route: the hosts a token-less server answers, then the allowed origins.
pub(crate) async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(hosts) = &guard.hosts
        && request.uri().path() != "/healthz"
        && let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(|host| hosts.serves(host))
    {
        let message = format!(
            "this server does not answer for host {:?}: a server without a token answers only the hosts it serves \
             (see --allowed-host)",
            String::from_utf8_lossy(host.as_bytes())
        );
        return ApiError::new(StatusCode::FORBIDDEN, "unknown_host", message).into_response();
    }
    let allowed = &guard.origins;
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
    fn a_server_answers_loopback_its_addresses_and_the_names_it_was_given() {
        let hosts = Hosts::new(&["app.internal".to_owned(), "10.0.0.5".to_owned(), " ".to_owned()]);
        for host in ["localhost", "LOCALHOST:7700", "127.0.0.1:7700", "127.3.4.5", "[::1]:7700", "[::1]", "localhost."]
        {
            assert!(hosts.serves(host), "{host}");
        }
        for host in ["app.internal", "App.Internal:80", "10.0.0.5:7700"] {
            assert!(hosts.serves(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:7700",
            "localhost.evil.example",
            "10.0.0.6",
            "",
            "[::2]:1",
            "app.internal.evil",
        ] {
            assert!(!hosts.serves(host), "{host}");
        }
        let everywhere = Hosts::new(&["0.0.0.0".to_owned()]);
        assert!(everywhere.serves("192.168.1.20:7700") && everywhere.serves("[fe80::1]:7700"));
        assert!(!everywhere.serves("rebind.evil.example:7700"));
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
