//! What every off-thread reader of the sampler (PSS, command lines, DRM clients, NVML) shares
//! with its thread: its state behind a lock, a condvar that wakes the thread when there is
//! work, and the signal to stop. One place for the handle's end too: stop, wake, join.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use proctor_model::Stall;
use serde::Serialize;

#[derive(Debug)]
pub(crate) struct Shared<S> {
    pub(crate) state: Mutex<S>,
    pub(crate) wake: Condvar,
    stop: AtomicBool,
    /// The generation of the thread that owns the work: a worker that gives up on a stuck
    /// thread starts another with the next one, and the stuck one leaves when it returns.
    pub(crate) generation: AtomicU64,
}

impl<S> Shared<S> {
    pub(crate) fn new(state: S) -> Arc<Shared<S>> {
        Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        })
    }

    /// The state; a thread that panicked holding it leaves it as it was, still usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Tells the thread to stop and wakes it. The lock is taken and let go between the two:
    /// a thread that saw no stop and went on to wait under the lock is waiting by then, so the
    /// notice reaches it (the PSS and cmdline threads wait up to 10 and 60 s; no thread reads a
    /// process's files while holding the lock, so this never waits on a stuck read).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.lock());
        self.wake.notify_all();
    }
}

/// The end of a worker whose thread is joined: stop it, wake it, wait for it.
pub(crate) fn stop_and_join<S>(shared: &Shared<S>, thread: &mut Option<JoinHandle<()>>) {
    shared.stop();
    if let Some(t) = thread.take() {
        let _ = t.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_read_is_charged_whole_microseconds_rounded_up() {
        let held = |ns| super::held_ns(Duration::from_nanos(ns));
        assert_eq!(
            [held(1), held(999), held(1_000), held(1_001), held(52_345_678)],
            [1_000, 1_000, 1_000, 2_000, 52_346_000]
        );
    }

    #[test]
    fn a_stopped_worker_is_woken_and_joined() {
        let shared = Shared::new(0u32);
        let theirs = Arc::clone(&shared);
        let mut thread = Some(std::thread::spawn(move || {
            let mut state = theirs.lock();
            while !theirs.stopped() {
                state =
                    theirs.wake.wait_timeout(state, Duration::from_secs(60)).unwrap_or_else(PoisonError::into_inner).0;
            }
            *state += 1;
        }));
        stop_and_join(&shared, &mut thread);
        assert!(thread.is_none());
        assert_eq!(*shared.lock(), 1, "the thread saw the stop and finished");
    }
}

/// A reader's side of the stall ledger: how long every read it made held a target's mmap lock
/// (traced, or its wall time: an upper bound), and the longest, with its target.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LockTotals {
    pub lock_ns: u64,
    pub max_lock_ns: u64,
    pub max_lock_pid: u32,
}

/// The same since the sampler last took it: every target together, and the target of the
/// longest read.
pub(crate) type Interval = (Stall, u32);

/// What the ledger charges for a read that took `held` (or a wait that lasted it): whole
/// microseconds, rounded up. Two clock reads around a system call know its wall time only to a
/// few microseconds, and the nanosecond digits were most of what the ledger cost the store
/// (measured: a key record's ledger 5.0 → 2.8 KB after zstd, 600 processes); rounded up, a read
/// is never charged nothing and the charge stays an upper bound on the hold.
pub(crate) fn held_ns(held: std::time::Duration) -> u64 {
    (held.as_nanos() as u64).div_ceil(1_000).saturating_mul(1_000)
}

/// Charges a read that held `pid`'s lock `ns` to a reader's totals and to its interval.
pub(crate) fn charge(totals: &mut LockTotals, interval: &mut Interval, pid: u32, ns: u64) {
    charge_holds(totals, interval, pid, ns, ns);
}

/// [`charge`] for a read that held the lock `total_ns` in holds of at most `longest_ns`.
pub(crate) fn charge_holds(totals: &mut LockTotals, interval: &mut Interval, pid: u32, total_ns: u64, longest_ns: u64) {
    totals.lock_ns = totals.lock_ns.saturating_add(total_ns);
    if longest_ns > totals.max_lock_ns {
        (totals.max_lock_ns, totals.max_lock_pid) = (longest_ns, pid);
    }
    if longest_ns >= interval.0.max_ns {
        interval.1 = pid;
    }
    interval.0.add_holds(total_ns, longest_ns);
}

impl LockTotals {
    /// Two readers' totals together: the sum, and the longer of the two longest.
    pub fn merge(self, other: LockTotals) -> LockTotals {
        let longer = if other.max_lock_ns > self.max_lock_ns { other } else { self };
        LockTotals {
            lock_ns: self.lock_ns.saturating_add(other.lock_ns),
            max_lock_ns: longer.max_lock_ns,
            max_lock_pid: longer.max_lock_pid,
        }
    }
}
