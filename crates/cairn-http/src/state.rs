//! What every handler shares (the client, how live streams run, the metrics) and the
//! configuration it is built from.

use crate::metrics;
use cairn::Client;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the API is served.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// With a token, every route but `/healthz` and the dashboard's page needs
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body in bytes (default 4 MiB, the default payload limit).
    pub body_limit: usize,
    /// How long a client may take to send a request's body once its head is in (default 30 s;
    /// `408 body_timeout` after).
    pub body_timeout: Duration,
    /// How often a live stream looks for changes (default 1 s); it sends an update only when
    /// what it shows has changed.
    pub live_interval: Duration,
    /// Live streams open at once (default 512); past it a new one is answered `503` with
    /// `Retry-After`. [`Service::bind`](crate::Service::bind) cuts it to half the connections it
    /// takes, so that streams never leave `/healthz` and the API without room.
    pub max_live_streams: usize,
    /// Live streams end when this is cancelled, so that a graceful shutdown need not wait for
    /// browsers to go away. Cancel it when your server begins to shut down.
    pub shutdown: CancellationToken,
    /// What `GET /metrics` renders (Prometheus text); without it that route answers 404. See
    /// [`metrics::Prometheus::install`].
    pub metrics: Option<metrics::Prometheus>,
    /// Origins (`https://app.example.com`, as browsers send them) whose pages may change runs
    /// here, answered with CORS headers. Pages on any other origin may read nothing and change
    /// nothing; the server's own page (the dashboard) always may.
    pub allowed_origins: Vec<String>,
    /// Without a token, the hosts (`Host` names or addresses, port aside) this server answers
    /// besides `localhost` and loopback addresses; a request for any other is refused (`403
    /// unknown_host`), so a page on a domain that resolves to this server (DNS rebinding)
    /// cannot use it. `0.0.0.0` or `::` admits every address (not names). [`Service::bind`]
    /// adds the address it listens on. With a token, every host is answered.
    ///
    /// [`Service::bind`]: crate::Service::bind
    pub allowed_hosts: Vec<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            token: None,
            body_limit: 4 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            live_interval: Duration::from_secs(1),
            max_live_streams: 512,
            shutdown: CancellationToken::new(),
            metrics: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

impl ApiConfig {
    /// The default configuration with the token from `CAIRN_TOKEN` (if set and not empty), the
    /// allowed origins from `CAIRN_ALLOW_ORIGINS` and the allowed hosts from
    /// `CAIRN_ALLOWED_HOSTS` (both comma-separated).
    pub fn from_env() -> Self {
        let token = std::env::var("CAIRN_TOKEN").ok().filter(|t| !t.is_empty());
        let list = |variable: &str| -> Vec<String> {
            let text = std::env::var(variable).unwrap_or_default();
            text.split(',').map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect()
        };
        ApiConfig {
            token,
            allowed_origins: list("CAIRN_ALLOW_ORIGINS"),
            allowed_hosts: list("CAIRN_ALLOWED_HOSTS"),
            ..ApiConfig::default()
        }
    }
}

#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) client: Client,
    pub(crate) live: Live,
    pub(crate) metrics: Option<metrics::Prometheus>,
    /// Whether requests need a token (the OpenAPI document says so only then).
    pub(crate) secured: bool,
}

/// How live streams run.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) polling: crate::topics::Polling,
    /// What the open streams watch, each read by one task.
    pub(crate) topics: crate::topics::Topics,
    /// What every runs stream shows beside its page, read once for all of them.
    pub(crate) overview: crate::overview::Overview,
}
