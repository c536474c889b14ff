//! Panics in user code become values: a panicking step attempt is a failed attempt, a panicking
//! workflow body parks its run. Nothing user code does may leave a run `running` forever.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that turns a panic while polling `inner` into `Err(message)`.
pub(crate) struct CatchPanic<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> CatchPanic<F> {
    pub(crate) fn new(inner: F) -> Self {
        Self { inner: Box::pin(inner) }
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Unwind safety: after a panic the inner future is never polled again (the caller drops
        // it), so no state it may have left half-changed is observed.
        match catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
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
        assert_eq!(CatchPanic::new(async { 7 }).await, Ok(7));
        let failed = CatchPanic::new(async {
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
