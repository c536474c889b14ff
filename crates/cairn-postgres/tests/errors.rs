//! A driver's error keeps its cause: in the message, and as the error's `cause()`.

use cairn_postgres::{PostgresOptions, PostgresStore};
use cairn_store::{ErrorKind, StoreError};
use std::error::Error as _;

#[tokio::test]
async fn a_refused_connection_says_why_and_keeps_the_drivers_error_as_its_cause() {
    // Nothing listens on port 1: the connection is refused (no server is needed for this test).
    let options = PostgresOptions::new("postgres://postgres@127.0.0.1:1/postgres");
    let error = PostgresStore::connect(options).await.unwrap_err();
    assert!(matches!(error, StoreError::Backend { .. }), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    let message = error.to_string().to_lowercase();
    assert!(message.contains("refused"), "the cause is in the message: {message}");
    let cause = error.cause().expect("the driver's error is kept");
    assert!(cause.downcast_ref::<deadpool_postgres::PoolError>().is_some(), "{cause:?}");
    // Said once: in the message, not again as a source.
    assert!(error.source().is_none());
}

/// `startup_wait` is waited whole: the last attempt is made at its end, not one backoff step
/// before it (`--startup-wait 10s` gave up after 6.3 s, and `3s` after 1.5 s).
#[tokio::test]
async fn a_startup_wait_is_waited_whole() {
    let wait = std::time::Duration::from_millis(1_600);
    let options = PostgresOptions::new("postgres://postgres@127.0.0.1:1/postgres").startup_wait(wait);
    let started = std::time::Instant::now();
    let error = PostgresStore::connect(options).await.unwrap_err();
    // Attempts at 0, 0.1, 0.3, 0.7 and 1.5 s, and one more at 1.6 s (the old loop gave up at 1.5).
    assert!(started.elapsed() >= wait, "gave up after {:?} of {wait:?}: {error}", started.elapsed());
    assert!(error.to_string().contains("attempts over"), "{error}");
}
