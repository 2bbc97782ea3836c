//! A fixed-interval schedule with drift correction: tick *k* is due at `start + k·interval`,
//! so the time a cycle takes is subtracted from the sleep rather than added to the period.
//! A cycle that overruns skips the ticks it missed (counted) instead of bunching them up.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Schedule {
    start: Instant,
    interval: Duration,
    tick: u64,
    missed: u64,
}

impl Schedule {
    pub fn new(start: Instant, interval: Duration) -> Self {
        Self { start, interval, tick: 0, missed: 0 }
    }

    /// How long to sleep from `now` until the next due tick, advancing past missed ticks.
    /// Pure over `now`, so tests need no clock.
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        if self.interval.is_zero() {
            self.tick += 1;
            return Duration::ZERO;
        }
        self.tick += 1;
        let due = self.start + self.interval * u32::try_from(self.tick).unwrap_or(u32::MAX);
        if due >= now {
            return due - now;
        }
        // Overran: skip to the next tick still in the future.
        let behind = now - due;
        let skip = (behind.as_nanos() / self.interval.as_nanos()) as u64 + 1;
        self.missed += skip;
        self.tick += skip;
        let due = self.start + self.interval * u32::try_from(self.tick).unwrap_or(u32::MAX);
        due.saturating_duration_since(now)
    }

    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Sleeps until the next tick.
    pub fn wait(&mut self) {
        let delay = self.next_delay(Instant::now());
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtracts_cycle_time_and_skips_missed_ticks() {
        let start = Instant::now();
        let mut s = Schedule::new(start, Duration::from_millis(100));
        // The cycle took 30 ms: sleep the remaining 70 ms.
        assert_eq!(s.next_delay(start + Duration::from_millis(30)), Duration::from_millis(70));
        // Tick 2 is due at 200 ms; a cycle ending at 350 ms missed it: next is 400 ms.
        assert_eq!(s.next_delay(start + Duration::from_millis(350)), Duration::from_millis(50));
        assert_eq!(s.missed(), 2, "ticks at 200 and 300 ms were missed");
        assert_eq!(s.next_delay(start + Duration::from_millis(410)), Duration::from_millis(90));
    }
}
