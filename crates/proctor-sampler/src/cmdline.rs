//! The cmdline worker: reads each process's command line once, and again when the scan sees
//! it change its name (an exec: a shell's `exec`, a container entrypoint's `exec "$@"`, a
//! version manager's shim), off the sampling thread.
//!
//! Reading `/proc/PID/cmdline` copies from the target's memory under its mmap lock, so it can
//! block for as long as another holder keeps that lock (a process stuck in a page fault on a
//! hung NFS mount, or another smaps reader). The sampler never waits for it: it queues new
//! processes here and picks up whatever has been read. A read still in flight after the
//! timeout is written off — that pid is marked as timed out and a fresh worker thread takes
//! over the queue, up to a small cap on threads stuck in the kernel.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_model::Stall;
use proctor_procfs::process::parse_cmdline;
use proctor_procfs::{ErrorKind, Root};
use serde::Serialize;

use crate::worker::{Interval, LockTotals};

/// Threads allowed to be stuck in a cmdline read at once; past this the queue waits.
const MAX_STUCK_THREADS: u64 = 4;

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CmdlineStats {
    pub reads: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub stuck_threads: u64,
    /// Command lines taken from exec events (the BPF process events) instead of read: no read,
    /// no lock taken.
    pub from_exec: u64,
    /// Young forked children whose read waited for the next sample (none read in their first;
    /// see the sampler's `young_forks_waiting`).
    pub young_forks_later: u64,
    /// The stall ledger's share of this reader (a written-off read counts until it was written
    /// off).
    #[serde(flatten)]
    pub lock: LockTotals,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<(u32, u64)>,
    /// pid → (start time, its command line, every read of it so far).
    results: proctor_procfs::process::PidMap<(u64, Arc<[String]>, Stall)>,
    /// (generation, pid, start) of the read in flight, and when it started.
    in_flight: Option<(u64, u32, u64, Instant)>,
    stats: CmdlineStats,
    interval: Interval,
}

impl State {
    fn charge(&mut self, pid: u32, ns: u64) {
        crate::worker::charge(&mut self.stats.lock, &mut self.interval, pid, ns);
    }
}

type Shared = crate::worker::Shared<State>;

#[derive(Debug)]
pub struct CmdlineWorker {
    shared: Arc<Shared>,
    root: Root,
    timeout: Duration,
}

impl CmdlineWorker {
    pub fn start(root: Root, timeout: Duration) -> std::io::Result<Self> {
        let shared = Shared::new(State::default());
        let worker = Self { shared, root, timeout };
        worker.spawn(0)?;
        Ok(worker)
    }

    fn spawn(&self, generation: u64) -> std::io::Result<()> {
        let shared = Arc::clone(&self.shared);
        let root = self.root.clone();
        std::thread::Builder::new()
            .name("proctor-cmdline".into())
            .spawn(move || worker_loop(&shared, &root, generation))
            .map(|_| ())
    }

    /// Queues processes seen for the first time, or renamed since (their line is read again
    /// and replaces the one held; until then the old one stands).
    pub fn request(&self, pids: &[(u32, u64)]) {
        if pids.is_empty() {
            return;
        }
        let mut state = self.shared.lock();
        state.queue.extend(pids.iter().copied());
        drop(state);
        self.shared.wake.notify_one();
    }

    /// Command lines known without a read (from exec events): each replaces the one held for
    /// its pid, and a queued read of that process is dropped.
    pub fn provide(&self, known: Vec<(u32, u64, Arc<[String]>)>) {
        if known.is_empty() {
            return;
        }
        let mut state = self.shared.lock();
        for (pid, start, line) in known {
            let stall = charged(state.results.get(&pid), start, None);
            state.results.insert(pid, (start, line, stall));
            state.queue.retain(|q| *q != (pid, start));
            state.stats.from_exec += 1;
        }
    }

    /// Counts `n` new processes whose read waits for the next sample.
    pub fn put_off(&self, n: usize) {
        if n > 0 {
            self.shared.lock().stats.young_forks_later += n as u64;
        }
    }

    /// Forgets processes for which `is_live` is false; the check runs only once the cache has
    /// outgrown the `live_count` live processes by a margin.
    pub fn forget_unless(&self, live_count: usize, is_live: impl Fn(u32) -> bool) {
        let mut state = self.shared.lock();
        if state.results.len() > live_count + 64 {
            state.results.retain(|pid, _| is_live(*pid));
        }
    }

