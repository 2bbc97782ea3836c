//! The agent loop: proctor's one sampling loop. One thread samples on a fixed schedule, derives
//! a [`Snapshot`], publishes it, appends a point to the history ring and hands the snapshot to
//! the recorder.
//!
//! Every surface — `proctor serve`'s HTTP, the Python extension, `proctor record`, `proctor
//! snapshot --count`, the TUI — reads published snapshots: [`Shared::latest`] takes an `Arc`
//! under a read lock held for one pointer copy, and [`Shared::wait_newer`] waits for the next
//! one. Nobody else calls the sampler on a schedule. This module does no rendering, no HTTP and
//! no disk I/O (the recorder thread writes; the sampling thread only `try_send`s).

use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proctor_procfs::system::{process_cpu_ns, thread_cpu_ns, SelfPeak};
use proctor_sampler::{Reads, Sampler, SamplerConfig, Schedule};

use crate::history::History;
use crate::record::{Recorder, Recording};
use crate::snapshot::{AgentSelf, RecordingStatus, Snapshot, SAMPLE_DURATION_BUCKETS};

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Sampling period.
    pub interval: Duration,
    /// How much history the ring keeps.
    pub history: Duration,
    /// How many processes (by CPU) each history point remembers.
    pub history_top: usize,
    /// Stop after this many samples (`proctor record --count`); `None`: until stopped.
    pub max_samples: Option<u64>,
    /// Fold each sample's processes into groups this way (`proctor serve --groups`).
    pub groups: Option<Arc<proctor_groups::By>>,
    /// At most this many groups per snapshot; the rest are counted.
    pub max_groups: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            history: Duration::from_secs(3600),
            history_top: 10,
            max_samples: None,
            groups: None,
            max_groups: 64,
        }
    }
}

impl AgentConfig {
    /// An agent for a command that reads a few snapshots and needs no history.
    pub fn brief(interval: Duration) -> AgentConfig {
        AgentConfig { interval, history: interval * 2, history_top: 1, ..AgentConfig::default() }
    }
}

/// State shared between the agent thread (the only writer) and its readers.
#[derive(Debug)]
pub struct Shared {
    latest: RwLock<Arc<Snapshot>>,
    history: RwLock<History>,
    pub config: AgentConfig,
    /// The seq of the latest published snapshot, for [`Shared::wait_newer`]; notified on publish.
    published: (Mutex<u64>, Condvar),
    /// Set to stop the agent thread; the condvar wakes it from its sleep.
    stop: (Mutex<bool>, Condvar),
    /// Requests to start or stop optional reads ([`Shared::ask_reads`]); the sampling thread
    /// takes them before its next cycle and applies the newest.
    reads: SyncSender<Reads>,
    /// Pids whose PSS someone is looking at ([`Shared::ask_pss`]); the sampling thread passes
    /// them to the PSS worker before its next cycle.
    pss_asks: SyncSender<u32>,
}

