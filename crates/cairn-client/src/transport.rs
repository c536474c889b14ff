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
    /// `host:port` (the port the scheme's when the URL gives none).
    pub(crate) authority: String,
    /// For `https://`: how connections are secured, and the name the certificate must carry.
    #[cfg(feature = "https")]
    tls: Option<(tokio_rustls::TlsConnector, tokio_rustls::rustls::pki_types::ServerName<'static>)>,
    /// Where the API is mounted: empty, or a path like `/cairn`.
    pub(crate) prefix: String,
    pub(crate) token: Option<String>,
    /// Connections free for the next request.
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// An HTTP/1.1 connection over `stream`, driven by a task of its own.
async fn handshake<S>(stream: S) -> Result<SendRequest<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Ends when the server closes the connection or the sender is dropped.
        let _ = connection.await;
    });
    Ok(sender)
}

#[cfg(feature = "https")]
mod tls {
    use std::sync::{Arc, OnceLock};
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    /// The roots every `https://` client trusts: the system's (or those `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` name), read once per process; an error when there are none.
    fn config() -> Result<Arc<ClientConfig>, String> {
        static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
        CONFIG
            .get_or_init(|| {
                let found = rustls_native_certs::load_native_certs();
                let mut roots = RootCertStore::empty();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                    return Err(format!(
                        "no root certificates to check the server's with (set SSL_CERT_FILE){}",
                        if errors.is_empty() { String::new() } else { format!(": {}", errors.join("; ")) }
                    ));
                }
                let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
                let config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                Ok(Arc::new(config))
            })
            .clone()
    }

    /// A connector for `host` (a name or an IP address), and the name its certificate must carry.
    pub(super) fn connector(host: &str) -> Result<(tokio_rustls::TlsConnector, ServerName<'static>), String> {
        let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host:?} is not a host name: {e}"))?;
        Ok((tokio_rustls::TlsConnector::from(config()?), name))
    }
}

impl Transport {
    /// The server at `url` (`http://host:port` or `https://host:port`, the port optional,
    /// optionally with a path the API is mounted under).
    pub(crate) fn new(url: &str, token: Option<String>) -> Result<Transport, Error> {
        let invalid = |why: &str| Error::InvalidUrl { url: url.to_owned(), why: why.to_owned() };
        let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (false, rest),
            (_, Some(rest)) => (true, rest),
            _ => return Err(invalid("it must start with http:// or https://")),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() || authority.contains(['?', '#', '@']) {
            return Err(invalid("it has no host"));
        }
        // `host`, `host:port`, `[v6]` or `[v6]:port`.
        let (host, port) = match authority.rsplit_once(':').filter(|(_, port)| !port.contains(']')) {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty() || port.is_some_and(|port| port.parse::<u16>().is_err()) {
            return Err(invalid("its host:port is not one"));
        }
        let authority = match port {
            Some(_) => authority.to_owned(),
            None => format!("{authority}:{}", if https { 443 } else { 80 }),
        };
        let path = path.trim_end_matches('/');
        let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
        let token = token.filter(|t| !t.is_empty());
        #[cfg(feature = "https")]
        let tls = match https {
            true => {
                Some(tls::connector(host.trim_start_matches('[').trim_end_matches(']')).map_err(|why| invalid(&why))?)
            }
            false => None,
        };
        #[cfg(not(feature = "https"))]
        if https {
            return Err(invalid(
                "this build has no TLS: build it with the `https` feature (of cairn-cli for the `cairn` command, \
                 of cairn-client for a program of your own)",
            ));
        }
        Ok(Transport {
            authority,
            #[cfg(feature = "https")]
            tls,
            prefix,
            token,
            idle: Mutex::new(Vec::new()),
        })
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
        let unreachable = |cause: Box<dyn std::error::Error + Send + Sync>| Error::Unreachable {
            server: self.authority.clone(),
            cause,
        };
        let stream = tokio::net::TcpStream::connect(&self.authority).await.map_err(|e| unreachable(e.into()))?;
        stream.set_nodelay(true).map_err(|e| unreachable(e.into()))?;
        #[cfg(feature = "https")]
        if let Some((connector, name)) = &self.tls {
            let stream = connector.connect(name.clone(), stream).await.map_err(|e| unreachable(e.into()))?;
            return handshake(stream).await.map_err(unreachable);
        }
        handshake(stream).await.map_err(unreachable)
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
            |cause: Box<dyn std::error::Error + Send + Sync>| Error::Request { method, path: path.to_owned(), cause };
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
        serde_json::from_slice(&bytes).map_err(|cause| Error::Decode { method, path: path.to_owned(), cause })
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
        assert!(matches!(Transport::new("ftp://host", None), Err(Error::InvalidUrl { .. })));
        assert_eq!(Transport::new("http://host", None).unwrap().authority, "host:80");
        assert_eq!(Transport::new("http://[::1]:7700/x", None).unwrap().authority, "[::1]:7700");
        assert_eq!(Transport::new("http://[::1]", None).unwrap().authority, "[::1]:80");
        assert!(Transport::new("http://", None).is_err());
        assert!(Transport::new("http://host:port", None).is_err());
    }
}