    /// Looks up command lines, each with the stall ledger of its reads. Also checks the read in
    /// flight against the timeout and replaces a stuck thread.
    pub fn with_results<R>(
        &self,
        f: impl FnOnce(&dyn Fn(u32, u64) -> (Option<Arc<[String]>>, Option<Stall>)) -> R,
    ) -> R {
        let mut state = self.shared.lock();
        if let Some((generation, pid, start, since)) = state.in_flight {
            let held = since.elapsed();
            if held > self.timeout && state.stats.stuck_threads < MAX_STUCK_THREADS {
                state.stats.timeouts += 1;
                state.stats.stuck_threads += 1;
                let held_ns = crate::worker::held_ns(held);
                state.charge(pid, held_ns);
                let stall = charged(state.results.get(&pid), start, Some(held_ns));
                state.results.insert(pid, (start, Arc::from(Vec::new()), stall));
                state.in_flight = None;
                let next = generation + 1;
                self.shared.generation.store(next, Ordering::SeqCst);
                if self.spawn(next).is_err() {
                    state.stats.errors += 1;
                }
            }
        }
        let lookup = |pid: u32, start: u64| match state.results.get(&pid) {
            Some((s, line, stall)) if *s == start => (Some(line.clone()), Some(*stall).filter(|s| s.reads > 0)),
            _ => (None, None),
        };
        f(&lookup)
    }

    pub fn stats(&self) -> CmdlineStats {
        self.shared.lock().stats
    }

    /// The ledger of the reads since the last call (every target together) and the target of
    /// the longest of them; starts the next interval.
    pub fn take_interval(&self) -> (Stall, u32) {
        std::mem::take(&mut self.shared.lock().interval)
    }
}

impl Drop for CmdlineWorker {
    fn drop(&mut self) {
        // Threads are not joined: one may be stuck in the kernel, which is the whole point.
        self.shared.stop();
    }
}

fn worker_loop(shared: &Shared, root: &Root, generation: u64) {
    let mut buf = Vec::new();
    loop {
        if shared.stopped() || shared.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let job = {
            let mut state = shared.lock();
            match state.queue.pop_front() {
                Some((pid, start)) => {
                    state.in_flight = Some((generation, pid, start, Instant::now()));
                    Some((pid, start))
                }
                None => {
                    // Woken by a request or the stop (it looked every 500 ms: two wakeups a
                    // second on an idle host); the stop is checked under the lock, so its
                    // notice cannot come between the check and the wait.
                    if !shared.stopped() {
                        let _ = shared.wake.wait_timeout(state, Duration::from_secs(60));
                    }
                    None
                }
            }
        };
        let Some((pid, start)) = job else { continue };
        let started = Instant::now();
        let result = root.read_into(format!("/proc/{pid}/cmdline"), &mut buf);
        let held_ns = crate::worker::held_ns(started.elapsed());
        let mut state = shared.lock();
        if shared.generation.load(Ordering::SeqCst) != generation {
            // Written off while we were stuck; a newer thread owns the queue now.
            state.stats.stuck_threads = state.stats.stuck_threads.saturating_sub(1);
            return;
        }
        state.in_flight = None;
        match result {
            Ok(()) => {
                state.stats.reads += 1;
                // An empty line is a kernel thread's or a zombie's: no address space, so no lock
                // was taken and nothing is charged.
                let held = (!buf.is_empty()).then_some(held_ns);
                if let Some(ns) = held {
                    state.charge(pid, ns);
                }
                let stall = charged(state.results.get(&pid), start, held);
                state.results.insert(pid, (start, Arc::from(parse_cmdline(&buf)), stall));
            }
            // A read of a gone process held no one's lock.
            Err(e) if e.kind == ErrorKind::Gone => {}
            Err(_) => {
                state.stats.errors += 1;
                state.charge(pid, held_ns);
            }
        }
    }
}

/// The ledger of `start`'s process after one more read that held its lock `ns` (`None`: a read
/// that took no lock): what `held` says of it, unless that was another process of the pid.
fn charged(held: Option<&(u64, Arc<[String]>, Stall)>, start: u64, ns: Option<u64>) -> Stall {
    let mut stall = held.filter(|(s, _, _)| *s == start).map(|(_, _, stall)| *stall).unwrap_or_default();
    if let Some(ns) = ns {
        stall.add(ns);
    }
    stall
}
