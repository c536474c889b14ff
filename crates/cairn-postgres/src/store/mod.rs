//! The PostgreSQL implementation of [`Store`].
//!
//! Here: the options, the store handle, connecting and migrating. The rest, by concern:
//! * `sql`: every statement, built once per store for its schema;
//! * `rows`: rows decoded into records, records into parameters;
//! * `listen`: the LISTEN connection and the notifications that wake waiters;
//! * `writer`: creates and appends from many callers, committed in rounds;
//! * `beats`: lease heartbeats, on a connection of their own;
//! * `control`: the operations with a transaction of their own (cancel, pause, signal, …);
//! * `maintain`: folding the ended-status counts;
//! * `api`: `Store` for `PostgresStore`.

mod api;
mod beats;
mod control;
mod handle;
mod listen;
mod maintain;
mod prelude;
mod rows;
mod sql;
mod writer;

pub use handle::{PostgresOptions, PostgresStore};
