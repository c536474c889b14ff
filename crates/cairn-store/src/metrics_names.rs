//! The store-health metrics SQL stores report through the `metrics` facade.

/// One write transaction of the SQLite writer or one PostgreSQL writer round, from its
/// start to its commit (fsync included).
pub const COMMIT_SECONDS: &str = "cairn_store_commit_seconds";
/// How many writes (creates, appends, signals, …) one such transaction committed together.
pub const BATCH_SIZE: &str = "cairn_store_commit_batch_size";

/// Records one committed transaction of `writes` writes that took `lasted`.
pub fn committed(writes: usize, lasted: std::time::Duration) {
    metrics::histogram!(COMMIT_SECONDS).record(lasted.as_secs_f64());
    metrics::histogram!(BATCH_SIZE).record(writes as f64);
}
