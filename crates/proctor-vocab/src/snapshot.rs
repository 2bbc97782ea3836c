//! The snapshot document: what `GET /api/v1/snapshot`, `proctor snapshot --format json`,
//! Python's `Sampler.snapshot()` and the TUI's header all show, built from one [`Snapshot`].
//! Host, container, a process summary with the top processes, and the agent's own figures.
//!
//! Units are in the field names; unknown values are `null`, never 0. Documented field by field
//! in `docs/api.md`.

use std::collections::BTreeMap;

use proctor_agent::{AgentSelf, RecordingStatus, Snapshot};
use proctor_model::CpuPercent;
use proctor_procfs::host::Pressure;
use serde::{Deserialize, Serialize};

use crate::process::{process, ProcessOut};
use crate::select::{sort_rows, ProcessSort};

pub const API_VERSION: &str = "v1";

#[derive(Debug, Serialize)]
pub struct SnapshotOut {
    pub api_version: &'static str,
    pub seq: u64,
    pub time_unix_ms: u64,
    /// Seconds between this sample and the previous one; rates are over this interval.
    pub interval_secs: Option<f64>,
    pub host: HostOut,
    pub container: ContainerOut,
    pub processes: ProcessSummaryOut,
    /// Processes that ended since the previous sample (from the BPF process events; empty
    /// without them: `agent.process_events_from` says).
    pub exited: crate::exited::ExitedListOut,
    pub agent: AgentOut,
}

/// CPU time shares over the interval, in percent of all CPUs (or of one, per CPU).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuOut {
    pub user_percent: f64,
    pub nice_percent: f64,
    pub system_percent: f64,
    pub idle_percent: f64,
    pub iowait_percent: f64,
    pub irq_percent: f64,
    pub softirq_percent: f64,
    pub steal_percent: f64,
    pub busy_percent: f64,
}

impl CpuOut {
    fn new(p: &CpuPercent) -> Self {
        Self {
            user_percent: p.user,
            nice_percent: p.nice,
            system_percent: p.system,
            idle_percent: p.idle,
            iowait_percent: p.iowait,
            irq_percent: p.irq,
            softirq_percent: p.softirq,
            steal_percent: p.steal,
            busy_percent: p.busy,
        }
    }
}

/// One CPU's shares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PerCpuOut {
    pub cpu: u32,
    #[serde(flatten)]
    pub shares: CpuOut,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PressureLineOut {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PressureOut {
    pub some: Option<PressureLineOut>,
    pub full: Option<PressureLineOut>,
}

fn pressure(p: Option<Pressure>) -> Option<PressureOut> {
    let line = |l: proctor_procfs::host::PressureLine| PressureLineOut {
        avg10: l.avg10,
        avg60: l.avg60,
        avg300: l.avg300,
        total_seconds: l.total_usec as f64 / 1e6,
    };
    p.map(|p| PressureOut { some: p.some.map(line), full: p.full.map(line) })
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryOut {
    pub total_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub used_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
}

/// The load averages (runnable and uninterruptible tasks), over 1, 5 and 15 minutes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadOut {
    pub avg1: f64,
    pub avg5: f64,
    pub avg15: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskOut {
    pub device: String,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    pub reads_per_sec: f64,
    pub writes_per_sec: f64,
    pub busy_percent: f64,
}

/// The whole disks together.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DiskTotalsOut {
    pub read_bytes_per_sec: Option<f64>,
    pub write_bytes_per_sec: Option<f64>,
}

/// Every interface but `lo` together.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NetTotalsOut {
    pub rx_bytes_per_sec: Option<f64>,
    pub tx_bytes_per_sec: Option<f64>,
}

/// The host's IP traffic as the network programs counted it (`--net`): every device's, `lo`
/// included, and the part no process's socket owned.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessNetOut {
    pub rx_bytes_per_sec: f64,
    pub tx_bytes_per_sec: f64,
    pub unowned_rx_bytes_per_sec: f64,
    pub unowned_tx_bytes_per_sec: f64,
    pub table_full: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetOut {
    pub device: String,
    pub rx_bytes_per_sec: f64,
    pub tx_bytes_per_sec: f64,
    pub rx_packets_per_sec: f64,
    pub tx_packets_per_sec: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostOut {
    pub online_cpus: Option<usize>,
    /// All CPUs; `null` without a previous sample.
    pub cpu: Option<CpuOut>,
    pub per_cpu: Vec<PerCpuOut>,
    pub memory: MemoryOut,
    pub load: Option<LoadOut>,
    pub pressure_cpu: Option<PressureOut>,
    pub pressure_memory: Option<PressureOut>,
    pub pressure_io: Option<PressureOut>,
    pub context_switches_per_sec: Option<f64>,
    pub forks_per_sec: Option<f64>,
    pub page_faults_per_sec: Option<f64>,
    pub major_faults_per_sec: Option<f64>,
    pub swap_in_pages_per_sec: Option<f64>,
    pub swap_out_pages_per_sec: Option<f64>,
    pub disks: Vec<DiskOut>,
    pub nets: Vec<NetOut>,
    /// The whole disks' rates summed (`host.disk.read_bytes_per_sec` in alerts, history and
    /// report); `null` without a previous sample.
    #[serde(default)]
    pub disk: DiskTotalsOut,
    /// Every interface's rates but `lo`'s, summed (what crosses a NIC).
    #[serde(default)]
    pub net: NetTotalsOut,
    /// With `--net`: what the network programs counted, the part no process owned apart;
    /// `null` without them or a previous sample.
    #[serde(default)]
    pub process_net: Option<ProcessNetOut>,
    /// Processes on the host (in the sample).
    #[serde(default)]
    pub processes: u64,
    pub uptime_secs: Option<f64>,
    pub boot_time_unix_secs: Option<u64>,
    /// Watts per energy or power domain; absent where none is readable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power: Vec<PowerOut>,
    /// The host's total (RAPL's psys, else packages and DRAM; plus NVIDIA boards).
    #[serde(default)]
    pub power_host_watts: Option<f64>,
    /// GPUs: NVML devices, and DRM devices with their clients summed; absent where none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuOut>,
}

/// One energy or power domain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PowerOut {
    /// `rapl:package-0`, `rapl:package-0/dram`, `hwmon:amdgpu/PPT`, `nvml:0`.
    pub domain: String,
    /// `null` for an energy counter until two samples exist.
    pub watts: Option<f64>,
    /// Whether this domain is part of `power_host_watts`.
    pub in_host_total: bool,
}

