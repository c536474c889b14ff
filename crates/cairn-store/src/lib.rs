//! Cairn's storage layer: one [`Store`] trait and the backends behind it.
//!
//! A store keeps runs (one summary row each), their journals (dense, append-only) and their
//! signals. Every state change of a run is an [`Append`]: journal events plus the matching update
//! of the summary row, checked against the appender's lease epoch and the journal's last sequence
//! number, committed together. Backends group appends from many runs into one transaction.
//!
//! * [`MemoryStore`]: everything in process memory, for tests and benchmarks.
//! * `SqliteStore`, in the `cairn-sqlite` crate (re-exported by `cairn`): one file, WAL, one
//!   writer thread that group-commits.
//! * `JsonlStore`, in the `cairn-jsonl` crate (re-exported by `cairn::store`): one append-only
//!   JSON-lines file per run under a data directory; no native dependency, human-readable,
//!   single-writer.
//!
//! Every backend passes the conformance suite in the `cairn-store-conformance` crate.

#[macro_use]
mod delegate;
mod counting;
mod faulty;
pub mod lifecycle;
mod memory;
mod store;
mod types;

pub use counting::{Calls, CountingStore};
pub use faulty::{Fault, Faults, FaultyStore};
pub use memory::MemoryStore;
pub use store::{Notice, SPLIT_JOURNAL_AT, Store, StoreFuture, journal_halves};
pub use types::*;

pub mod metrics_names;
pub use cairn_journal::flow::WaitingFor;
pub use cairn_journal::{SignalId, Timestamp};
