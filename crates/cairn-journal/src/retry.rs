use serde::{Deserialize, Serialize};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

/// How the delay between attempts grows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Backoff {
    /// Always `base`.
    Fixed,
    /// `base × n` before attempt `n + 1`.
    Linear,
    /// `base × factor^(n-1)` before attempt `n + 1`.
    Exponential {
        /// Growth per attempt, at least 1.
        factor: f64,
    },
}

/// How often a failing step is tried and how long to wait between tries.
///
/// The default makes 3 attempts with exponential backoff from 1 s, doubling, capped at 60 s, with
/// 10 % jitter. Jitter is derived from the run, path and attempt, so a replayed schedule is the
/// schedule that was journaled.
///
/// ```
/// use cairn_journal::RetryPolicy;
/// use std::time::Duration;
/// let policy = RetryPolicy::exponential().attempts(5).base(Duration::from_secs(2)).jitter(0.0);
/// assert_eq!(policy.delay_after(1, 0), Some(Duration::from_secs(2)));
/// assert_eq!(policy.delay_after(3, 0), Some(Duration::from_secs(8)));
/// assert_eq!(policy.delay_after(5, 0), None); // the fifth attempt was the last
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    base: Duration,
    max_delay: Duration,
    jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::exponential()
    }
}

impl RetryPolicy {
    /// 3 attempts, exponential from 1 s doubling, at most 60 s, 10 % jitter.
    pub fn exponential() -> Self {
        Self {
            max_attempts: 3,
            backoff: Backoff::Exponential { factor: 2.0 },
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            jitter: 0.1,
        }
    }

    /// Like [`exponential`](Self::exponential) but with the same delay each time.
    pub fn fixed(delay: Duration) -> Self {
        Self { backoff: Backoff::Fixed, base: delay, ..Self::exponential() }
    }

    /// Like [`exponential`](Self::exponential) but growing by `base` each time.
    pub fn linear(base: Duration) -> Self {
        Self { backoff: Backoff::Linear, base, ..Self::exponential() }
    }

    /// One attempt, no retries.
    pub fn none() -> Self {
        Self { max_attempts: 1, ..Self::exponential() }
    }

    /// Total attempts, including the first (at least 1).
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The first delay.
    #[must_use]
    pub fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// Growth factor for exponential backoff (values below 1 count as 1).
    #[must_use]
    pub fn factor(mut self, factor: f64) -> Self {
        self.backoff = Backoff::Exponential { factor: if factor.is_finite() { factor.max(1.0) } else { 1.0 } };
        self
    }

    /// No delay is longer than this.
    #[must_use]
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Up to this fraction (0–1) of each delay is taken off at random.
    #[must_use]
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = if fraction.is_finite() { fraction.clamp(0.0, 1.0) } else { 0.0 };
        self
    }

    /// Total attempts allowed.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delay after attempt `failed_attempt` (from 1) failed, or `None` when it was the last.
    /// `seed` picks the jitter; give the same seed to get the same delay.
    pub fn delay_after(&self, failed_attempt: u32, seed: u64) -> Option<Duration> {
        if failed_attempt >= self.max_attempts {
            return None;
        }
        let n = failed_attempt.max(1);
        let base = self.base.as_secs_f64();
        let raw = match self.backoff {
            Backoff::Fixed => base,
            Backoff::Linear => base * f64::from(n),
            Backoff::Exponential { factor } => base * factor.powi(i32::try_from(n - 1).unwrap_or(i32::MAX)),
        };
        let capped = raw.min(self.max_delay.as_secs_f64());
        let unit = (seed >> 11) as f64 / (1u64 << 53) as f64;
        let jittered = capped * (1.0 - self.jitter * unit);
        Some(Duration::try_from_secs_f64(jittered.max(0.0)).unwrap_or(self.max_delay))
    }

    /// A jitter seed from anything hashable, e.g. `(run_id, path, attempt)`.
    pub fn seed(key: impl Hash) -> u64 {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_linear_and_caps() {
        let fixed = RetryPolicy::fixed(Duration::from_millis(500)).attempts(4).jitter(0.0);
        assert_eq!(fixed.delay_after(1, 0), Some(Duration::from_millis(500)));
        assert_eq!(fixed.delay_after(3, 0), Some(Duration::from_millis(500)));
        assert_eq!(fixed.delay_after(4, 0), None);
        let linear =
            RetryPolicy::linear(Duration::from_secs(1)).attempts(10).jitter(0.0).max_delay(Duration::from_secs(3));
        assert_eq!(linear.delay_after(2, 0), Some(Duration::from_secs(2)));
        assert_eq!(linear.delay_after(7, 0), Some(Duration::from_secs(3)));
        assert_eq!(RetryPolicy::none().delay_after(1, 0), None);
    }

    #[test]
    fn jitter_only_shortens_and_is_repeatable() {
        let p = RetryPolicy::fixed(Duration::from_secs(10)).jitter(0.5);
        for seed in [0u64, 1, u64::MAX, RetryPolicy::seed(("run", "a", 1))] {
            let d = p.delay_after(1, seed).unwrap();
            assert!(d <= Duration::from_secs(10) && d >= Duration::from_secs(5), "{d:?}");
            assert_eq!(p.delay_after(1, seed), Some(d));
        }
    }
}
