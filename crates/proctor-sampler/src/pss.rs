//! The PSS worker: refreshes `smaps_rollup` round-robin under a CPU budget, off the sampling
//! thread.
//!
//! `smaps_rollup` walks every resident page of the target while holding its mmap lock: it
//! costs about 13–16 ms per GiB resident here, and the target cannot mmap, munmap or fault in
//! new memory meanwhile. So this worker reads one process at a time, charges itself the CPU
//! time each read took (`CLOCK_THREAD_CPUTIME_ID`), and sleeps long enough afterwards that its
//! share of one core stays within the budget. Processes whose cheap counters (rss and fault
//! counts from `stat`) have not changed since their last reading are skipped, and their
//! reading keeps its age so consumers can tell — but only up to a maximum age: PSS divides
//! each shared page among its sharers, so when another sharer exits (or a new one maps the
//! pages) the target's PSS moves while its own counters stay still. A reading older than the
//! maximum age is refreshed like a changed one, still within the budget.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_model::{PssReading, Stall};
use proctor_procfs::process::parse_smaps_rollup;
use proctor_procfs::system::thread_cpu_ns;
use proctor_procfs::{Error, ErrorKind, Root};
use serde::Serialize;

/// What bounds the worker's holds of one target's mmap lock, beside its own CPU budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetLimits {
    /// Age past which a reading of an unchanged process is refreshed.
    pub max_age: Duration,
    /// Share of wall time one target's lock may be held by these reads: after a read that held
    /// it `h`, that target is not read again for `h / share` (at 1 ms per second, a 20 ms read
    /// waits 20 s), however its counters move; its PSS age shows it.
    pub share: f64,
    /// A target that one read held longer than this is not read again: its reading keeps its
    /// age, and its ledger says it was capped.
    pub max_hold: Duration,
    /// Also measure what each target's own threads waited on these reads, from the kernel's
    /// mmap_lock tracepoints where proctor may use them ([`crate::lockwait`]).
    pub trace_waits: bool,
}

impl Default for TargetLimits {
    fn default() -> Self {
        TargetLimits { max_age: DEFAULT_MAX_AGE, share: 0.001, max_hold: Duration::from_millis(50), trace_waits: true }
    }
}

/// A process the worker may read, with the cheap counters that decide whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub pid: u32,
    pub start_ticks: u64,
    pub resident_bytes: u64,
    /// Minor + major faults: any page mapped in since the last reading moves this.
    pub faults: u64,
}

/// What the worker has done so far.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PssStats {
    pub reads: u64,
    pub skipped_unchanged: u64,
    pub errors: u64,
    pub cpu_ns: u64,
    /// The most expensive single read so far, in CPU nanoseconds.
    pub max_read_cpu_ns: u64,
    pub budget: f64,
    /// The stall ledger's share of this reader.
    #[serde(flatten)]
    pub lock: crate::worker::LockTotals,
    /// Reads put off because their target's share of lock time was spent, and targets no
    /// longer read because one read held the lock past the cap.
    pub skipped_target_budget: u64,
    pub capped_targets: u64,
    /// The targets' side, from the mmap_lock tracepoints (`false`: not measured; `proctor
    /// doctor` says why): reads traced, what the targets' threads waited on them, and traces
    /// that lost events (their waits may be short).
    pub waits_traced: bool,
    pub traced_reads: u64,
    pub target_waited_ns: u64,
    pub traces_lost: u64,
}

#[derive(Debug, Default)]
struct State {
    candidates: Vec<Candidate>,
    cursor: usize,
    /// pid → what was read of it: `reading` is `None` if the read failed, so a process we may
    /// not read is not retried until its counters change.
    results: HashMap<u32, Entry>,
    stats: PssStats,
    interval: crate::worker::Interval,
}

#[derive(Debug)]
struct Entry {
    /// The candidate as it was when read.
    seen: Candidate,
    reading: Option<PssReading>,
    /// Every read of this process (this start time) so far.
    stall: Stall,
    /// Not read again before this (the sampler's monotonic clock): its share of lock time.
    not_before_ns: u64,
}

type Shared = crate::worker::Shared<State>;

