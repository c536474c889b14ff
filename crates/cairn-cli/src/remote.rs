//! A client of a running `cairn serve` (`--url`): HTTP/1.1 requests with JSON, over kept-alive
//! connections, answers decoded into the API's views.

use anyhow::{Context, Result, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use std::sync::Mutex;

/// A `cairn serve` at a base URL, with its bearer token if any.
pub(crate) struct Remote {
    /// `host:port`.
    authority: String,
    /// Where the API is mounted: empty, or a path like `/cairn`.
    prefix: String,
    token: Option<String>,
    /// Connections free for the next request.
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// `text` as one URL path segment or query value: everything but unreserved characters
/// percent-encoded.
pub(crate) fn encode(text: &str) -> String {
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

impl Remote {
    /// A client of the API at `url` (`http://host:port`, optionally with a path it is mounted
    /// under).
    pub(crate) fn new(url: &str, token: Option<String>) -> Result<Remote> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            anyhow!("--url {url:?} must start with http:// (for TLS, put a proxy in front of cairn serve)")
        })?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() || authority.contains(['?', '#', '@']) {
            bail!("--url {url:?} has no host:port");
        }
        let path = path.trim_end_matches('/');
        let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
        let token = token.filter(|t| !t.is_empty());
        Ok(Remote { authority: authority.to_owned(), prefix, token, idle: Mutex::new(Vec::new()) })
    }

    /// A connection ready for a request: an idle one, or a new one.
    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>> {
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
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("cannot reach cairn serve at {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("cannot talk HTTP to {}", self.authority))?;
        tokio::spawn(async move {
            // Ends when the server closes the connection or the sender is dropped.
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// `method path` (path and query already encoded) with a JSON `body`; the answer decoded, or
    /// the API's error message as the error.
    pub(crate) async fn call<T: DeserializeOwned>(&self, method: &str, path: &str, body: Option<String>) -> Result<T> {
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
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let response = sender.send_request(request).await.with_context(|| format!("{method} {path} failed"))?;
        let status = response.status();
        let bytes = response.into_body().collect().await.with_context(|| format!("{method} {path} failed"))?.to_bytes();
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(sender);
        if !status.is_success() {
            let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            match answer["error"]["message"].as_str() {
                Some(message) if status == hyper::StatusCode::UNAUTHORIZED => {
                    bail!("{message} (set CAIRN_TOKEN or --token)")
                }
                Some(message) => bail!("{message}"),
                None => bail!("{method} {path}: {status} {}", String::from_utf8_lossy(&bytes)),
            }
        }
        // An answer without a body (204) reads as `null`.
        let bytes = if bytes.is_empty() { Bytes::from_static(b"null") } else { bytes };
        serde_json::from_slice(&bytes).with_context(|| format!("{method} {path}: unexpected answer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_segments() {
        let remote = Remote::new("http://127.0.0.1:7700/", None).unwrap();
        assert_eq!((remote.authority.as_str(), remote.prefix.as_str()), ("127.0.0.1:7700", ""));
        let nested = Remote::new("http://host:80/ops/cairn/", Some(String::new())).unwrap();
        assert_eq!((nested.prefix.as_str(), nested.token.is_none()), ("/ops/cairn", true));
        assert!(Remote::new("https://host", None).is_err());
        assert!(Remote::new("http://", None).is_err());
        assert_eq!(encode("a b/c?d%é"), "a%20b%2Fc%3Fd%25%C3%A9");
        assert_eq!(encode("run-1_x.y~z"), "run-1_x.y~z");
    }
}
