//! When requests start: closed loop, open loop at a fixed rate, and bursts on a period.
//!
//! Pure arithmetic on offsets from the run's start; the runner owns the clock and sleeps.
//! Open loop is what makes coordinated-omission correction possible: request `i` is *meant*
//! to start at `i / rate`, and its latency is measured from then, so a stall that delays the
//! following sends is charged to them instead of silently thinning the sample (wrk2's and
//! vegeta's point; hey measures from the actual send).

use std::time::Duration;

/// How the next request is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each of `concurrency` workers sends its next request when the previous one ends.
    Closed { concurrency: usize },
    /// Requests are due every `1 / rate` seconds, sent by up to `workers` threads.
    Open { rate_per_second: f64, workers: usize },
}

impl Pacing {
    pub fn workers(&self) -> usize {
        match *self {
            Pacing::Closed { concurrency } => concurrency.max(1),
            Pacing::Open { workers, .. } => workers.max(1),
        }
    }

    /// Open loop: when request `index` is due, from the start. Closed loop: `None` (now).
    pub fn intended_offset(&self, index: u64) -> Option<Duration> {
        match *self {
            Pacing::Closed { .. } => None,
            Pacing::Open { rate_per_second, .. } => Some(Duration::from_secs_f64(index as f64 / rate_per_second)),
        }
    }
}

/// When a run (or one burst) stops handing out requests: whichever limit comes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limit {
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

impl Limit {
    /// Whether request `index`, due (or starting) at `offset` from the start, may start.
    pub fn allows(&self, index: u64, offset: Duration) -> bool {
        self.count.is_none_or(|count| index < count) && self.duration.is_none_or(|duration| offset < duration)
    }
}

/// `--every 5m --burst 50 --for 12h`: `burst` requests at the start of every period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bursts {
    pub every: Duration,
    pub requests: u64,
    pub total: Duration,
}

impl Bursts {
    /// How many bursts start within `total` (the first at 0).
    pub fn count(&self) -> u64 {
        if self.every.is_zero() {
            return 1;
        }
        let whole = self.total.as_nanos() / self.every.as_nanos();
        let exact = self.total.as_nanos().is_multiple_of(self.every.as_nanos());
        (whole + u128::from(!exact)).max(1) as u64
    }

    /// Start of burst `index`, from the run's start.
    pub fn offset(&self, index: u64) -> Duration {
        self.every.saturating_mul(u32::try_from(index).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_times() {
        let pacing = Pacing::Open { rate_per_second: 200.0, workers: 4 };
        assert_eq!(pacing.intended_offset(0), Some(Duration::ZERO));
        assert_eq!(pacing.intended_offset(3), Some(Duration::from_millis(15)));
        assert_eq!(Pacing::Closed { concurrency: 0 }.workers(), 1);
        assert_eq!(Pacing::Closed { concurrency: 2 }.intended_offset(9), None);
    }

    #[test]
    fn limits() {
        let count = Limit { count: Some(3), duration: None };
        assert!(count.allows(2, Duration::from_secs(99)));
        assert!(!count.allows(3, Duration::ZERO));
        let both = Limit { count: Some(10), duration: Some(Duration::from_secs(1)) };
        assert!(!both.allows(1, Duration::from_secs(1)));
        assert!(Limit::default().allows(u64::MAX, Duration::MAX));
    }

    #[test]
    fn bursts() {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        let watch = Bursts { every: minutes(5), requests: 50, total: minutes(12 * 60) };
        assert_eq!(watch.count(), 144);
        assert_eq!(watch.offset(143), minutes(715));
        let ragged = Bursts { every: minutes(5), requests: 1, total: minutes(11) };
        assert_eq!(ragged.count(), 3);
        assert_eq!(Bursts { every: Duration::ZERO, requests: 1, total: minutes(1) }.count(), 1);
    }
}
