//! What a run and a [`Client`](crate::client::Client) attached to an engine in this process ask of
//! that engine's worker: [`Host`] for both (the claim loop, the store's reports, the workflow a
//! continuation starts), [`Attachment`] for a client besides (which workflows it registers, and a
//! word with the runs it executes). They see the worker only through these traits, so they know
//! nothing of the engine's internals; the engine implements them.

use crate::run_core::{Ended, InputCheck};
use cairn_store::{Request, RunId, SignalRecord};
use serde_json::value::RawValue;
use std::time::Duration;
use tokio::sync::oneshot;

/// The worker that executes a run, or that a client is attached to.
pub(crate) trait Host: Send + Sync {
    /// Wakes the claim loop: something may be ready (a new run, a suspension's wake-up time).
    fn wake_claimer(&self);
    /// Whether the store reports runs ending or signalled in other processes, so result
    /// waiters and waits in memory are woken instead of polling.
    fn notices_reported(&self) -> bool;
    /// The newest version of `workflow` the worker registers and its input check: what a run
    /// that continues as new starts.
    fn successor(&self, workflow: &str) -> (Option<u32>, Option<InputCheck>);
}

/// The worker of the engine a client is attached to.
pub(crate) trait Attachment: Host {
    /// The newest version of `workflow` the worker registers.
    fn latest(&self, workflow: &str) -> Option<u32>;
    /// Whether the worker registers version `version` of `workflow`.
    fn registers(&self, workflow: &str, version: u32) -> bool;
    /// The names of the workflows the worker registers.
    fn workflow_names(&self) -> Vec<String>;
    /// `input` checked against version `version` of `workflow`; `None` when the worker does not
    /// register that version.
    fn check_input(&self, workflow: &str, version: u32, input: &RawValue) -> Option<Result<(), String>>;
    /// How long ended runs of `workflow` are kept, if the worker sets it.
    fn retention(&self, workflow: &str) -> Option<Duration>;
    /// The longest any run is kept, if the worker caps it.
    fn max_retention(&self) -> Option<Duration>;
    /// The timeout of runs started without one, if the worker sets it.
    fn default_run_timeout(&self) -> Option<Duration>;
    /// Whether the claim loop is still taking ready runs.
    fn claiming(&self) -> bool;
    /// Fires when the worker stops executing `id`: with how it ended if it ended there.
    fn watch(&self, id: &RunId) -> oneshot::Receiver<Option<Ended>>;
    /// Tells everyone watching `id` how it ended, or (with `None`) to look again.
    fn notify_watchers(&self, id: &RunId, ended: Option<Ended>);
    /// Whether the worker executes `id` now.
    fn runs_here(&self, id: &RunId) -> bool;
    /// Tells `id`, if the worker executes it, of a cancel or pause requested of it.
    fn request(&self, id: &RunId, request: &Request);
    /// Hands `signal` to `id` if the worker executes it.
    fn deliver(&self, id: &RunId, signal: SignalRecord);
    /// Tells `id`, if the worker executes it, that a signal may have arrived.
    fn signal_may_have_arrived(&self, id: &RunId);
}