impl Shared {
    /// The latest snapshot. The lock is held only to clone the `Arc`.
    pub fn latest(&self) -> Arc<Snapshot> {
        Arc::clone(&self.latest.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs `f` over the history ring under its read lock. Keep `f` to one range walk: the
    /// agent thread waits for the lock to append the next point.
    pub fn with_history<T>(&self, f: impl FnOnce(&History) -> T) -> T {
        f(&self.history.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The first snapshot whose seq is above `after_seq`, waiting at most `timeout` for it;
    /// `None` when none was published in time (or the agent stopped).
    pub fn wait_newer(&self, after_seq: u64, timeout: Duration) -> Option<Arc<Snapshot>> {
        let (lock, cv) = &self.published;
        let seq = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (seq, _) = cv.wait_timeout_while(seq, timeout, |s| *s <= after_seq).unwrap_or_else(|e| e.into_inner());
        let newer = *seq > after_seq;
        drop(seq);
        newer.then(|| self.latest())
    }

    /// Asks the sampling thread to read what `reads` says from its next cycle on (`proctor top`
    /// showing a PSS or Read/s column). Never waits: `false` when the small request queue is
    /// full, and the caller asks again later.
    pub fn ask_reads(&self, reads: Reads) -> bool {
        self.reads.try_send(reads).is_ok()
    }

    /// Asks for `pid`'s PSS first (a client shows that process): the PSS worker reads it next
    /// if it needs a reading, within its budgets (`proctor_sampler::pss::PssWorker::ask`).
    /// Never waits: `false` when the small queue is full.
    pub fn ask_pss(&self, pid: u32) -> bool {
        self.pss_asks.try_send(pid).is_ok()
    }

    fn publish(&self, snapshot: Arc<Snapshot>) {
        let seq = snapshot.sample.seq;
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = snapshot;
        let (lock, cv) = &self.published;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = seq;
        cv.notify_all();
    }
}

/// The running agent. Dropping it without [`Agent::stop`] leaves the thread running until
/// the process exits.
#[derive(Debug)]
pub struct Agent {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Recorder>>,
}

/// The sampling thread's own state: the sampler and the totals carried between cycles.
struct Loop {
    sampler: Sampler,
    /// This process's peak RSS, through a kept-open `/proc/self/status`.
    peak: SelfPeak,
    totals: AgentSelf,
    schedule: Schedule,
    recorder: Recorder,
    groups: Option<crate::groups::GroupState>,
    /// The other end is [`Shared::ask_reads`]; it ends with the agent.
    reads: Receiver<Reads>,
    /// The other end is [`Shared::ask_pss`].
    pss_asks: Receiver<u32>,
    /// When the freed heap is next handed back to the kernel ([`trim_heap_timed`]).
    next_trim: Instant,
}

impl Agent {
    /// Takes the first sample on the calling thread, so a surface started right after always
    /// has a snapshot to answer from, then starts the sampling thread. Records nothing.
    pub fn start(sampler_config: SamplerConfig, config: AgentConfig) -> std::io::Result<Agent> {
        Agent::start_recording(sampler_config, config, Recording::Off)
    }

    /// [`Agent::start`], and every sample (the first included) handed to `recording`'s store
    /// on a thread of its own (see [`crate::record`]).
    pub fn start_recording(
        sampler_config: SamplerConfig,
        config: AgentConfig,
        recording: Recording,
    ) -> std::io::Result<Agent> {
        let recorder = Recorder::start(recording)?;
        let mut sampler = Sampler::new(sampler_config);
        let mut totals = AgentSelf {
            pid: std::process::id(),
            started_unix_ns: unix_ns(),
            interval_ns: u64::try_from(config.interval.as_nanos()).unwrap_or(u64::MAX),
            container_error: sampler.container_error().map(str::to_string),
            task_iter_used: sampler.task_iter_status().is_ok(),
            task_iter_why_not: sampler.task_iter_status().err().flatten().map(str::to_string),
            task_iter_how: sampler.task_iter_how(),
            events_used: sampler.events_status().is_ok(),
            events_why_not: sampler.events_status().err().flatten().map(str::to_string),
            net_used: sampler.net_status().is_ok(),
            net_why_not: sampler.net_status().err().flatten().map(str::to_string),
            ..AgentSelf::default()
        };
        let mut peak = SelfPeak::open();
        let mut groups = config.groups.clone().map(|by| crate::groups::GroupState::new(by, config.max_groups));
        let mut first = cycle(&mut sampler, &mut peak, None, &mut totals, &recorder);
        if let Some(g) = groups.as_mut() {
            let (view, members) = g.fold(&first);
            first.groups = Some(Arc::new(view));
            first.sample.groups = Some(Arc::new(members));
        }
        let mut history = History::new(&first, history_capacity(&config), config.history_top);
        history.push(&first);
        let first = Arc::new(finish(first, &history));
        recorder.submit(&first);
        let schedule = Schedule::new(Instant::now(), config.interval);
        let first_seq = first.sample.seq;
        let (reads_tx, reads) = std::sync::mpsc::sync_channel(READ_REQUESTS);
        let (pss_asks_tx, pss_asks) = std::sync::mpsc::sync_channel(PSS_ASKS);
        let shared = Arc::new(Shared {
            latest: RwLock::new(first),
            history: RwLock::new(history),
            config,
            published: (Mutex::new(first_seq), Condvar::new()),
            stop: (Mutex::new(false), Condvar::new()),
            reads: reads_tx,
            pss_asks: pss_asks_tx,
        });
        let next_trim = Instant::now() + TRIM_FIRST;
        let state = Loop { sampler, peak, totals, schedule, recorder, groups, reads, pss_asks, next_trim };
        let thread_shared = Arc::clone(&shared);
        let thread =
            std::thread::Builder::new().name("proctor-agent".into()).spawn(move || run(state, &thread_shared))?;
        Ok(Agent { shared, thread: Some(thread) })
    }

    pub fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// Stops the sampling thread (waits for at most one cycle), then lets the recorder write
    /// what it holds; the store's lock is released when this returns. Returns the recording's
    /// final figures.
    pub fn stop(mut self) -> RecordingStatus {
        let (lock, cv) = &self.shared.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(recorder)) => recorder.stop(),
            _ => RecordingStatus::default(),
        }
    }
}

/// Read requests queued at most: each says the whole wanted state, so only the newest matters.
const READ_REQUESTS: usize = 4;

/// PSS asks queued at most between two cycles (the worker keeps its own bounded list).
const PSS_ASKS: usize = 32;

fn history_capacity(config: &AgentConfig) -> usize {
    let interval = config.interval.as_secs_f64().max(0.001);
    ((config.history.as_secs_f64() / interval).ceil() as usize).clamp(2, 1_000_000)
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The sampling thread; returns its recorder so `stop` can drain it.
fn run(mut state: Loop, shared: &Shared) -> Recorder {
    // A slice of its own, so a target's thread that wakes on this CPU mid-sample gets in at its
    // wakeup. Refused (a real-time agent, a kernel before 6.12): the kernel's, and `proctor
    // doctor` says why.
    let _ = proctor_procfs::system::ask_thread_slice(state.sampler.config().sampling_slice);
    loop {
        if shared.config.max_samples.is_some_and(|max| state.totals.samples >= max) {
            return state.recorder;
        }
        let delay = state.schedule.next_delay(Instant::now());
        {
            let (lock, cv) = &shared.stop;
            let stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = cv.wait_timeout_while(stopped, delay, |s| !*s).unwrap_or_else(|e| e.into_inner());
            if *stopped {
                return state.recorder;
            }
        }
        state.totals.missed_ticks = state.schedule.missed();
        if let Some(reads) = state.reads.try_iter().last() {
            state.sampler.set_reads(reads);
        }
        for pid in state.pss_asks.try_iter() {
            state.sampler.ask_pss(pid);
        }
        let prev = shared.latest();
        let mut snapshot = cycle(&mut state.sampler, &mut state.peak, Some(&prev), &mut state.totals, &state.recorder);
        drop(prev);
        if let Some(g) = state.groups.as_mut() {
            let (view, members) = g.fold(&snapshot);
            snapshot.groups = Some(Arc::new(view));
            snapshot.sample.groups = Some(Arc::new(members));
        }
        let snapshot = {
            let mut history = shared.history.write().unwrap_or_else(|e| e.into_inner());
            history.push(&snapshot);
            Arc::new(finish(snapshot, &history))
        };
        shared.publish(Arc::clone(&snapshot));
        // After publishing: readers see the new snapshot whatever the store is doing.
        state.recorder.submit(&snapshot);
        let now = Instant::now();
        if now >= state.next_trim {
            state.next_trim = now + TRIM_EVERY;
            state.totals.sampling_cpu_seconds += trim_heap_timed() as f64 / 1e9;
        }
    }
}

/// The first hand-back of freed heap comes this long after the start, past the first samples'
/// burst (every process new, every command line read); then one each [`TRIM_EVERY`].
const TRIM_FIRST: Duration = Duration::from_secs(10);
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// Hands freed heap pages back to the kernel (`malloc_trim`) and lets go of the binary's
/// read-only pages mapped so far ([`proctor_procfs::system::release_text`]: start-up's code
/// and constants, and what the kernel mapped around them), and returns the CPU it took, which
/// the sampling thread's total carries. glibc keeps what a burst freed (the first samples, a
/// fork storm) in its arenas: `serve` beside 600 processes held ~0.9 MB it no longer used.
/// The trim takes ~0.1 ms (0.24 ms the first), the release ~0.3 ms.
fn trim_heap_timed() -> u64 {
    let before = thread_cpu_ns();
    proctor_procfs::system::trim_heap();
    // Best effort: where it fails (no /proc/self/smaps) the text stays mapped, as before.
    let _ = proctor_procfs::system::release_text();
    thread_cpu_ns().saturating_sub(before)
}

/// Stamps the history ring's size, just after this snapshot's point went in, on the snapshot.
fn finish(mut snapshot: Snapshot, history: &History) -> Snapshot {
    snapshot.agent.history = history.size();
    snapshot
}

/// One sample plus its derivation, charged to the agent's totals.
fn cycle(
    sampler: &mut Sampler,
    peak: &mut SelfPeak,
    prev: Option<&Snapshot>,
    totals: &mut AgentSelf,
    recorder: &Recorder,
) -> Snapshot {
    let sample = sampler.sample();
    let derive_before = thread_cpu_ns();
    let mut snapshot = Snapshot::derive(sample, prev.map(|p| &p.sample));
    let cost = &snapshot.sample.cost;
    totals.samples += 1;
    totals.sampling_cpu_seconds += cost.cpu_ns as f64 / 1e9;
    let wall = cost.wall_ns as f64 / 1e9;
    let bucket = SAMPLE_DURATION_BUCKETS.iter().position(|&b| wall <= b).unwrap_or(SAMPLE_DURATION_BUCKETS.len());
    totals.duration_counts[bucket] += 1;
    totals.duration_sum_seconds += wall;
    for (key, n) in &cost.errors {
        *totals.errors.entry(*key).or_default() += n;
    }
    totals.processes_gone += cost.processes_gone;
    if let Some(starts) = &cost.starts {
        totals.starts.add(starts);
    }
    totals.pss = sampler.pss_stats();
    totals.net_walk = sampler.net_walk();
    totals.cmdline = sampler.cmdline_stats();
    totals.drm = sampler.drm_stats();
    totals.nvml = sampler.nvml_status();
    totals.process_cpu_seconds = process_cpu_ns() as f64 / 1e9;
    // Our own row is in the scan; when processes are not scanned, fall back to the peak.
    totals.max_resident_bytes = peak.bytes();
    totals.resident_bytes = snapshot.row(totals.pid).and_then(|r| r.rss_bytes).unwrap_or(totals.max_resident_bytes);
    totals.recording = recorder.status();
    totals.last_derive_cpu_ns = thread_cpu_ns().saturating_sub(derive_before);
    snapshot.agent = totals.clone();
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_a_newer_snapshot_sees_the_next_cycle_and_times_out_after_stop() {
        let sampler = SamplerConfig { processes: false, pss_budget: 0.0, ..SamplerConfig::default() };
        let config = AgentConfig { interval: Duration::from_millis(20), ..AgentConfig::default() };
        let agent = Agent::start(sampler, config).expect("agent");
        let shared = agent.shared();
        let first = shared.latest();
        let next = shared.wait_newer(first.sample.seq, Duration::from_secs(10)).expect("a second sample");
        assert!(next.sample.seq > first.sample.seq);
        assert_eq!(next.agent.interval_ns, 20_000_000);
        agent.stop();
        let last = shared.latest().sample.seq;
        assert!(shared.wait_newer(last, Duration::from_millis(100)).is_none(), "nothing samples after stop");
    }

    /// An agent sampling processes every 20 ms with PSS at `pss_budget`, and little else.
    fn quick_agent(pss_budget: f64) -> Agent {
        let sampler = SamplerConfig {
            pss_budget,
            cmdline: false,
            gpu: false,
            power: false,
            container: false,
            ..SamplerConfig::default()
        };
        let config = AgentConfig { interval: Duration::from_millis(20), ..AgentConfig::default() };
        Agent::start(sampler, config).expect("agent")
    }

    #[test]
    fn reads_asked_for_are_read_from_a_later_cycle() {
        let agent = quick_agent(0.0);
        let shared = agent.shared();
        let own_io = |s: &Snapshot| s.sample.process(std::process::id()).and_then(|p| p.io.as_deref().copied());
        assert!(own_io(&shared.latest()).is_none(), "not read until asked for");
        assert!(shared.ask_reads(Reads { pss_budget: 0.0, process_io: true, threads: false }));
        let mut seq = shared.latest().sample.seq;
        let mut read = false;
        for _ in 0..200 {
            let Some(s) = shared.wait_newer(seq, Duration::from_secs(10)) else { break };
            seq = s.sample.seq;
            if own_io(&s).is_some() {
                read = true;
                break;
            }
        }
        agent.stop();
        assert!(read, "this process's /proc/self/io is read once asked for");
    }

    /// A process someone looks at gets its PSS first: a child younger than a second, which the
    /// round-robin leaves for later, is read once asked for, and the worker counts the read as
    /// asked. (Should the machine stall past the child's first second before the ask lands, the
    /// round-robin may read it first; then a new child is tried.)
    #[test]
    fn a_process_asked_for_gets_its_pss_first() {
        let agent = quick_agent(0.0001);
        let shared = agent.shared();
        let asked_reads = |s: &Snapshot| s.agent.pss.map_or(0, |p| p.asked_reads);
        let mut first_by_ask = false;
        for _ in 0..5 {
            let mut child = std::process::Command::new("sleep").arg("60").spawn().expect("sleep");
            let pid = child.id();
            let before = asked_reads(&shared.latest());
            let mut seq = shared.latest().sample.seq;
            let mut read = None;
            for _ in 0..3000 {
                shared.ask_pss(pid);
                let Some(s) = shared.wait_newer(seq, Duration::from_secs(10)) else { break };
                seq = s.sample.seq;
                if s.sample.process(pid).is_some_and(|p| p.pss.is_some()) {
                    read = Some(asked_reads(&s));
                    break;
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            let after = read.expect("the asked-for child's PSS is read");
            if after > before {
                first_by_ask = true;
                break;
            }
        }
        agent.stop();
        assert!(first_by_ask, "the asked-for child was read for the ask, not by the round-robin");
    }
}
