//! Serving an engine as `cairn serve` does, in one call: the API, the dashboard and the metrics
//! over your own workflows, with a token, origin checks, connection limits and a graceful stop
//! on SIGTERM or Ctrl-C.

use crate::routes::router;
use crate::state::ApiConfig;
use axum::Router;
use axum::body::Body;
use cairn::Engine;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How the server takes connections: every limit holds before a request is read, so a client
/// that connects and sends nothing, or sends slowly, cannot hold the server's sockets.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's head, counted from when the connection
    /// is ready for it: a new connection, or a kept-alive one after its last answer (so it is
    /// also how long a connection may stay idle). Default 10 s.
    pub header_timeout: Duration,
    /// Connections served at once. Past it, a new connection closes the one that has been
    /// silent longest (connected, no request sent), or if none is silent it is answered `503`
    /// with `Retry-After` and closed. Default [`ConnectionLimits::default_max_connections`]:
    /// 1,024, or fewer under a lower open-file limit. Live streams may hold at most half of
    /// them ([`ApiConfig::max_live_streams`](crate::ApiConfig::max_live_streams) is cut to
    /// that), so that `/healthz` and the API always find room.
    pub max_connections: usize,
    /// How long writing an answer may make no progress (the client reads none of it) before
    /// the connection is closed. Default 10 s.
    pub write_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            max_connections: ConnectionLimits::default_max_connections(),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Open files the server keeps for itself beyond its connections: the store's files or its
/// database connections, logs, the listener.
const RESERVED_FILES: u64 = 64;

impl ConnectionLimits {
    /// 1,024, or the process's open-file limit (`ulimit -n`) less 64 for the store and the
    /// rest, when that is lower (at least 16): past it, accepting fails with "too many open
    /// files" and the server stops answering even `/healthz` until connections close.
    pub fn default_max_connections() -> usize {
        #[cfg(unix)]
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        #[cfg(not(unix))]
        let limit: Option<u64> = None;
        let most = limit.map_or(1024, |files| files.saturating_sub(RESERVED_FILES).clamp(16, 1024));
        usize::try_from(most).unwrap_or(1024)
    }
}

/// A refused setting of a [`Service`].
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// `CAIRN_TOKEN` is set but empty: that would serve without a token.
    #[error("CAIRN_TOKEN is set but empty: set a token, or unset CAIRN_TOKEN to serve without one")]
    EmptyToken,
    /// An environment variable holds what it cannot.
    #[error("{variable} {value:?}: {reason}")]
    Setting {
        /// The variable.
        variable: &'static str,
        /// What it held.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The address could not be listened on (taken by another process, or not this host's).
    #[error("cannot listen on {address}: {source}{}", listen_hint(source))]
    Listen {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What to do about a failed listen, where there is something to say.
fn listen_hint(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => {
            "; another process listens there (an earlier `cairn serve`?): stop it, or listen elsewhere \
             (`--listen 127.0.0.1:7701`, or CAIRN_LISTEN)"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "; that address is not one of this host's: listen on one of its own (`127.0.0.1:7700`, or `0.0.0.0:7700` \
             for every address)"
        }
        std::io::ErrorKind::PermissionDenied => "; ports below 1024 need privileges: use a higher port",
        _ => "",
    }
}

/// Refuses a token no request could present: `Authorization: Bearer <token>` carries visible
/// ASCII without spaces (a space or a line break at either end is cut off on the way, and one
/// inside splits it), so such a token would lock every client out.
fn check_token(token: &str) -> Result<(), ServiceError> {
    match token.bytes().all(|b| b.is_ascii_graphic()) {
        true => Ok(()),
        false => Err(ServiceError::Setting {
            variable: "CAIRN_TOKEN",
            value: "(hidden)".to_owned(),
            reason: "a token is visible ASCII characters without spaces or line breaks, which no request could \
                     send otherwise"
                .to_owned(),
        }),
    }
}

/// What `cairn serve` is, over any [`Engine`]: the HTTP API, the dashboard and `/metrics`.
///
/// ```no_run
/// use cairn::prelude::*;
/// # async fn greet(_ctx: Ctx, _name: String) -> Result<String, WorkflowError> { Ok(String::new()) }
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let store = cairn::SqliteStore::open("cairn.db")?;
/// let engine = Engine::builder().store(store).register("greet", 1, greet).start().await?;
/// // CAIRN_LISTEN, CAIRN_TOKEN, CAIRN_ALLOW_ORIGINS; serves until SIGTERM or Ctrl-C.
/// cairn_http::Service::from_env()?.run(engine).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Service {
    /// Where to listen (default `127.0.0.1:7700`; port 0: any free port).
    pub listen: SocketAddr,
    /// The API's configuration: token, allowed origins, body limits, metrics.
    pub api: ApiConfig,
    /// How connections are taken.
    pub limits: ConnectionLimits,
}

