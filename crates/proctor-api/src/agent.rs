//! The agent loop: one thread that samples on a fixed schedule, derives a [`Snapshot`] and
//! publishes it, and appends a point to the history ring.
//!
//! Requests never wait on `/proc`: handlers take an `Arc` of the latest snapshot (a read lock
//! held for one pointer copy) and work from that. This module does no HTTP and no rendering.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proctor_model::{
    container_truth, host_view, process_rows, ContainerTruth, HostView, ProcessRow, RowContext, Sample,
};
use proctor_procfs::system::{disk_usage, process_cpu_ns, self_max_rss_bytes, thread_cpu_ns, DiskUsage};
use proctor_sampler::cmdline::CmdlineStats;
use proctor_sampler::pss::PssStats;
use proctor_sampler::{Sampler, SamplerConfig, Schedule};

use crate::history::{History, HistorySize};
use crate::record::{Recorder, Recording, RecordingStatus};

/// Upper bounds of the sample-duration histogram, in seconds (Prometheus `le`).
pub const SAMPLE_DURATION_BUCKETS: [f64; 12] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Sampling period.
    pub interval: Duration,
    /// How much history the ring keeps.
    pub history: Duration,
    /// How many processes (by CPU) each history point remembers.
    pub history_top: usize,
    /// Root of the tree `/api/metrics/v1` reports on.
    pub jupyter_pid: u32,
    /// Filesystem whose usage `/api/metrics/v1` reports (`disk_used`, `disk_total`).
    pub disk_path: PathBuf,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            history: Duration::from_secs(3600),
            history_top: 10,
            jupyter_pid: std::process::id(),
            disk_path: PathBuf::from("/"),
        }
    }
}

/// Everything the agent measured about itself, cumulative since start unless named `last_`.
#[derive(Debug, Clone, Default)]
pub struct AgentSelf {
    pub pid: u32,
    pub started_unix_ns: u64,
    pub samples: u64,
    /// Ticks the schedule skipped because a cycle overran.
    pub missed_ticks: u64,
    /// CPU of the whole agent process (sampler, workers, HTTP), from `CLOCK_PROCESS_CPUTIME_ID`.
    pub process_cpu_seconds: f64,
    /// CPU of the sampling thread alone, summed over cycles.
    pub sampling_cpu_seconds: f64,
    /// Cycles by wall duration, counts per [`SAMPLE_DURATION_BUCKETS`] bound (not cumulative).
    pub duration_counts: [u64; SAMPLE_DURATION_BUCKETS.len() + 1],
    pub duration_sum_seconds: f64,
    pub resident_bytes: u64,
    pub max_resident_bytes: u64,
    /// Failed reads by (reader, reason), summed over every cycle.
    pub errors: BTreeMap<(&'static str, &'static str), u64>,
    pub processes_gone: u64,
    /// CPU the sampling thread spent deriving the last snapshot (rows, views, history point).
    pub last_derive_cpu_ns: u64,
    pub pss: Option<PssStats>,
    pub cmdline: Option<CmdlineStats>,
    /// The history ring's size as of this snapshot (set when the snapshot is published).
    pub history: HistorySize,
    pub container_error: Option<String>,
    pub disk_error: Option<String>,
    /// The store behind `proctor serve`'s recording, as of the previous sample.
    pub recording: RecordingStatus,
}

/// What one cycle read, with everything a request needs already derived.
#[derive(Debug)]
pub struct Snapshot {
    pub sample: Sample,
    pub interval_secs: Option<f64>,
    pub host: HostView,
    /// Sorted by pid.
    pub rows: Vec<ProcessRow>,
    pub truth: ContainerTruth,
    /// CPUs' worth of time the watched cgroup used over the interval.
    pub container_cpu_cores: Option<f64>,
    pub disk: Option<DiskUsage>,
    pub agent: AgentSelf,
}

impl Snapshot {
    /// What follows from `sample` and the one before it alone: host view, process rows,
    /// container truth and the container's CPU. The agent fills in the rest (disk usage, its
    /// own figures); a snapshot rebuilt from a stored sample keeps them empty (`agent.pid` 0).
    pub fn derive(sample: Sample, prev: Option<&Sample>) -> Snapshot {
        let truth = container_truth(&sample);
        let host = host_view(&sample, prev);
        let rows = process_rows(&sample, prev, RowContext { effective_cpus: truth.effective_cpus });
        let interval_secs = host.interval_secs;
        let container_cpu_cores = prev.zip(interval_secs).and_then(|(p, secs)| {
            let now = sample.container.as_ref()?.counters.cpu_usage_usec?;
            let before = p.container.as_ref()?.counters.cpu_usage_usec?;
            Some(now.checked_sub(before)? as f64 / 1e6 / secs)
        });
        Snapshot {
            sample,
            interval_secs,
            host,
            rows,
            truth,
            container_cpu_cores,
            disk: None,
            agent: AgentSelf::default(),
        }
    }

    pub fn row(&self, pid: u32) -> Option<&ProcessRow> {
        self.rows.binary_search_by_key(&pid, |r| r.pid).ok().map(|i| &self.rows[i])
    }

    pub fn unix_ms(&self) -> u64 {
        self.sample.unix_ns / 1_000_000
    }
}

/// Counters the HTTP side bumps and the self metrics read.
#[derive(Debug, Default)]
pub struct HttpCounters {
    pub requests: AtomicU64,
    pub unauthorized: AtomicU64,
    pub client_errors: AtomicU64,
    /// `/api/v1/history` requests that read the store (their range reached before the ring).
    pub history_store_requests: AtomicU64,
    /// Frames those requests decoded.
    pub history_store_frames_decoded: AtomicU64,
    /// `/api/v1/report` requests that read the store, and the frames they decoded.
    pub report_store_requests: AtomicU64,
    pub report_store_frames_decoded: AtomicU64,
}