/// One engine's busy share.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineOut {
    pub name: String,
    pub busy_percent: f64,
}

/// One GPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuOut {
    /// `nvml:0`, or `drm:` and the PCI device (or the driver where there is none).
    pub id: String,
    /// NVML's product name, or the DRM driver.
    pub name: String,
    /// NVML's utilization, or the busiest engine summed over the device's DRM clients.
    pub busy_percent: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub power_watts: Option<f64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// DRM clients (each once) or NVML processes on it.
    pub clients: usize,
    /// Per engine (DRM devices only).
    pub engines: Vec<EngineOut>,
}

fn engines(list: &[proctor_model::gpu::EngineBusy]) -> Vec<EngineOut> {
    list.iter().map(|e| EngineOut { name: e.name.clone(), busy_percent: e.busy_percent }).collect()
}

/// The host series totals the shape carries, as the model computed them for this sample: their
/// indexes are found by name once, not per shape (a string search each, every sample).
pub(crate) fn host_totals(h: &proctor_model::HostView) -> [Option<f64>; 4] {
    const NAMES: [&str; 4] = [
        "host.disk.read_bytes_per_sec",
        "host.disk.write_bytes_per_sec",
        "host.net.rx_bytes_per_sec",
        "host.net.tx_bytes_per_sec",
    ];
    static INDEXES: std::sync::OnceLock<[Option<usize>; 4]> = std::sync::OnceLock::new();
    let at = INDEXES.get_or_init(|| NAMES.map(proctor_model::series::index));
    at.map(|i| i.and_then(|i| h.series[i]))
}

pub fn host(s: &Snapshot) -> HostOut {
    let h = &s.host;
    HostOut {
        per_cpu: h.per_cpu.iter().map(|(id, c)| PerCpuOut { cpu: *id, shares: CpuOut::new(c) }).collect(),
        disks: h
            .disks
            .iter()
            .map(|d| DiskOut {
                device: d.name.to_string(),
                read_bytes_per_sec: d.read_bytes_per_sec,
                write_bytes_per_sec: d.write_bytes_per_sec,
                reads_per_sec: d.reads_per_sec,
                writes_per_sec: d.writes_per_sec,
                busy_percent: d.busy_percent,
            })
            .collect(),
        nets: h
            .nets
            .iter()
            .map(|n| NetOut {
                device: n.name.to_string(),
                rx_bytes_per_sec: n.rx_bytes_per_sec,
                tx_bytes_per_sec: n.tx_bytes_per_sec,
                rx_packets_per_sec: n.rx_packets_per_sec,
                tx_packets_per_sec: n.tx_packets_per_sec,
            })
            .collect(),
        power: h
            .power
            .iter()
            .map(|p| PowerOut { domain: p.domain.to_string(), watts: p.watts, in_host_total: p.in_host_total })
            .collect(),
        gpus: h
            .gpus
            .iter()
            .map(|g| GpuOut {
                id: g.id.clone(),
                name: g.name.clone(),
                busy_percent: g.busy_percent,
                memory_used_bytes: g.memory_used_bytes,
                memory_total_bytes: g.memory_total_bytes,
                power_watts: g.power_watts,
                temperature_celsius: g.temperature_celsius,
                sm_clock_mhz: g.sm_clock_mhz,
                memory_clock_mhz: g.memory_clock_mhz,
                clients: g.clients,
                engines: engines(&g.engines),
            })
            .collect(),
        ..host_without_lists(s)
    }
}