impl Service {
    /// The defaults, with `CAIRN_LISTEN` (an address), `CAIRN_TOKEN` (refused when set but empty,
    /// which would serve without one, or holding what no request can send: spaces, line breaks,
    /// other than visible ASCII), `CAIRN_ALLOW_ORIGINS` and `CAIRN_ALLOWED_HOSTS` (comma-separated)
    /// read.
    pub fn from_env() -> Result<Service, ServiceError> {
        match std::env::var_os("CAIRN_TOKEN") {
            Some(token) if token.is_empty() => return Err(ServiceError::EmptyToken),
            Some(token) => check_token(&token.to_string_lossy())?,
            None => {}
        }
        let listen = match std::env::var("CAIRN_LISTEN") {
            Ok(text) => text.parse().map_err(|error: std::net::AddrParseError| ServiceError::Setting {
                variable: "CAIRN_LISTEN",
                value: text,
                reason: error.to_string(),
            })?,
            Err(_) => SocketAddr::from(([127, 0, 0, 1], 7700)),
        };
        Ok(Service { listen, api: ApiConfig::from_env(), limits: ConnectionLimits::default() })
    }

    /// Listens, says where (and warns when it listens beyond loopback without a token), serves
    /// `engine` until SIGTERM or Ctrl-C, then shuts the engine down gracefully.
    pub async fn run(self, engine: Engine) -> Result<(), ServiceError> {
        let listening = self.bind().await?;
        tracing::info!(address = %listening.address(), "serving the API and the dashboard");
        let served = listening.serve(engine.client(), stop_requested()).await;
        engine.shutdown().await;
        served
    }

    /// Listens, without serving yet (to learn the address of port 0).
    pub async fn bind(mut self) -> Result<Listening, ServiceError> {
        let listener = listen(self.listen).map_err(|source| ServiceError::Listen { address: self.listen, source })?;
        let address = listener.local_addr()?;
        // The address it listens on is a host it serves (every address, listening on all).
        self.api.allowed_hosts.push(address.ip().to_string());
        if self.api.token.is_none() && !address.ip().is_loopback() {
            tracing::warn!(%address, "listening beyond loopback without a token: anyone who can reach it can start, signal and cancel runs; set CAIRN_TOKEN");
        }
        if self.api.metrics.is_none() {
            self.api.metrics = crate::metrics::Prometheus::install();
        }
        let half = (self.limits.max_connections / 2).max(1);
        self.api.max_live_streams = self.api.max_live_streams.min(half);
        Ok(Listening { listener, address, service: self })
    }
}

/// A [`Service`] listening, not yet serving.
#[derive(Debug)]
pub struct Listening {
    listener: TcpListener,
    address: SocketAddr,
    service: Service,
}

impl Listening {
    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves `client` until `stop` resolves; then live streams end, connections finish their
    /// requests (for up to 30 s) and it returns.
    pub async fn serve(self, client: cairn::Client, stop: impl Future<Output = ()> + Send) -> Result<(), ServiceError> {
        let streams = self.service.api.shutdown.clone();
        let app = router(client, self.service.api);
        accept(self.listener, app, self.service.limits, async move {
            stop.await;
            streams.cancel();
        })
        .await
    }
}

