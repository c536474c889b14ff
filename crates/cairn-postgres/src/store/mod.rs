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

/// Every future's output, in order, the futures polled together: queries on one connection then
/// go out in one flight (tokio-postgres pipelines them).
pub(crate) async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