/// [`host`] with its lists (per-CPU, disks, interfaces, power domains, GPUs) left empty: every
/// number outside a list, for readers that never look into one (alert rules' host series).
/// Building the lists is most of the shape's cost: an allocation each, a string per device.
pub fn host_without_lists(s: &Snapshot) -> HostOut {
    let h = &s.host;
    let m = s.sample.host.meminfo;
    let [disk_read, disk_write, net_rx, net_tx] = host_totals(h);
    HostOut {
        online_cpus: h.online_cpus,
        cpu: h.cpu.as_ref().map(CpuOut::new),
        per_cpu: Vec::new(),
        memory: MemoryOut {
            total_bytes: h.memory_total_bytes,
            available_bytes: h.memory_available_bytes,
            used_bytes: h.memory_used_bytes,
            swap_total_bytes: m.and_then(|m| m.swap_total_bytes),
            swap_used_bytes: h.swap_used_bytes,
        },
        load: h.load.map(|[avg1, avg5, avg15]| LoadOut { avg1, avg5, avg15 }),
        pressure_cpu: pressure(h.pressure_cpu),
        pressure_memory: pressure(h.pressure_memory),
        pressure_io: pressure(h.pressure_io),
        context_switches_per_sec: h.context_switches_per_sec,
        forks_per_sec: h.forks_per_sec,
        page_faults_per_sec: h.page_faults_per_sec,
        major_faults_per_sec: h.major_faults_per_sec,
        swap_in_pages_per_sec: h.swap_in_pages_per_sec,
        swap_out_pages_per_sec: h.swap_out_pages_per_sec,
        disks: Vec::new(),
        nets: Vec::new(),
        // The catalog's totals as the model computes them for every surface (whole disks,
        // partitions not counted twice; every interface but lo), so one name is one number.
        disk: DiskTotalsOut { read_bytes_per_sec: disk_read, write_bytes_per_sec: disk_write },
        net: NetTotalsOut { rx_bytes_per_sec: net_rx, tx_bytes_per_sec: net_tx },
        process_net: h.process_net.map(|n| ProcessNetOut {
            rx_bytes_per_sec: n.rx_bytes_per_sec,
            tx_bytes_per_sec: n.tx_bytes_per_sec,
            unowned_rx_bytes_per_sec: n.unowned_rx_bytes_per_sec,
            unowned_tx_bytes_per_sec: n.unowned_tx_bytes_per_sec,
            table_full: n.table_full,
        }),
        processes: s.rows.len() as u64,
        uptime_secs: h.uptime_secs,
        boot_time_unix_secs: h.boot_time_unix_secs,
        power: Vec::new(),
        power_host_watts: h.power_host_watts,
        gpus: Vec::new(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelOut {
    pub path: String,
    pub cpu_quota_cpus: Option<f64>,
    pub cpu_quota_usec: Option<u64>,
    pub cpu_period_usec: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub memory_high_bytes: Option<u64>,
    pub cpuset_cpus: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerOut {
    /// The process whose cgroup is "the container".
    pub pid: Option<u32>,
    pub cgroup_version: Option<String>,
    pub cgroup_path: Option<String>,
    pub host_online_cpus: Option<usize>,
    pub affinity_cpus: Option<usize>,
    pub cpuset_cpus: Option<usize>,
    pub quota_cpus: Option<f64>,
    pub quota_path: Option<String>,
    pub effective_cpus: Option<f64>,
    pub effective_cpus_ceil: Option<u32>,
    pub memory_limit_bytes: Option<u64>,
    pub memory_limit_source: Option<String>,
    pub memory_current_bytes: Option<u64>,
    pub memory_peak_bytes: Option<u64>,
    /// CPUs' worth of time the cgroup used over the last interval.
    pub cpu_used_cpus: Option<f64>,
    pub cpu_throttled_periods_total: Option<u64>,
    pub cpu_throttled_seconds_total: Option<f64>,
    pub pids_current: Option<u64>,
    pub pressure_cpu: Option<PressureOut>,
    pub pressure_memory: Option<PressureOut>,
    pub pressure_io: Option<PressureOut>,
    /// Own level first, then each ancestor.
    pub levels: Vec<LevelOut>,
    pub limits_age_secs: Option<f64>,
    pub warnings: Vec<String>,
    /// Why there is no cgroup view, when there is none.
    pub error: Option<String>,
}

pub fn container(s: &Snapshot) -> ContainerOut {
    let c = s.sample.container.as_ref();
    ContainerOut {
        levels: c
            .map(|c| {
                c.limits
                    .levels
                    .iter()
                    .map(|l| LevelOut {
                        path: l.path.clone(),
                        cpu_quota_cpus: l.cpu_quota.map(|q| q.cpus()),
                        cpu_quota_usec: l.cpu_quota.map(|q| q.quota_usec),
                        cpu_period_usec: l.cpu_quota.map(|q| q.period_usec),
                        memory_limit_bytes: l.memory_limit_bytes,
                        memory_high_bytes: l.memory_high_bytes,
                        cpuset_cpus: l.cpuset_cpus.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        warnings: s.truth.warnings.clone(),
        ..container_without_lists(s)
    }
}

/// [`container`] with its lists (the cgroup levels, the warnings) left empty: every number
/// outside a list, for readers that never look into one (alert rules' container series).
pub fn container_without_lists(s: &Snapshot) -> ContainerOut {
    let t = &s.truth;
    let c = s.sample.container.as_ref();
    let counters = c.map(|c| &c.counters);
    ContainerOut {
        pid: c.map(|c| c.pid),
        cgroup_version: t.cgroup_version.map(str::to_string),
        cgroup_path: t.cgroup_path.clone(),
        host_online_cpus: t.host_online_cpus,
        affinity_cpus: t.affinity_cpus,
        cpuset_cpus: t.cpuset_cpus,
        quota_cpus: t.quota_cpus,
        quota_path: t.quota_path.clone(),
        effective_cpus: t.effective_cpus,
        effective_cpus_ceil: t.effective_cpus_ceil,
        memory_limit_bytes: t.memory_limit_bytes,
        memory_limit_source: t.memory_limit_source.clone(),
        memory_current_bytes: t.memory_current_bytes,
        memory_peak_bytes: counters.and_then(|c| c.memory_peak_bytes),
        cpu_used_cpus: s.container_cpu_cores,
        cpu_throttled_periods_total: counters.and_then(|c| c.cpu_nr_throttled),
        cpu_throttled_seconds_total: counters.and_then(|c| c.cpu_throttled_usec).map(|u| u as f64 / 1e6),
        pids_current: counters.and_then(|c| c.pids_current),
        pressure_cpu: pressure(counters.and_then(|c| c.cpu_pressure)),
        pressure_memory: pressure(counters.and_then(|c| c.memory_pressure)),
        pressure_io: pressure(counters.and_then(|c| c.io_pressure)),
        levels: Vec::new(),
        limits_age_secs: c.map(|c| s.sample.mono_ns.saturating_sub(c.limits_read_mono_ns) as f64 / 1e9),
        warnings: Vec::new(),
        error: s.agent.container_error.clone(),
    }
}

/// How many processes and threads, by state, and the top `top.len()` by `sort`.
#[derive(Debug, Serialize)]
pub struct ProcessSummaryOut {
    pub count: usize,
    pub threads: u64,
    /// By state letter (`R`, `S`, `D`, `Z`, …).
    pub states: BTreeMap<String, u64>,
    /// The sort key `top` is ordered by (see `/api/v1/processes`'s `sort`).
    pub sort: &'static str,
    pub top: Vec<ProcessOut>,
}

/// The summary with the `top` first processes by `sort` (in its default order).
pub fn process_summary(s: &Snapshot, sort: ProcessSort, top: usize) -> ProcessSummaryOut {
    let mut states = BTreeMap::new();
    for r in &s.rows {
        *states.entry(r.state.to_string()).or_default() += 1;
    }
    let mut rows: Vec<_> = s.rows.iter().collect();
    sort_rows(&crate::fields::RowCtx::of(s), &mut rows, sort, sort.descending_by_default());
    ProcessSummaryOut {
        count: s.rows.len(),
        threads: s.rows.iter().map(|r| r.threads).sum(),
        states,
        sort: sort.name(),
        top: rows.into_iter().take(top).map(|r| process(s, r)).collect(),
    }
}

#[derive(Debug, Serialize)]
pub struct LastSampleOut {
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub derive_cpu_seconds: f64,
    pub files_read: u64,
    pub files_opened: u64,
    pub fds_kept: u64,
    pub processes_seen: u64,
    pub processes_gone: u64,
    /// Runs of the open-coded task scan, or `read`s of the BPF task iterator's file (0 where
    /// each process's `stat` was read).
    pub task_iter_reads: u64,
    /// Processes `/proc` listed that the iterator did not give: read from their `stat`.
    pub task_iter_missed: u64,
    /// New processes whose `status` waits for their next sample: young forked children, whose
    /// first row has the task scan's resident size and user, and no RSS split.
    pub status_later: u64,
    /// The stall ledger since the previous sample: the wall time of proctor's reads that took
    /// a target's mmap lock (every target together), the longest, and its target.
    pub target_lock_seconds: f64,
    pub target_lock_longest_seconds: f64,
    pub target_lock_worst_pid: Option<u32>,
    pub reader_wall_seconds: BTreeMap<&'static str, f64>,
    pub errors: BTreeMap<String, u64>,
}

/// Coverage: how many of the processes the kernel started proctor saw, whole run and last
/// sample. `forks_total` is `/proc/stat`'s `processes` (threads included); with the events,
/// `process_forks_total` is the fork tracepoint's count of processes alone and the coverage is
/// exact, else it is a lower bound (threads that came and went unseen count as processes).
#[derive(Debug, Serialize)]
pub struct StartsOut {
    pub forks_total: u64,
    pub processes_new_total: u64,
    pub threads_new_total: u64,
    pub process_forks_total: Option<u64>,
    /// Processes that started and ended between two samples, seen only by their events.
    pub exited_unseen_total: Option<u64>,
    pub process_exits_total: Option<u64>,
    /// Events lost (the ring or proctor's queue full), and ended processes counted but not
    /// listed in a sample (past its cap).
    pub events_lost_total: Option<u64>,
    pub exited_untold_total: Option<u64>,
    /// The event ring's drains that found a record written before them still being written and
    /// waited for it, those that stopped waiting at the bound (the record came a drain later),
    /// and the time they waited.
    pub event_drain_waits_total: Option<u64>,
    pub event_drain_unsettled_total: Option<u64>,
    pub event_drain_wait_seconds_total: Option<f64>,
    pub coverage_percent: Option<f64>,
    /// `true`: counted by the events; `false`: `/proc`'s lower bound.
    pub coverage_exact: bool,
    pub last_sample_coverage_percent: Option<f64>,
    /// Processes listed as ended in the last sample.
    pub last_sample_exited: usize,
}

#[derive(Debug, Serialize)]
pub struct WorkerOut {
    pub reads: u64,
    pub errors: u64,
    pub cpu_seconds: Option<f64>,
    pub skipped_unchanged: Option<u64>,
    /// The PSS worker's passes over processes too young to read yet (read from the next list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_young: Option<u64>,
    /// The PSS worker's reads put first because a client looked at the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_reads: Option<u64>,
    pub max_read_cpu_seconds: Option<f64>,
    pub budget_share_of_one_cpu: Option<f64>,
    pub timeouts: Option<u64>,
    /// The stall ledger of this worker's reads: their wall time, the longest, and its target.
    pub lock_seconds_total: f64,
    pub max_lock_seconds: f64,
    pub max_lock_pid: Option<u32>,
    /// The PSS worker's reads of big targets through `pagemap`, which hold the lock one 2 MiB
    /// walk at a time (absent where it cannot read `pagemap`: `proctor doctor` says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pagemap_reads: Option<u64>,
    /// The PSS worker's, where it traces the kernel's mmap_lock tracepoints (absent where it
    /// cannot): what the targets' own threads waited on its reads, and traces that lost events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_waited_seconds_total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traces_lost: Option<u64>,
    /// The cmdline worker's: command lines taken from exec events (BPF) with no read at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_exec_events: Option<u64>,
    /// The cmdline worker's, with the events: forked children first seen under 100 ms old that
    /// had not exec'd, whose read waited for the next sample (most are gone by then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub young_forks_later: Option<u64>,
    /// The PSS worker's: how much longer it rests after its last read to keep to its budget
    /// (0 when it is not resting); a process asked for waits for it too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resting_seconds: Option<f64>,
    /// The PSS worker's reads put off for a second while the CPUs it may run on were crowded,
    /// where the read would likely have held its target's lock past the cap on one read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_put_off_busy: Option<u64>,
    /// The PSS worker's, where it may read `pagemap`: reads of big targets that wanted a walk
    /// (short holds) and were read whole through `smaps_rollup` or put off, because a walk
    /// would not have fit its budget's savings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_walk_unaffordable: Option<u64>,
    /// The PSS worker's, where it may read `pagemap`: walks stopped at its savings' CPU (the
    /// target read through `smaps_rollup` that time; the walk's CPU bought only its rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walks_stopped: Option<u64>,
    /// The PSS worker's: the CPUs it may run on, where fewer than the host's (a cpuset,
    /// `taskset`), whose busy share counts as a crowd beside the host's run queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crowd_cpus: Option<u32>,
    /// The PSS worker thread's own scheduler slice (0: the kernel's, where none was asked or the
    /// kernel refused it: `proctor doctor` says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_seconds: Option<f64>,
}

/// The DRM worker: `/proc/PID/fd` walks (one per change of a process's fd set) and fdinfo
/// reads of GPU fds, under a CPU budget.
#[derive(Debug, Serialize)]
pub struct DrmWorkerOut {
    pub walks: u64,
    /// Walks put off to a later round by the budget.
    pub walks_deferred: u64,
    pub fdinfo_reads: u64,
    /// Processes holding a GPU fd, and distinct clients, at the last round.
    pub processes: u64,
    pub clients: u64,
    /// Processes whose fds may not be listed (another user's, without CAP_SYS_PTRACE).
    pub processes_denied: u64,
    pub errors: u64,
    /// GPU fds past the 64 kept per process, not read.
    pub fds_skipped: u64,
    pub cpu_seconds: f64,
    pub budget_share_of_one_cpu: f64,
}

/// The NVML thread.
#[derive(Debug, Serialize)]
pub struct NvmlOut {
    /// `loading`, `reading`, `unavailable` or `stuck`.
    pub state: &'static str,
    /// Why NVML is unavailable (the library's error).
    pub detail: Option<String>,
    pub devices: usize,
    pub reads: u64,
    pub errors: u64,
}

#[derive(Debug, Serialize)]
pub struct HistoryInfoOut {
    pub points: usize,
    pub capacity: usize,
    pub series: usize,
    pub bytes: usize,
    pub max_bytes: usize,
}

/// The HTTP server's own counters (`proctor serve`).
#[derive(Debug, Serialize, Default, Clone)]
pub struct HttpOut {
    pub requests_total: u64,
    pub unauthorized_total: u64,
    pub client_errors_total: u64,
    /// `/api/v1/history` requests that read the store, and the frames they decoded.
    pub history_store_requests_total: u64,
    pub history_store_frames_decoded_total: u64,
    /// `/api/v1/report` requests that read the store, and the frames they decoded.
    pub report_store_requests_total: u64,
    pub report_store_frames_decoded_total: u64,
    /// Connections open now; accepted in all; refused because every open connection was busy
    /// at the cap; closed to make room for a newcomer (the quietest first); failed accepts.
    pub connections_open: u64,
    pub connections_accepted_total: u64,
    pub connections_refused_total: u64,
    pub connections_evicted_total: u64,
    pub accept_errors_total: u64,
    /// Requests refused for a `Host` that is not this agent's, or a cross-origin browser page.
    pub foreign_host_refused_total: u64,
    /// Times free heap was handed back to the kernel, once a burst of 64 or more connections
    /// had all closed.
    pub heap_trims_total: u64,
}

/// What the surface around the agent adds to its figures.
#[derive(Debug, Default, Clone)]
pub struct AgentExtras {
    /// `None` where no HTTP server runs (the CLI, Python): `http` is then `null`.
    pub http: Option<HttpOut>,
    /// The filesystem usage watcher's problem, if it has one.
    pub disk_error: Option<String>,
    /// Each `--remote-write` queue (serve only; empty elsewhere).
    pub remote_write: Vec<RemoteWriteOut>,
}

/// One remote-write queue: what the receiver took, what failed and how far behind it is.
/// Counters are cumulative since the agent started.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RemoteWriteOut {
    pub url: String,
    /// `remote-write` (Prometheus remote write) or `otlp` (OTLP/HTTP metrics).
    pub protocol: &'static str,
    /// Remote write: `X-Prometheus-Remote-Write-Version`, `0.1.0` (1.0) or `2.0.0`, the one the
    /// queue speaks now. OTLP: the specification's version the messages follow.
    pub protocol_version: &'static str,
    /// Times a receiver asked for 2.0 showed it did not take it (a 2xx without the
    /// `X-Prometheus-Remote-Write-*-Written` headers, or a 415): the queue speaks 1.0 since.
    pub v2_fallbacks_total: u64,
    /// Why the queue speaks 1.0 though 2.0 was asked for.
    pub fallback: Option<String>,
    /// Points an OTLP receiver took the request of but refused (its `partial_success`).
    pub points_rejected_total: u64,
    /// Agent samples the receiver took.
    pub samples_sent_total: u64,
    /// Series points (one value at one time) the receiver took.
    pub points_sent_total: u64,
    /// Requests answered 2xx, and their compressed bytes.
    pub requests_sent_total: u64,
    pub bytes_sent_total: u64,
    /// Failed attempts by reason: `5xx`, `429`, `3xx` (a redirect, not followed), `other` (a
    /// status not 2xx–5xx) and `network` (no reply, or none within the timeout) are retried;
    /// `4xx` drops the batch, and so does `5xx_dropped` (OTLP: a 5xx other than 502–504).
    pub failed_total: BTreeMap<String, u64>,
    /// Agent samples in batches dropped on a 4xx other than 429.
    pub samples_dropped_total: u64,
    /// Agent samples the queue needed but the store never had (not recorded), skipped.
    pub samples_not_in_store_total: u64,
    pub last_error: Option<String>,
    /// The newest sample the receiver took, Unix milliseconds.
    pub delivered_until_unix_ms: Option<u64>,
    /// How far the receiver is behind the agent's newest sample.
    pub lag_secs: Option<f64>,
    /// About how many agent samples are still to send (the lag over the interval).
    pub backlog_samples: Option<u64>,
    /// True while samples are read back from the store (after an outage or a restart).
    pub backfilling: bool,
    /// Why the cursor file could not be read or written, if so.
    pub cursor_error: Option<String>,
}

/// How each process's TCP connections are found ([`AgentOut::process_net_walk`]).
#[derive(Debug, Serialize)]
pub struct NetWalkOut {
    /// `owned_sockets`: a walk of the sockets the programs gave an owner, every network
    /// namespace's, each sample; `tcp_tables`: the kernel's TCP tables every 10 s (the kernel
    /// refused the other, `tcp_tables_why`), this namespace's and the others entered.
    pub how: &'static str,
    pub tcp_tables_why: Option<String>,
    /// With `tcp_tables`: the other network namespaces with a process that used the network,
    /// how many the last walk entered, how many it left for a later walk (its budget: 20 ms of
    /// CPU), and why one could not be entered (no CAP_SYS_ADMIN: its processes show no
    /// connections).
    pub other_namespaces: u32,
    pub other_namespaces_walked: u32,
    pub other_namespaces_skipped: u32,
    pub other_namespaces_refused: Option<String>,
    /// Walks run since the start; with `tcp_tables`, the samples at which a walk was due and
    /// put off because no process's TCP figures had moved since the last walk and that one
    /// found no connection but listeners (a host without TCP traffic is not walked every 10 s).
    pub walks_total: u64,
    pub walks_skipped_quiet_total: u64,
}

#[derive(Debug, Serialize)]
pub struct AgentOut {
    pub pid: u32,
    pub version: &'static str,
    pub uptime_secs: f64,
    pub interval_secs: f64,
    pub samples_total: u64,
    /// How old the snapshot answering requests is: about one interval normally; growing
    /// without bound means the sampling thread has stopped.
    pub last_sample_age_secs: f64,
    pub missed_ticks_total: u64,
    /// Whole agent process: sampler, workers and surfaces.
    pub cpu_seconds_total: f64,
    /// `cpu_seconds_total` over uptime, in percent of one CPU.
    pub cpu_percent_of_one_cpu_avg: f64,
    pub sampling_cpu_seconds_total: f64,
    pub resident_bytes: u64,
    pub max_resident_bytes: u64,
    pub errors_total: BTreeMap<String, u64>,
    pub processes_gone_total: u64,
    /// Where each process's stat fields come from: `task_iterator` (BPF: one read for every
    /// process) or `proc` (`/proc/PID/stat`, one read each).
    pub process_stats_from: &'static str,
    /// Why not the task iterator, where it was asked for and could not be used.
    pub task_iter_unavailable: Option<String>,
    /// Which BPF reader gives them, where `process_stats_from` is `task_iterator`: the
    /// open-coded scan (one program run, Linux 6.7+), or the iterator's file and why not the scan.
    pub task_iter_how: Option<String>,
    /// Where every exec and exit comes from: `bpf` (the process events: every process, those
    /// that lived between two samples too) or `proc` (only what each sample's listing shows).
    pub process_events_from: &'static str,
    /// Why not the events, where they were asked for and could not be had.
    pub process_events_unavailable: Option<String>,
    /// Where each process's network use comes from: `bpf` (counted in the kernel against the
    /// sockets it owns; `--net`) or `none` (not known: not asked for, or BPF refused).
    #[serde(default)]
    pub process_net_from: String,
    /// Why not, where it was asked for and could not be had.
    #[serde(default)]
    pub process_net_unavailable: Option<String>,
    /// How each process's TCP connections are found, where its network use is counted.
    pub process_net_walk: Option<NetWalkOut>,
    /// Processes started since the agent's second sample against the kernel's count.
    pub starts: StartsOut,
    pub last_sample: LastSampleOut,
    pub pss_worker: Option<WorkerOut>,
    pub cmdline_worker: Option<WorkerOut>,
    /// The DRM worker (per-process GPU from fdinfo); `null` where it did not start (no
    /// `/dev/dri`, or GPU reads off).
    pub drm_worker: Option<DrmWorkerOut>,
    /// The NVML thread: `state` is `loading`, `reading`, `unavailable` (with `detail`) or
    /// `stuck`; `null` where GPU reads are off.
    pub nvml: Option<NvmlOut>,
    pub history: HistoryInfoOut,
    pub recording: RecordingOut,
    /// `null` where the agent serves no HTTP.
    pub http: Option<HttpOut>,
    pub disk_error: Option<String>,
    /// Each `--remote-write` queue; empty when there is none.
    pub remote_write: Vec<RemoteWriteOut>,
}

/// The agent's recording into its data directory. Three states: off (`enabled` false, `dir`
/// null), failed (`enabled` false, `dir` and `error` set: the store could not be opened,
/// sampling goes on), recording (`enabled` true). Figures are cumulative since start and lag
/// the snapshot by one sample.
#[derive(Debug, Serialize)]
pub struct RecordingOut {
    pub enabled: bool,
    pub dir: Option<String>,
    pub error: Option<String>,
    pub frames_written: u64,
    pub key_frames: u64,
    pub bytes_written: u64,
    /// Samples not recorded because the recorder's queue was full (the store fell behind).
    pub dropped: u64,
    pub write_errors: u64,
    pub last_write_error: Option<String>,
    /// CPU of the recorder thread (encode, compress, write).
    pub write_cpu_seconds: f64,
}

pub fn error_key(reader: &str, reason: &str) -> String {
    format!("{reader}:{reason}")
}

pub fn agent(s: &Snapshot, extras: &AgentExtras) -> AgentOut {
    let a: &AgentSelf = &s.agent;
    let uptime = s.sample.unix_ns.saturating_sub(a.started_unix_ns) as f64 / 1e9;
    let c = &s.sample.cost;
    AgentOut {
        pid: a.pid,
        version: env!("CARGO_PKG_VERSION"),
        uptime_secs: uptime,
        interval_secs: a.interval_ns as f64 / 1e9,
        samples_total: a.samples,
        last_sample_age_secs: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_nanos().saturating_sub(u128::from(s.sample.unix_ns)) as f64 / 1e9),
        missed_ticks_total: a.missed_ticks,
        cpu_seconds_total: a.process_cpu_seconds,
        cpu_percent_of_one_cpu_avg: if uptime > 0.0 { 100.0 * a.process_cpu_seconds / uptime } else { 0.0 },
        sampling_cpu_seconds_total: a.sampling_cpu_seconds,
        resident_bytes: a.resident_bytes,
        max_resident_bytes: a.max_resident_bytes,
        errors_total: a.errors.iter().map(|((r, k), n)| (error_key(r, k), *n)).collect(),
        processes_gone_total: a.processes_gone,
        process_stats_from: if a.task_iter_used { "task_iterator" } else { "proc" },
        task_iter_unavailable: a.task_iter_why_not.clone(),
        task_iter_how: a.task_iter_how.clone(),
        process_events_from: if a.events_used { "bpf" } else { "proc" },
        process_events_unavailable: a.events_why_not.clone(),
        process_net_from: if a.net_used { "bpf" } else { "none" }.to_string(),
        process_net_unavailable: a.net_why_not.clone(),
        process_net_walk: a.net_walk.as_ref().map(|w| NetWalkOut {
            how: if w.tcp_tables.is_some() { "tcp_tables" } else { "owned_sockets" },
            tcp_tables_why: w.tcp_tables.clone(),
            other_namespaces: w.namespaces_found,
            other_namespaces_walked: w.namespaces_walked,
            other_namespaces_skipped: w.namespaces_skipped,
            other_namespaces_refused: w.namespaces_refused.clone(),
            walks_total: w.walks,
            walks_skipped_quiet_total: w.walks_skipped_quiet,
        }),
        starts: {
            let t = &a.starts;
            let ev = a.events_used;
            StartsOut {
                forks_total: t.forks,
                processes_new_total: t.processes_new,
                threads_new_total: t.threads_new,
                process_forks_total: ev.then_some(t.process_forks),
                exited_unseen_total: ev.then_some(t.exited_unseen),
                process_exits_total: ev.then_some(t.exits),
                events_lost_total: ev.then_some(t.lost),
                exited_untold_total: ev.then_some(t.untold),
                event_drain_waits_total: ev.then_some(t.drain_waits),
                event_drain_unsettled_total: ev.then_some(t.drain_unsettled),
                event_drain_wait_seconds_total: ev.then_some(t.drain_wait_ns as f64 / 1e9),
                coverage_percent: t.coverage(ev).map(|(c, _)| 100.0 * c),
                coverage_exact: ev,
                last_sample_coverage_percent: c.starts.and_then(|s| s.coverage()).map(|(c, _)| 100.0 * c),
                last_sample_exited: s.sample.exited.len(),
            }
        },
        last_sample: LastSampleOut {
            cpu_seconds: c.cpu_ns as f64 / 1e9,
            wall_seconds: c.wall_ns as f64 / 1e9,
            derive_cpu_seconds: a.last_derive_cpu_ns as f64 / 1e9,
            files_read: c.files_read,
            files_opened: c.files_opened,
            fds_kept: c.fds_kept,
            processes_seen: c.processes_seen,
            processes_gone: c.processes_gone,
            task_iter_reads: c.task_iter_reads,
            task_iter_missed: c.task_iter_missed,
            status_later: c.status_later,
            target_lock_seconds: c.target_lock.total_ns as f64 / 1e9,
            target_lock_longest_seconds: c.target_lock.max_ns as f64 / 1e9,
            target_lock_worst_pid: (c.target_lock.reads > 0).then_some(c.target_lock_worst_pid),
            reader_wall_seconds: c.reader_wall_ns.iter().map(|(k, v)| (*k, *v as f64 / 1e9)).collect(),
            errors: c.errors.iter().map(|((r, k), n)| (error_key(r, k), *n)).collect(),
        },
        pss_worker: a.pss.as_ref().map(|p| (p, p.lock.merge(p.pagemap_lock))).map(|(p, lock)| WorkerOut {
            reads: p.reads,
            errors: p.errors,
            cpu_seconds: Some(p.cpu_ns as f64 / 1e9),
            skipped_unchanged: Some(p.skipped_unchanged),
            skipped_young: Some(p.skipped_young),
            asked_reads: Some(p.asked_reads),
            max_read_cpu_seconds: Some(p.max_read_cpu_ns as f64 / 1e9),
            budget_share_of_one_cpu: Some(p.budget),
            timeouts: None,
            lock_seconds_total: lock.lock_ns as f64 / 1e9,
            max_lock_seconds: lock.max_lock_ns as f64 / 1e9,
            max_lock_pid: (lock.max_lock_ns > 0).then_some(lock.max_lock_pid),
            pagemap_reads: p.pagemap.then_some(p.pagemap_reads),
            target_waited_seconds_total: p.waits_traced.then_some(p.target_waited_ns as f64 / 1e9),
            traces_lost: p.waits_traced.then_some(p.traces_lost),
            from_exec_events: None,
            young_forks_later: None,
            resting_seconds: Some(p.resting_ns as f64 / 1e9),
            reads_put_off_busy: Some(p.put_off_busy),
            reads_walk_unaffordable: p.pagemap.then_some(p.walks_unaffordable),
            walks_stopped: p.pagemap.then_some(p.walks_stopped),
            crowd_cpus: (p.crowd_cpus > 0).then_some(p.crowd_cpus),
            slice_seconds: Some(p.slice_ns as f64 / 1e9),
        }),
        cmdline_worker: a.cmdline.as_ref().map(|c| WorkerOut {
            reads: c.reads,
            errors: c.errors,
            cpu_seconds: None,
            skipped_unchanged: None,
            skipped_young: None,
            asked_reads: None,
            max_read_cpu_seconds: None,
            budget_share_of_one_cpu: None,
            timeouts: Some(c.timeouts),
            lock_seconds_total: c.lock.lock_ns as f64 / 1e9,
            max_lock_seconds: c.lock.max_lock_ns as f64 / 1e9,
            max_lock_pid: (c.lock.max_lock_ns > 0).then_some(c.lock.max_lock_pid),
            pagemap_reads: None,
            target_waited_seconds_total: None,
            traces_lost: None,
            from_exec_events: a.events_used.then_some(c.from_exec),
            young_forks_later: a.events_used.then_some(c.young_forks_later),
            resting_seconds: None,
            reads_put_off_busy: None,
            reads_walk_unaffordable: None,
            walks_stopped: None,
            crowd_cpus: None,
            slice_seconds: None,
        }),
        drm_worker: a.drm.map(|d| DrmWorkerOut {
            walks: d.walks,
            walks_deferred: d.deferred,
            fdinfo_reads: d.fdinfo_reads,
            processes: d.processes,
            clients: d.clients,
            processes_denied: d.denied,
            errors: d.errors,
            fds_skipped: d.fds_skipped,
            cpu_seconds: d.cpu_ns as f64 / 1e9,
            budget_share_of_one_cpu: d.budget,
        }),
        nvml: a.nvml.as_ref().map(|n| NvmlOut {
            state: n.state,
            detail: n.detail.clone(),
            devices: n.devices,
            reads: n.reads,
            errors: n.errors,
        }),
        history: HistoryInfoOut {
            points: a.history.points,
            capacity: a.history.capacity,
            series: a.history.series,
            bytes: a.history.bytes,
            max_bytes: a.history.max_bytes,
        },
        recording: recording(&a.recording),
        http: extras.http.clone(),
        disk_error: extras.disk_error.clone(),
        remote_write: extras.remote_write.clone(),
    }
}

pub fn recording(r: &RecordingStatus) -> RecordingOut {
    RecordingOut {
        enabled: r.enabled,
        dir: r.dir.as_ref().map(|d| d.display().to_string()),
        error: r.error.clone(),
        frames_written: r.stats.written,
        key_frames: r.stats.key_frames,
        bytes_written: r.stats.frame_bytes,
        dropped: r.stats.dropped,
        write_errors: r.stats.write_errors,
        last_write_error: r.stats.last_write_error.clone(),
        write_cpu_seconds: r.stats.cpu_ns as f64 / 1e9,
    }
}

/// The whole document, with the `top` first processes by `sort`.
pub fn snapshot(s: &Snapshot, sort: ProcessSort, top: usize, extras: &AgentExtras) -> SnapshotOut {
    SnapshotOut {
        api_version: API_VERSION,
        seq: s.sample.seq,
        time_unix_ms: s.unix_ms(),
        interval_secs: s.interval_secs,
        host: host(s),
        container: container(s),
        processes: process_summary(s, sort, top),
        exited: crate::exited::exited_list(&s.sample),
        agent: agent(s, extras),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A snapshot of this machine with rates (two samples 50 ms apart), PSS off.
    pub(crate) fn live() -> Snapshot {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let first = sampler.sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
        Snapshot::derive(sampler.sample(), Some(&first))
    }

    /// The shapes without lists (what alert rules read) are the whole shapes but for their
    /// lists, field for field: one name, one number, on every surface.
    #[test]
    fn a_shape_without_lists_is_the_shape_less_its_lists() {
        let s = live();
        let mut full = host(&s);
        // Lists this machine has: the comparison below is not of two empty shapes.
        assert!(!full.per_cpu.is_empty() && !full.nets.is_empty());
        (full.per_cpu, full.disks, full.nets, full.power, full.gpus) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        assert_eq!(json(&full), json(&host_without_lists(&s)));
        let mut full = container(&s);
        (full.levels, full.warnings) = (Vec::new(), Vec::new());
        assert_eq!(json(&full), json(&container_without_lists(&s)));
    }

    fn json(shape: &impl Serialize) -> serde_json::Value {
        serde_json::to_value(shape).expect("a shape serializes")
    }
}