/// Connections a burst of clients may open before the server accepts them (the default, 128,
/// dropped the SYNs of 256 clients connecting at once, which retried a second later).
const BACKLOG: u32 = 1024;

/// A listener on `address` with a [`BACKLOG`]-deep accept queue.
fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

/// The connections that have not sent a request yet, oldest first: when every slot is taken,
/// a new connection closes the oldest of them, so that idle sockets opened by one client cannot
/// keep everyone else out until the header timeout.
#[derive(Default)]
struct Silent {
    next: u64,
    connections: std::collections::BTreeMap<u64, CancellationToken>,
}

impl Silent {
    fn lock(silent: &std::sync::Mutex<Silent>) -> std::sync::MutexGuard<'_, Silent> {
        silent.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Serves `app` on `listener` within `limits` until `stop`.
async fn accept(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let silent = Arc::new(std::sync::Mutex::new(Silent::default()));
    let (stopping, stopped) = watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    // Whether accepting fails now: said once at warn when it starts failing, not every retry.
    let mut failing = false;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    failing = false;
                    stream
                }
                Err(error) => {
                    // Out of file descriptors, or a connection reset before it was taken: wait
                    // for sockets to close rather than spin.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%error, "accepting connections fails; retrying every 100 ms");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // Full: make room by closing the connection silent the longest, if there is one
                // (its slot is free as soon as its task sees it); otherwise every connection is
                // busy, and this one is told to come back.
                let Some((_, oldest)) = Silent::lock(&silent).connections.pop_first() else {
                    tokio::spawn(answer_busy(stream));
                    continue;
                };
                oldest.cancel();
                tokio::select! {
                    slot = Arc::clone(&slots).acquire_owned() => slot.map_err(std::io::Error::other)?,
                    () = &mut stop => break,
                }
            }
        };
        let (id, closed) = {
            let mut silent = Silent::lock(&silent);
            let id = silent.next;
            silent.next += 1;
            let closed = CancellationToken::new();
            silent.connections.insert(id, closed.clone());
            (id, closed)
        };
        let spoke = {
            let silent = Arc::clone(&silent);
            move || drop(Silent::lock(&silent).connections.remove(&id))
        };
        let said = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_request = spoke.clone();
        let service =
            TowerToHyperService::new(app.clone().map_request(move |request: axum::http::Request<Incoming>| {
                if !said.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    on_request();
                }
                request.map(Body::new)
            }));
        let mut stopped = stopped.clone();
        let (header_timeout, write_timeout) = (limits.header_timeout, limits.write_timeout);
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let stream = TokioIo::new(crate::conn::Socket::new(stream, write_timeout));
            let connection = builder.serve_connection(stream, service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = closed.cancelled() => {}
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            spoke();
        });
    }
    let _ = stopping.send(true);
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(30), slots.acquire_many(all)).await;
    Ok(())
}

/// How long a connection turned away may take to send its request's head and read the answer.
const BUSY_ANSWER_TIME: Duration = Duration::from_secs(2);

/// Tells a connection that came while every slot was busy to come back in a second: `503` with
/// `Retry-After` and the JSON error, after reading what the client sent (closing a socket with
/// unread bytes resets it, and the client would lose the answer).
async fn answer_busy(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = async {
        let mut head = [0u8; 4096];
        let mut seen = 0;
        while seen < head.len() && !head[..seen].windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut head[seen..]).await? {
                0 => break,
                n => seen += n,
            }
        }
        let busy = "every connection is busy: try again in a second";
        let answer = crate::error::ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy", busy)
            .closing_answer("retry-after: 1\r\n");
        stream.write_all(&answer).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(BUSY_ANSWER_TIME, answer).await;
}

/// Resolves when the process is asked to stop (SIGTERM or Ctrl-C).
pub async fn stop_requested() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
