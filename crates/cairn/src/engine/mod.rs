//! The engine: a worker that claims ready runs, replays and executes them while it holds their
//! leases, heartbeats those leases, and wakes runs when their timers come due.
//!
//! * `config`: a worker's tunables and their defaults;
//! * `local`: what the worker shares between its loops, runs and attached clients;
//! * `runs`: one claimed run, loaded, driven and settled;
//! * `loops`: claiming, draining, notices, sweeping, heartbeats, start-up chores;
//! * `builder`: [`EngineBuilder`];
//! * `handle`: [`Engine`].

mod builder;
mod config;
mod handle;
mod local;
mod loops;
mod runs;

pub use builder::EngineBuilder;
pub(crate) use config::Config;
pub use config::{DEFAULT_MAX_RECOVERIES, DEFAULT_SHUTDOWN_GRACE};
pub use handle::Engine;
pub(crate) use local::{Local, run_setup};
