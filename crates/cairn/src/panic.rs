//! Panics in user code become values: a panicking step attempt is a failed attempt, a panicking
//! workflow body parks its run. Nothing user code does may leave a run `running` forever.

use futures::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Awaits `future`, turning a panic while polling it into `Err(message)`.
pub(crate) async fn caught<F: Future>(future: F) -> Result<F::Output, String> {
    // Unwind safety: after a panic the future is dropped, never polled again, so no state it may
    // have left half-changed is observed.
    AssertUnwindSafe(future).catch_unwind().await.map_err(|payload| panic_message(payload.as_ref()))
}

/// Calls `make` (which builds a future and may itself panic), catching a panic as `Err`.
pub(crate) fn catch_call<T>(make: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(make)).map_err(|payload| panic_message(payload.as_ref()))
}

/// The text a panic was raised with (`panic!("…")` gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[tokio::test]
    async fn panics_become_errors_and_values_pass_through() {
        assert_eq!(caught(async { 7 }).await, Ok(7));
        let failed = caught(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("boom {}", 42);
            }
        })
        .await;
        assert_eq!(failed, Err("boom 42".to_owned()));
        assert_eq!(catch_call(|| -> u8 { panic!("static text") }), Err("static text".to_owned()));
    }
}