/// State shared between the agent thread (the only writer) and request handlers (readers).
#[derive(Debug)]
pub struct Shared {
    latest: RwLock<Arc<Snapshot>>,
    history: RwLock<History>,
    pub config: AgentConfig,
    pub http: HttpCounters,
    /// Set to stop the agent thread; the condvar wakes it from its sleep.
    stop: (Mutex<bool>, Condvar),
}

impl Shared {
    /// The latest snapshot. The lock is held only to clone the `Arc`.
    pub fn latest(&self) -> Arc<Snapshot> {
        Arc::clone(&self.latest.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs `f` over the history ring under its read lock.
    pub fn with_history<T>(&self, f: impl FnOnce(&History) -> T) -> T {
        f(&self.history.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The running agent. Dropping it without [`Agent::stop`] leaves the thread running until
/// the process exits.
#[derive(Debug)]
pub struct Agent {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The sampling thread's own state: the sampler and the totals carried between cycles.
struct Loop {
    sampler: Sampler,
    totals: AgentSelf,
    schedule: Schedule,
    /// Dropped with the loop when the agent thread ends, which drains and joins the recorder
    /// thread, so `Agent::stop` returns with the store's lock released.
    recorder: Recorder,
}

impl Agent {
    /// Takes the first sample on the calling thread, so a server started right after always
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
            container_error: sampler.container_error().map(str::to_string),
            ..AgentSelf::default()
        };
        let first = cycle(&mut sampler, None, &mut totals, &config, &recorder);
        let capacity = history_capacity(&config);
        let mut history = History::new(&first, capacity, config.history_top);
        history.push(&first);
        let first = Arc::new(finish(first, &history));
        recorder.submit(&first);
        let schedule = Schedule::new(Instant::now(), config.interval);
        let shared = Arc::new(Shared {
            latest: RwLock::new(first),
            history: RwLock::new(history),
            config,
            http: HttpCounters::default(),
            stop: (Mutex::new(false), Condvar::new()),
        });
        let state = Loop { sampler, totals, schedule, recorder };
        let thread_shared = Arc::clone(&shared);
        let thread =
            std::thread::Builder::new().name("proctor-agent".into()).spawn(move || run(state, &thread_shared))?;
        Ok(Agent { shared, thread: Some(thread) })
    }

    pub fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// Stops the sampling thread and waits for it (at most one cycle).
    pub fn stop(mut self) {
        self.signal_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn signal_stop(&self) {
        let (lock, cv) = &self.shared.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
}

fn history_capacity(config: &AgentConfig) -> usize {
    let interval = config.interval.as_secs_f64().max(0.001);
    ((config.history.as_secs_f64() / interval).ceil() as usize).clamp(2, 1_000_000)
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn run(mut state: Loop, shared: &Shared) {
    loop {
        let delay = state.schedule.next_delay(Instant::now());
        {
            let (lock, cv) = &shared.stop;
            let stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = cv.wait_timeout_while(stopped, delay, |s| !*s).unwrap_or_else(|e| e.into_inner());
            if *stopped {
                return;
            }
        }
        state.totals.missed_ticks = state.schedule.missed();
        let prev = shared.latest();
        let snapshot = cycle(&mut state.sampler, Some(&prev), &mut state.totals, &shared.config, &state.recorder);
        drop(prev);
        let snapshot = {
            let mut history = shared.history.write().unwrap_or_else(|e| e.into_inner());
            history.push(&snapshot);
            Arc::new(finish(snapshot, &history))
        };
        *shared.latest.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&snapshot);
        // After publishing: requests see the new snapshot whatever the store is doing.
        state.recorder.submit(&snapshot);
    }
}

/// Stamps the history ring's size, just after this snapshot's point went in, on the snapshot.
fn finish(mut snapshot: Snapshot, history: &History) -> Snapshot {
    snapshot.agent.history = history.size();
    snapshot
}

/// One sample plus its derivation, charged to the agent's totals.
fn cycle(
    sampler: &mut Sampler,
    prev: Option<&Snapshot>,
    totals: &mut AgentSelf,
    config: &AgentConfig,
    recorder: &Recorder,
) -> Snapshot {
    let sample = sampler.sample();
    let derive_before = thread_cpu_ns();
    let mut snapshot = Snapshot::derive(sample, prev.map(|p| &p.sample));
    let disk = match disk_usage(&config.disk_path) {
        Ok(d) => {
            totals.disk_error = None;
            Some(d)
        }
        Err(e) => {
            totals.disk_error = Some(format!("{}: {e}", config.disk_path.display()));
            None
        }
    };

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
    totals.pss = sampler.pss_stats();
    totals.cmdline = sampler.cmdline_stats();
    totals.process_cpu_seconds = process_cpu_ns() as f64 / 1e9;
    // Our own row is in the scan; when processes are not scanned, fall back to the peak.
    totals.resident_bytes = snapshot.row(totals.pid).and_then(|r| r.rss_bytes).unwrap_or_else(self_max_rss_bytes);
    totals.max_resident_bytes = self_max_rss_bytes();
    totals.recording = recorder.status();
    totals.last_derive_cpu_ns = thread_cpu_ns().saturating_sub(derive_before);
    snapshot.disk = disk;
    snapshot.agent = totals.clone();
    snapshot
}
