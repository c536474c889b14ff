//! The client: start, inspect, signal, cancel, pause, resume and restart runs in a store, from
//! inside an engine's process or from any other.
//!
//! * `handle`: [`Client`] itself, how it is made, and what it reads;
//! * `start`: [`StartRun`], [`Publish`], and the runs a worker starts itself;
//! * `results`: waiting for a run's result;
//! * `control`: signal, cancel, pause, resume, restart, prune and sweep.

mod control;
mod handle;
mod results;
mod start;

pub use control::{Cancel, PRUNE_BATCH, Pause, Restart, SWEEP_PAUSE_FACTOR};
pub use handle::{Client, DEFAULT_RETENTION};
pub use start::{Publish, Published, RunHandle, StartRun, parse_run_timeout};
