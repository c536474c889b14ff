//! Cairn's PostgreSQL store: many worker processes on many hosts share one database.
//!
//! Runs, journals and signals live in tables of one schema (default `cairn`), created and
//! migrated by Cairn itself under an advisory lock, so several workers may start at once. Ready
//! runs are claimed with `FOR UPDATE SKIP LOCKED`; every append checks the lease epoch and the
//! journal's end in the same statement that moves them forward, so a worker that lost its lease
//! cannot write.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cairn_store::StoreError> {
//! use cairn_postgres::{PostgresOptions, PostgresStore};
//! let store = PostgresStore::connect(PostgresOptions::new("postgres://postgres@127.0.0.1/postgres")).await?;
//! # Ok(()) }
//! ```

mod schema;
mod store;
#[cfg(feature = "test-util")]
pub mod testing;

pub use store::{PostgresOptions, PostgresStore};