/// Handle to the worker thread; dropping it stops the thread.
#[derive(Debug)]
pub struct PssWorker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl PssWorker {
    /// Starts the worker. `budget` is the share of one core it may use (0.02 = 2 %); `epoch`
    /// is the sampler's monotonic zero, so reading times line up with sample times.
    pub fn start(root: Root, budget: f64, epoch: Instant) -> std::io::Result<Self> {
        Self::start_with_limits(root, budget, TargetLimits::default(), epoch)
    }

    /// [`PssWorker::start`] with the age past which an unchanged process is read again.
    pub fn start_with_max_age(root: Root, budget: f64, max_age: Duration, epoch: Instant) -> std::io::Result<Self> {
        Self::start_with_limits(root, budget, TargetLimits { max_age, ..TargetLimits::default() }, epoch)
    }

    /// [`PssWorker::start`] with the limits on each target's reads.
    pub fn start_with_limits(root: Root, budget: f64, limits: TargetLimits, epoch: Instant) -> std::io::Result<Self> {
        let budget = budget.clamp(0.0001, 1.0);
        let limits = TargetLimits { share: limits.share.clamp(1e-6, 1.0), ..limits };
        let shared = Shared::new(State { stats: PssStats { budget, ..PssStats::default() }, ..State::default() });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("proctor-pss".into())
            .spawn(move || worker_loop(&thread_shared, &root, budget, limits, epoch))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Replaces the candidate list (called by the sampler after each cycle) and drops readings
    /// of processes no longer listed.
    pub fn set_candidates(&self, candidates: Vec<Candidate>) {
        let mut state = self.shared.lock();
        state.results.retain(|pid, e| {
            candidates
                .binary_search_by_key(pid, |x| x.pid)
                .is_ok_and(|i| candidates[i].start_ticks == e.seen.start_ticks)
        });
        state.candidates = candidates;
        drop(state);
        self.shared.wake.notify_one();
    }

    /// The latest reading for a process, if it is still the same process, and the stall
    /// ledger of this reader's reads of it.
    pub fn with_readings<R>(&self, f: impl FnOnce(&dyn Fn(u32, u64) -> (Option<PssReading>, Option<Stall>)) -> R) -> R {
        let state = self.shared.lock();
        let lookup = |pid: u32, start_ticks: u64| match state.results.get(&pid) {
            Some(e) if e.seen.start_ticks == start_ticks => (e.reading, Some(e.stall)),
            _ => (None, None),
        };
        f(&lookup)
    }

    pub fn stats(&self) -> PssStats {
        self.shared.lock().stats
    }

    /// The ledger of the reads since the last call (every target together) and the target of
    /// the longest of them; starts the next interval.
    pub fn take_interval(&self) -> (Stall, u32) {
        std::mem::take(&mut self.shared.lock().interval)
    }
}

impl Drop for PssWorker {
    fn drop(&mut self) {
        crate::worker::stop_and_join(&self.shared, &mut self.thread);
    }
}

/// Reads one process's `smaps_rollup` now, on the calling thread, timing it.
pub fn read_pss(root: &Root, pid: u32, epoch: Instant, buf: &mut Vec<u8>) -> Result<PssReading, Error> {
    let cpu_before = thread_cpu_ns();
    let path = format!("/proc/{pid}/smaps_rollup");
    root.read_into(&path, buf)?;
    let rollup = parse_smaps_rollup(buf).ok_or_else(|| Error::parse(root.path(&path), "not a smaps_rollup file"))?;
    Ok(PssReading {
        rollup,
        read_mono_ns: epoch.elapsed().as_nanos() as u64,
        cost_cpu_ns: thread_cpu_ns().saturating_sub(cpu_before),
    })
}

fn worker_loop(shared: &Shared, root: &Root, budget: f64, limits: TargetLimits, epoch: Instant) {
    let max_age_ns = u64::try_from(limits.max_age.as_nanos()).unwrap_or(u64::MAX);
    let max_hold_ns = u64::try_from(limits.max_hold.as_nanos()).unwrap_or(u64::MAX);
    let mut buf = Vec::new();
    let mut tracer = limits.trace_waits.then(|| crate::lockwait::LockWaits::open(root).ok()).flatten();
    shared.lock().stats.waits_traced = tracer.is_some();
    while !shared.stopped() {
        let next = {
            let mut state = shared.lock();
            let now_ns = epoch.elapsed().as_nanos() as u64;
            pick_next(&mut state, now_ns, max_age_ns)
        };
        let Some(candidate) = next else {
            // Nothing changed or aged since the last pass: wait for new candidates (or for a
            // second, after which readings may have aged past the maximum).
            let state = shared.lock();
            let _ = shared.wake.wait_timeout(state, Duration::from_secs(1));
            continue;
        };
        let traced_cpu = thread_cpu_ns();
        let (result, held_ns, waited) = match tracer.as_mut() {
            Some(t) => {
                let ((result, wall_ns), waited) = t.around(candidate.pid, || {
                    let started = Instant::now();
                    let r = read_pss(root, candidate.pid, epoch, &mut buf);
                    (r, crate::worker::held_ns(started.elapsed()))
                });
                // The hold as the kernel saw it, where the trace has it whole: the wall time
                // also counts the read's waits for the lock, and smaps_rollup lets the lock go
                // while the target's threads want it.
                let traced = waited.filter(|w| !w.lost && w.held_ns > 0);
                let held_ns = traced.map_or(wall_ns, |w| crate::worker::held_ns(Duration::from_nanos(w.held_ns)));
                (result, held_ns.min(wall_ns), waited)
            }
            None => {
                let started = Instant::now();
                let r = read_pss(root, candidate.pid, epoch, &mut buf);
                (r, crate::worker::held_ns(started.elapsed()), None)
            }
        };
        // The budget pays for the trace too: turning it on and off, reading and parsing it.
        let spent_ns = match (&result, tracer.is_some()) {
            (_, true) => thread_cpu_ns().saturating_sub(traced_cpu),
            (Ok(r), false) => r.cost_cpu_ns,
            (Err(_), false) => 0,
        };
        {
            let mut state = shared.lock();
            let gone = matches!(&result, Err(e) if e.kind == ErrorKind::Gone);
            let reading = match result {
                Ok(reading) => {
                    state.stats.reads += 1;
                    state.stats.cpu_ns += reading.cost_cpu_ns;
                    state.stats.max_read_cpu_ns = state.stats.max_read_cpu_ns.max(reading.cost_cpu_ns);
                    Some(reading)
                }
                Err(_) => {
                    if !gone {
                        state.stats.errors += 1;
                    }
                    // Remember the failure so the pass moves on to other processes.
                    None
                }
            };
            if !gone {
                // A read of a gone process held no one's lock.
                let st = &mut *state;
                crate::worker::charge(&mut st.stats.lock, &mut st.interval, candidate.pid, held_ns);
            }
            let fresh = Entry { seen: candidate, reading: None, stall: Stall::default(), not_before_ns: 0 };
            let entry = state.results.entry(candidate.pid).or_insert(fresh);
            if entry.seen.start_ticks != candidate.start_ticks {
                // The pid was reused: the ledger is the new process's from here.
                entry.stall = Stall::default();
            }
            entry.seen = candidate;
            entry.reading = reading;
            let mut capped = false;
            if !gone {
                entry.stall.add(held_ns);
                if let Some(w) = waited {
                    let waited_ns = crate::worker::held_ns(Duration::from_nanos(w.waited_ns));
                    entry.stall.waited_ns = Some(entry.stall.waited_ns.unwrap_or(0).saturating_add(waited_ns));
                }
                let now_ns = epoch.elapsed().as_nanos() as u64;
                entry.not_before_ns = now_ns.saturating_add((held_ns as f64 / limits.share) as u64);
                capped = held_ns > max_hold_ns && !entry.stall.capped;
                entry.stall.capped |= capped;
            }
            if capped {
                state.stats.capped_targets += 1;
            }
            if let Some(w) = waited.filter(|_| !gone) {
                state.stats.traced_reads += 1;
                state.stats.target_waited_ns = state.stats.target_waited_ns.saturating_add(w.waited_ns);
                state.stats.traces_lost += u64::from(w.lost);
            }
        }
        // Keep the share of one core at `budget`: after spending `c` CPU, rest c·(1/b − 1).
        let rest_ns = (spent_ns.max(20_000) as f64 * (1.0 / budget - 1.0)) as u64;
        let state = shared.lock();
        if !shared.stopped() {
            let _ = shared.wake.wait_timeout_while(state, Duration::from_nanos(rest_ns), |_| !shared.stopped());
        }
    }
}

/// How old a reading of an unchanged process may grow before it is read again.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(60);

/// The next candidate in round-robin order whose cheap counters changed since its reading, or
/// whose reading is at least `max_age_ns` old at `now_ns` (both on the sampler's monotonic
/// clock). A failed read is not retried by age: it is retried when the counters change.
fn pick_next(state: &mut State, now_ns: u64, max_age_ns: u64) -> Option<Candidate> {
    let n = state.candidates.len();
    for _ in 0..n {
        let i = state.cursor % n;
        state.cursor = i + 1;
        let c = state.candidates[i];
        let fresh = |reading: &Option<PssReading>| {
            reading.as_ref().is_none_or(|r| now_ns.saturating_sub(r.read_mono_ns) < max_age_ns)
        };
        match state.results.get(&c.pid) {
            // Its share of lock time is spent, or one read held it past the cap.
            Some(e) if e.seen.start_ticks == c.start_ticks && (e.stall.capped || now_ns < e.not_before_ns) => {
                state.stats.skipped_target_budget += 1
            }
            Some(e) if e.seen == c && fresh(&e.reading) => state.stats.skipped_unchanged += 1,
            _ => return Some(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(pid: u32, rss: u64) -> Candidate {
        Candidate { pid, start_ticks: 1, resident_bytes: rss, faults: 0 }
    }

    #[test]
    fn round_robin_skips_unchanged() {
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], ..State::default() };
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let max_age = u64::MAX;
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(1));
        state
            .results
            .insert(1, Entry { seen: cand(1, 10), reading: Some(reading), stall: Stall::default(), not_before_ns: 0 });
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(2));
        state.results.insert(2, Entry { seen: cand(2, 20), reading: None, stall: Stall::default(), not_before_ns: 0 });
        assert_eq!(pick_next(&mut state, 0, max_age), None, "nothing changed, failures included");
        state.candidates[0] = cand(1, 11);
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(1), "rss moved");
    }

    /// A sharer exiting moves the target's PSS but not its own counters: a reading of an
    /// unchanged process is refreshed once it reaches the maximum age, and not before.
    #[test]
    fn unchanged_readings_are_refreshed_at_the_maximum_age() {
        let max_age = 60_000_000_000;
        let read_at = 5_000_000_000;
        let reading = PssReading { rollup: Default::default(), read_mono_ns: read_at, cost_cpu_ns: 0 };
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], ..State::default() };
        state
            .results
            .insert(1, Entry { seen: cand(1, 10), reading: Some(reading), stall: Stall::default(), not_before_ns: 0 });
        state.results.insert(2, Entry { seen: cand(2, 20), reading: None, stall: Stall::default(), not_before_ns: 0 });
        assert_eq!(pick_next(&mut state, read_at + max_age - 1, max_age), None, "young enough");
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age).map(|c| c.pid), Some(1), "aged out");
        // The failed read of pid 2 is not retried by age, however old.
        state.results.insert(
            1,
            Entry {
                seen: cand(1, 10),
                reading: Some(PssReading { read_mono_ns: read_at + max_age, ..reading }),
                stall: Stall::default(),
                not_before_ns: 0,
            },
        );
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age), None);
        assert_eq!(pick_next(&mut state, u64::MAX, max_age).map(|c| c.pid), Some(1));
    }

    /// A target whose share of lock time is spent is not read before its time, however its
    /// counters move, and a capped one never again; another process under the same pid is.
    #[test]
    fn the_target_budget_holds_reads_back() {
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], ..State::default() };
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let capped = Stall { capped: true, ..Stall::default() };
        state.results.insert(
            1,
            Entry { seen: cand(1, 10), reading: Some(reading), stall: Stall::default(), not_before_ns: 5_000 },
        );
        state.results.insert(2, Entry { seen: cand(2, 20), reading: Some(reading), stall: capped, not_before_ns: 0 });
        // Both changed since their readings.
        state.candidates = vec![cand(1, 11), cand(2, 21)];
        assert_eq!(pick_next(&mut state, 4_999, u64::MAX), None, "pid 1's time has not come; pid 2 is capped");
        assert_eq!(state.stats.skipped_target_budget, 2);
        assert_eq!(pick_next(&mut state, 5_000, u64::MAX).map(|c| c.pid), Some(1));
        assert_eq!(pick_next(&mut state, u64::MAX, u64::MAX).map(|c| c.pid), Some(1), "never pid 2");
        // A new process under pid 2 starts with a clean ledger.
        state.candidates[1] = Candidate { start_ticks: 99, ..cand(2, 21) };
        state.cursor = 1;
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(2));
    }
}
