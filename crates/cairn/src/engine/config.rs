//! A worker's tunables, and their defaults.

use crate::run_core::DEFAULT_MAX_PAYLOAD_BYTES;
use std::time::Duration;

/// Tunables of a worker. Every field has a sensible default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) worker_id: String,
    pub(crate) lease: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) suspend_grace: Duration,
    pub(crate) max_active_runs: usize,
    pub(crate) max_payload_bytes: usize,
    pub(crate) max_recoveries: u32,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_retention: Option<Duration>,
    pub(crate) default_run_timeout: Option<Duration>,
    pub(crate) sweep_every: Option<Duration>,
}

/// How many times in a row a run's worker may die while executing it without committing anything
/// before the run is parked as poison.
pub const DEFAULT_MAX_RECOVERIES: u32 = 10;

/// How long a shutdown lets steps in flight finish by default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

impl Default for Config {
    fn default() -> Self {
        Self {
            worker_id: format!("worker-{}-{}", std::process::id(), &uuid::Uuid::now_v7().simple().to_string()[20..]),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
            suspend_grace: Duration::from_secs(1),
            max_active_runs: 1024,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_recoveries: DEFAULT_MAX_RECOVERIES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            max_retention: None,
            default_run_timeout: None,
            sweep_every: Some(Duration::from_secs(60)),
        }
    }
}
