//! Cairn's embedded SQLite store: one file, WAL, one writer thread that group-commits. The
//! `cairn` crate re-exports [`SqliteStore`] and its options (feature `sqlite`, on by default).
//!
//! By concern:
//! * `handle`: the options, the store handle, its connections and threads (the writer, the
//!   readers, the checkpoints);
//! * `prelude`: the outside names every module here uses;
//! * `schema`: the migrations, in order, and the SQL fragments they share with the queries;
//! * `rows`: column lists and rows decoded into records;
//! * `writer`: the commands the writer takes, their transactions and their answers;
//! * `runs`, `flow`, `admin`: what the writer does for each command (the run lifecycle; concurrency
//!   slots and rate limits; pruning, workers, subscriptions and schedules);
//! * `store`: `Store` for `SqliteStore`.

#[macro_use]
mod schema;
mod admin;
mod flow;
mod handle;
mod prelude;
mod rows;
mod runs;
mod store;
mod writer;

pub use handle::{Durability, SqliteOptions, SqliteStore, StatementCount, StatementCounts, sqlite_commit_floor_us};
