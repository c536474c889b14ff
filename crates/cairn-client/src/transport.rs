//! The wire: HTTP/1.1 requests with JSON bodies over kept-alive connections to one server.

use crate::error::Error;
use cairn_api::ErrorBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use std::sync::Mutex;

/// A server at a base URL, with its bearer token if any, and the connections kept open to it.
pub(crate) struct Transport {
    /// `host:port`.
    pub(crate) authority: String,
    /// Where the API is mounted: empty, or a path like `/cairn`.
    pub(crate) prefix: String,
    pub(crate) token: Option<String>,
    /// Connections free for the next request.
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// `text` as one URL path segment or query value: everything but unreserved characters
/// percent-encoded.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl Transport {
    /// The server at `url` (`http://host:port`, optionally with a path the API is mounted under).
    pub(crate) fn new(url: &str, token: Option<String>) -> Result<Transport, Error> {
        let invalid = |why: &str| Error::InvalidUrl { url: url.to_owned(), why: why.to_owned() };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| invalid("it must start with http:// (for TLS, put a proxy in front of cairn serve)"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() || authority.contains(['?', '#', '@']) {
            return Err(invalid("it has no host:port"));
        }
        let path = path.trim_end_matches('/');
        let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
        let token = token.filter(|t| !t.is_empty());
        Ok(Transport { authority: authority.to_owned(), prefix, token, idle: Mutex::new(Vec::new()) })
    }

    /// A connection ready for a request: an idle one, or a new one.
    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>, Error> {
        loop {
            let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
            match idle {
                Some(mut sender) => {
                    if sender.ready().await.is_ok() {
                        return Ok(sender);
                    }
                }
                None => break,
            }
        }
        let unreachable = |source: Box<dyn std::error::Error + Send + Sync>| Error::Unreachable {
            server: self.authority.clone(),
            source,
        };
        let stream = tokio::net::TcpStream::connect(&self.authority).await.map_err(|e| unreachable(e.into()))?;
        stream.set_nodelay(true).map_err(|e| unreachable(e.into()))?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| unreachable(e.into()))?;
        tokio::spawn(async move {
            // Ends when the server closes the connection or the sender is dropped.
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// `method path` (path and query already encoded) with a JSON `body`; the answer decoded, or
    /// the API's error answer as [`Error::Api`].
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<String>,
    ) -> Result<T, Error> {
        let request_failed =
            |source: Box<dyn std::error::Error + Send + Sync>| Error::Request { method, path: path.to_owned(), source };
        let mut sender = self.connection().await?;
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(HOST, &self.authority);
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request =
            request.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| request_failed(e.into()))?;
        let response = sender.send_request(request).await.map_err(|e| request_failed(e.into()))?;
        let status = response.status();
        let bytes = response.into_body().collect().await.map_err(|e| request_failed(e.into()))?.to_bytes();
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(sender);
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(answer) => {
                    Error::Api { status: status.as_u16(), code: answer.error.code, message: answer.error.message }
                }
                Err(_) => Error::Api {
                    status: status.as_u16(),
                    code: String::new(),
                    message: format!("{method} {path}: {status} {}", String::from_utf8_lossy(&bytes)),
                },
            });
        }
        // An answer without a body (204) reads as `null`.
        let bytes = if bytes.is_empty() { Bytes::from_static(b"null") } else { bytes };
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode { method, path: path.to_owned(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_segments() {
        let remote = Transport::new("http://127.0.0.1:7700/", None).unwrap();
        assert_eq!((remote.authority.as_str(), remote.prefix.as_str()), ("127.0.0.1:7700", ""));
        let nested = Transport::new("http://host:80/ops/cairn/", Some(String::new())).unwrap();
        assert_eq!((nested.prefix.as_str(), nested.token.is_none()), ("/ops/cairn", true));
        assert!(matches!(Transport::new("https://host", None), Err(Error::InvalidUrl { .. })));
        assert!(Transport::new("http://", None).is_err());
        assert_eq!(encode("a b/c?d%é"), "a%20b%2Fc%3Fd%25%C3%A9");
        assert_eq!(encode("run-1_x.y~z"), "run-1_x.y~z");
    }
}
