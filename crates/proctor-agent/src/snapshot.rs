//! What one cycle of the agent read, with everything a surface needs already derived: the
//! sample itself, the host view, process rows, container truth, and the agent's own figures.
//!
//! A [`Snapshot`] is immutable once published; every surface (HTTP, the TUI, Python, the CLI)
//! reads it through an `Arc`. It knows nothing of how it is shown: public names and formats
//! live in `proctor-vocab`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use proctor_model::{
    container_truth, host_view, process_rows, ContainerTruth, HostView, ProcessRow, RowContext, Sample,
};
use proctor_sampler::cmdline::CmdlineStats;
use proctor_sampler::drm::DrmStats;
use proctor_sampler::nvml::NvmlStatus;
use proctor_sampler::pss::PssStats;

use proctor_store::RecorderStats;

/// Upper bounds of the sample-duration histogram, in seconds (Prometheus `le`).
pub const SAMPLE_DURATION_BUCKETS: [f64; 12] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// Everything the agent measured about itself, cumulative since start unless named `last_`.
#[derive(Debug, Clone, Default)]
pub struct AgentSelf {
    pub pid: u32,
    pub started_unix_ns: u64,
    /// The sampling period.
    pub interval_ns: u64,
    pub samples: u64,
    /// Ticks the schedule skipped because a cycle overran.
    pub missed_ticks: u64,
    /// CPU of the whole agent process (sampler, workers, surfaces), from `CLOCK_PROCESS_CPUTIME_ID`.
    pub process_cpu_seconds: f64,
    /// CPU of the sampling thread alone, summed over cycles.
    pub sampling_cpu_seconds: f64,
    /// Cycles by wall duration, counts per [`SAMPLE_DURATION_BUCKETS`] bound (not cumulative).
    pub duration_counts: [u64; SAMPLE_DURATION_BUCKETS.len() + 1],
    pub duration_sum_seconds: f64,
    pub resident_bytes: u64,
    /// Peak resident memory of this process image (`VmHWM`; `getrusage` maxrss would count the
    /// process that exec'd it, e.g. cargo).
    pub max_resident_bytes: u64,
    /// Failed reads by (reader, reason), summed over every cycle.
    pub errors: BTreeMap<(&'static str, &'static str), u64>,
    pub processes_gone: u64,
    /// CPU the sampling thread spent deriving the last snapshot (rows, views, history point).
    pub last_derive_cpu_ns: u64,
    pub pss: Option<PssStats>,
    pub cmdline: Option<CmdlineStats>,
    /// The DRM worker's counts (per-process GPU from fdinfo); `None` where it did not start.
    pub drm: Option<DrmStats>,
    /// The NVML thread's state; `None` where GPU reads are off.
    pub nvml: Option<NvmlStatus>,
    /// The history ring's size as of this snapshot (set when the snapshot is published).
    pub history: HistorySize,
    pub container_error: Option<String>,
    /// Each process's stat fields come from the BPF task iterator (else `/proc/PID/stat`).
    pub task_iter_used: bool,
    /// Why not the iterator, where it was asked for and could not be used.
    pub task_iter_why_not: Option<String>,
    /// Which BPF reader runs, in words, where the iterator is used.
    pub task_iter_how: Option<String>,
    /// Every exec and exit comes from the BPF process events (else only what `/proc` shows).
    pub events_used: bool,
    /// Why not the events, where they were asked for and could not be had.
    pub events_why_not: Option<String>,
    /// Each process's network use is counted in the kernel (BPF; else it is not known).
    pub net_used: bool,
    /// Why not, where it was asked for and could not be had.
    pub net_why_not: Option<String>,
    /// How the walks of the TCP sockets go, as of the last (where network use is counted).
    pub net_walk: Option<proctor_sampler::NetWalk>,
    /// Every sample's `cost.starts` added up: process starts against the kernel's count.
    pub starts: StartsTotal,
    /// The store the agent records into, as of the previous sample.
    pub recording: RecordingStatus,
}

/// Process starts since the agent started (from its second sample), added up per sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartsTotal {
    pub forks: u64,
    pub processes_new: u64,
    pub threads_new: u64,
    /// From the BPF process events, where they run.
    pub process_forks: u64,
    pub exits: u64,
    pub exited_unseen: u64,
    pub lost: u64,
    pub untold: u64,
    /// The event ring's drains that waited for a record written before them, those that
    /// stopped at the bound, and the time waited (ns).
    pub drain_waits: u64,
    pub drain_unsettled: u64,
    pub drain_wait_ns: u64,
}

impl StartsTotal {
    pub fn add(&mut self, s: &proctor_model::Starts) {
        self.forks += s.forks;
        self.processes_new += s.processes_new;
        self.threads_new += s.threads_new;
        if let Some(e) = s.events {
            self.process_forks += e.process_forks;
            self.exits += e.exits;
            self.exited_unseen += e.exited_unseen;
            self.lost += e.lost;
            self.untold += e.untold;
            self.drain_waits += e.drain_waits;
            self.drain_unsettled += e.drain_unsettled;
            self.drain_wait_ns += e.drain_wait_ns;
        }
    }

    /// The whole run's coverage, as [`proctor_model::Starts::coverage`] says one sample's.
    pub fn coverage(&self, events: bool) -> Option<(f64, bool)> {
        proctor_model::Starts {
            forks: self.forks,
            processes_new: self.processes_new,
            threads_new: self.threads_new,
            events: events.then_some(proctor_model::EventStarts {
                process_forks: self.process_forks,
                exits: self.exits,
                exited_unseen: self.exited_unseen,
                lost: self.lost,
                untold: self.untold,
                ..Default::default()
            }),
        }
        .coverage()
    }
}

/// How big the history ring is, for the agent's self figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistorySize {
    pub points: usize,
    pub capacity: usize,
    pub series: usize,
    /// Heap held now.
    pub bytes: usize,
    /// Heap held when full: the bound.
    pub max_bytes: usize,
}

/// The recorder's figures. Copied into every snapshot, so they lag the snapshot that carries
/// them by one sample (that one is still on its way to the store).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordingStatus {
    /// Samples are being written (a store is open).
    pub enabled: bool,
    /// The data directory asked for; `None` when recording is off.
    pub dir: Option<PathBuf>,
    /// Why nothing is recorded although it was asked for (the store could not be opened).
    pub error: Option<String>,
    pub stats: RecorderStats,
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
    pub agent: AgentSelf,
    /// Process groups, when the agent was asked to keep them (`AgentConfig::groups`).
    pub groups: Option<Arc<proctor_groups::GroupsView>>,
}

impl Snapshot {
    /// What follows from `sample` and the one before it alone: host view, process rows,
    /// container truth and the container's CPU. The agent fills in its own figures; a snapshot
    /// rebuilt from a stored sample keeps them empty (`agent.pid` 0).
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
            agent: AgentSelf::default(),
            groups: None,
        }
    }

    /// A snapshot of one sample with nothing derived but the container truth: what a one-off
    /// read (no previous sample, no rows) can say.
    pub fn bare(sample: Sample) -> Snapshot {
        let truth = container_truth(&sample);
        Snapshot {
            sample,
            interval_secs: None,
            host: HostView::default(),
            rows: Vec::new(),
            truth,
            container_cpu_cores: None,
            agent: AgentSelf::default(),
            groups: None,
        }
    }

    pub fn row(&self, pid: u32) -> Option<&ProcessRow> {
        self.rows.binary_search_by_key(&pid, |r| r.pid).ok().map(|i| &self.rows[i])
    }

    pub fn unix_ms(&self) -> u64 {
        self.sample.unix_ns / 1_000_000
    }
}
