use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// Journals store instants in this form so that a run's deadlines mean the same thing on every
/// host that resumes it.
///
/// ```
/// use cairn_journal::Timestamp;
/// use std::time::Duration;
/// let t = Timestamp::from_millis(1_000);
/// assert_eq!(t + Duration::from_secs(2), Timestamp::from_millis(3_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Converts a [`SystemTime`]; instants before the epoch clamp to the epoch.
    pub fn from_system_time(time: SystemTime) -> Self {
        let millis = time.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        Self(i64::try_from(millis).unwrap_or(i64::MAX))
    }

    /// The same instant as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(u64::try_from(self.0).unwrap_or(0))
    }

    /// How long from `self` until `later`; zero when `later` is not after `self`.
    pub fn until(self, later: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0))
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        let millis = i64::try_from(rhs.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }
}

impl std::ops::Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Duration) -> Timestamp {
        let millis = i64::try_from(rhs.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
