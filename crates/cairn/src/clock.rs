//! Time, injected: the engine reads the time and sleeps only through a [`Clock`].

use cairn_journal::Timestamp;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// A boxed future the clock returns from [`Clock::sleep_until`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The source of time for workflow deadlines: sleeps, wait timeouts, retry backoff, step timeouts.
///
/// Leases are measured with the wall clock whatever clock is injected, because they guard real
/// processes.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Timestamp;
    /// A future that completes once [`now`](Clock::now) has reached `deadline`.
    fn sleep_until(&self, deadline: Timestamp) -> Sleep;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system_time(SystemTime::now())
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        let wait = self.now().until(deadline);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A virtual clock that only moves when told to, so tests of sleeps, timeouts and backoff run
/// without waiting.
///
/// ```
/// use cairn::{Clock, ManualClock};
/// use std::time::Duration;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let clock = ManualClock::new(cairn::Timestamp::from_millis(0));
/// let later = clock.now() + Duration::from_secs(3600);
/// let sleeping = tokio::spawn(clock.sleep_until(later));
/// clock.advance(Duration::from_secs(3600));
/// sleeping.await.unwrap(); // returns at once: an hour passed in virtual time
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<Timestamp>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self { now: Arc::new(watch::Sender::new(start)) }
    }

    /// Moves the clock forward by `by`, waking every sleeper whose deadline has come.
    pub fn advance(&self, by: Duration) {
        self.now.send_modify(|now| *now = *now + by);
    }

    /// Sets the clock to `to` (never backwards).
    pub fn set(&self, to: Timestamp) {
        self.now.send_modify(|now| *now = (*now).max(to));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        let mut receiver = self.now.subscribe();
        Box::pin(async move {
            // `wait_for` returns an error only if the sender is gone; then time never moves again.
            if receiver.wait_for(|now| *now >= deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Wall-clock time for leases.
pub(crate) fn wall_now() -> Timestamp {
    SystemClock.now()
}
