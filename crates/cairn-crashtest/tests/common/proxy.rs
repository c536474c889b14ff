//! A TCP proxy between worker processes and PostgreSQL that injects faults: latency added to
//! every byte each way, a stall (a partition: connections stay open, nothing passes until it
//! heals), a reset of every open connection, refused connections (nothing listens on its port),
//! and a black hole (connections are accepted and never answered).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// How the proxy answers new connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepting {
    /// Connects each to the upstream server and forwards.
    Forward,
    /// Nothing listens on the port: a connect fails with "connection refused".
    Refuse,
    /// Accepts each and never reads, writes or closes it.
    BlackHole,
}

struct Shared {
    upstream: SocketAddr,
    /// Microseconds added to every chunk, each way.
    latency_us: AtomicU64,
    stalled: watch::Sender<bool>,
    accepting: watch::Sender<Accepting>,
    resets: broadcast::Sender<()>,
    /// Connections forwarded so far.
    forwarded: AtomicUsize,
    open: AtomicUsize,
    held: Mutex<Vec<TcpStream>>,
}

/// A running proxy on 127.0.0.1; it stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = self.shared.resets.send(());
    }
}

impl Proxy {
    /// A proxy to the server of the PostgreSQL URL `url` (`postgres://user@host:port/db`).
    pub async fn to_url(url: &str) -> Proxy {
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let host_port = rest.split('/').next().unwrap();
        let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, hp)| hp);
        let host_port = if host_port.contains(':') { host_port.to_owned() } else { format!("{host_port}:5432") };
        let upstream = tokio::net::lookup_host(host_port).await.unwrap().next().unwrap();
        Proxy::start(upstream).await
    }

    /// A proxy to `upstream`, forwarding.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream,
            latency_us: AtomicU64::new(0),
            stalled: watch::channel(false).0,
            accepting: watch::channel(Accepting::Forward).0,
            resets: broadcast::channel(16).0,
            forwarded: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            held: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(accept_loop(listener, addr, Arc::clone(&shared)));
        Proxy { addr, shared, task }
    }

    /// The proxy's address, `127.0.0.1:PORT`.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let user = authority.rsplit_once('@').map(|(user, _)| format!("{user}@")).unwrap_or_default();
        format!("{scheme}://{user}{}/{path}", self.addr)
    }

    /// Adds `each_way` to every chunk in both directions (order and throughput are kept).
    pub fn set_latency(&self, each_way: Duration) {
        self.shared.latency_us.store(each_way.as_micros() as u64, Ordering::SeqCst);
    }

    /// Stalls (`true`) or heals (`false`) every connection: while stalled nothing passes either
    /// way, and what was sent passes once healed.
    pub fn stall(&self, stalled: bool) {
        self.shared.stalled.send_replace(stalled);
    }

    /// Cuts every open connection with a TCP reset (both sides); how many it cut.
    pub fn reset_all(&self) -> usize {
        let open = self.shared.open.load(Ordering::SeqCst);
        let _ = self.shared.resets.send(());
        self.shared.held.lock().unwrap().clear();
        open
    }

    /// How new connections are answered from now on.
    pub fn accept(&self, accepting: Accepting) {
        self.shared.accepting.send_replace(accepting);
    }

    /// Connections forwarded so far.
    pub fn forwarded(&self) -> usize {
        self.shared.forwarded.load(Ordering::SeqCst)
    }
}

async fn accept_loop(listener: TcpListener, addr: SocketAddr, shared: Arc<Shared>) {
    let mut accepting = shared.accepting.subscribe();
    let mut listener = Some(listener);
    loop {
        let mode = *accepting.borrow_and_update();
        match (mode, &listener) {
            (Accepting::Refuse, _) => {
                // Closing the listening socket makes the kernel refuse connections to the port.
                listener = None;
                if accepting.changed().await.is_err() {
                    return;
                }
                continue;
            }
            (_, None) => listener = Some(rebind(addr).await),
            (_, Some(_)) => {}
        }
        let Some(bound) = &listener else { continue };
        tokio::select! {
            accepted = bound.accept() => {
                let Ok((client, _)) = accepted else { continue };
                let _ = client.set_nodelay(true);
                match mode {
                    Accepting::BlackHole => shared.held.lock().unwrap().push(client),
                    _ => {
                        tokio::spawn(forward(client, Arc::clone(&shared)));
                    }
                }
            }
            changed = accepting.changed() => if changed.is_err() { return },
        }
    }
}

/// Binds the proxy's port again (after refusing), retrying while the kernel still holds it.
async fn rebind(addr: SocketAddr) -> TcpListener {
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn forward(client: TcpStream, shared: Arc<Shared>) {
    let mut resets = shared.resets.subscribe();
    let Ok(server) = TcpStream::connect(shared.upstream).await else { return };
    let _ = server.set_nodelay(true);
    // A socket dropped with a zero linger is closed with a reset, not a FIN. (Tokio deprecates
    // `set_linger` because a lingering close blocks the thread; a zero linger never does.)
    #[allow(deprecated)]
    {
        let _ = client.set_linger(Some(Duration::ZERO));
        let _ = server.set_linger(Some(Duration::ZERO));
    }
    shared.forwarded.fetch_add(1, Ordering::SeqCst);
    shared.open.fetch_add(1, Ordering::SeqCst);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Arc::clone(&shared));
    let down = pump(server_read, client_write, Arc::clone(&shared));
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = resets.recv() => {}
    }
    shared.open.fetch_sub(1, Ordering::SeqCst);
}

/// Copies one direction: each chunk read is written once its latency has passed and the proxy
/// is not stalled. Ends when either side closes.
async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, shared: Arc<Shared>) {
    let (chunks, mut queued) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut stalled = shared.stalled.subscribe();
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let due = Instant::now() + Duration::from_micros(shared.latency_us.load(Ordering::SeqCst));
                    if chunks.send((due, buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            if stalled.wait_for(|stalled| !*stalled).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
