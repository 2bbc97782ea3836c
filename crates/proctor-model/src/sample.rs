//! The raw sample: what one collection cycle read, plus what it cost.

use std::collections::BTreeMap;
use std::sync::Arc;

use proctor_procfs::cgroup::{CgroupCounters, CgroupLimits, CgroupPaths};
use proctor_procfs::host::{DiskStat, LoadAvg, MemInfo, NetDev, Pressure, Stat, Uptime, VmStat};
use proctor_procfs::process::{Io, SmapsRollup};
use serde::{Deserialize, Serialize};

use crate::gpu::{GpuSample, PowerReading};

/// One collection cycle. `Default` is an empty cycle (no host files, no processes, clock
/// ticks 0): for building samples field by field, as tests do.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Counts up from 0 for each sampler.
    pub seq: u64,
    /// Wall-clock time the cycle started, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
    /// Monotonic time the cycle started, nanoseconds since the sampler started. Rates use this.
    pub mono_ns: u64,
    pub clock_ticks_per_sec: u64,
    pub page_size: u64,
    pub host: HostSample,
    pub container: Option<ContainerSample>,
    /// Sorted by pid. Empty when the sampler was asked for host data only.
    pub processes: Vec<ProcessSample>,
    pub cost: SampleCost,
    /// The process group each process was folded into, when the agent keeps groups (`serve
    /// --groups`): stored with the sample so that every reader of a recording (report, dump,
    /// replay, rollups) sees the groups the agent saw, without the rules. Last, so a reader
    /// that stops at the host part never parses it; absent in older records.
    #[serde(default)]
    pub groups: Option<Arc<SampleGroups>>,
    /// DRM clients and NVIDIA devices, as the GPU readers last read them; `None` where there
    /// is no GPU to read (or GPU reads are off). Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Arc<GpuSample>>,
    /// Processes that ended since the previous sample, as the kernel told at their exit (BPF
    /// process events; empty without them), oldest end first, at most [`MAX_EXITED`] (the
    /// rest counted in `cost.starts`). Absent in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exited: Vec<ExitedProcess>,
}

/// Ended processes a sample keeps in full; more in one interval are counted, not kept.
pub const MAX_EXITED: usize = 4096;

/// A process that ended, from the kernel's own accounting at its exit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitedProcess {
    pub pid: u32,
    pub ppid: u32,
    /// As `stat`'s start time (clock ticks since boot): with `pid`, which process it was.
    pub start_ticks: u64,
    /// How long it lived, ns (its start to its last thread's exit).
    pub lifetime_ns: u64,
    /// When it ended, ns since the Unix epoch (from the kernel's boot-time clock).
    pub end_unix_ns: u64,
    pub comm: Arc<str>,
    /// Its command line: from its exec where the event had all of it, else as proctor last
    /// read it; `None` when neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<Arc<[String]>>,
    /// The path it exec'd, where proctor saw the exec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<Arc<str>>,
    /// Its cgroup (v2) path, where it could be resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<Arc<str>>,
    /// As `wait` reports it: the exit code in bits 8–15, a killing signal in the low 7.
    pub wait_status: u32,
    /// CPU time, ns: user and system, their sum the scheduler's total.
    pub user_ns: u64,
    pub system_ns: u64,
    /// CPU time of its children it waited for, ns.
    pub children_ns: u64,
    pub minflt: u64,
    pub majflt: u64,
    /// The most it had resident at once (`getrusage`'s `ru_maxrss`), bytes.
    pub peak_rss_bytes: u64,
    /// Whether a sample's process table had it (false: it lived and ended between two
    /// samples, and only its events tell of it).
    pub seen: bool,
    /// Its network counters as the kernel's table last had them, its last interval included
    /// (with `--net`; `None` without, or if it used no socket). Connections and round-trip
    /// times are not kept for an ended process. Boxed: most ended processes have none, and a
    /// storm lists thousands a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<Box<ProcessNet>>,
}

/// Processes started since the previous sample, against what the kernel counted: how much of
/// the machine's process churn proctor saw (issue 35's coverage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Starts {
    /// Tasks the kernel created (`/proc/stat`'s `processes`: threads included).
    pub forks: u64,
    /// Processes new in the process table, and the threads they and older processes gained
    /// (what `/proc` alone can see of the forks).
    pub processes_new: u64,
    pub threads_new: u64,
    /// From the BPF process events, where they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventStarts>,
}

/// What the BPF process events counted since the previous sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventStarts {
    /// New processes and new threads, as the kernel's fork tracepoint counted them.
    pub process_forks: u64,
    pub thread_forks: u64,
    pub execs: u64,
    pub exits: u64,
    /// Processes that started and ended between two samples (seen only by their events).
    pub exited_unseen: u64,
    /// Events lost: the ring had no room, or proctor's queue was full.
    pub lost: u64,
    /// Ended processes counted but not kept in `exited` (past [`MAX_EXITED`]).
    pub untold: u64,
    /// Processes the previous sample saw (listed, or ended unseen) that started after its fork
    /// count was read: this sample's count has them.
    #[serde(default)]
    pub seen_before: u64,
    /// Drains of the event ring that found a record written before they began still being
    /// written (reserved, not yet submitted, on another CPU) and waited for it; of those, the
    /// ones that stopped waiting at the bound (that record then comes with the next drain);
    /// and the time waited, ns. Counted over every drain the agent's process made since the
    /// previous sample.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drain_waits: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drain_unsettled: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drain_wait_ns: u64,
}

impl Starts {
    /// The share of processes started that proctor saw, 0–1, and whether it is exact (from the
    /// events) or a lower bound (from `/proc`: the kernel's count includes threads, and those
    /// that came and went unseen are counted as processes). `None` when nothing started.
    pub fn coverage(&self) -> Option<(f64, bool)> {
        match self.events {
            Some(e) => {
                let seen = self.processes_new + e.exited_unseen + e.seen_before;
                (e.process_forks > 0).then(|| ((seen as f64 / e.process_forks as f64).min(1.0), true))
            }
            None => {
                let started = self.forks.saturating_sub(self.threads_new).max(self.processes_new);
                (started > 0).then(|| ((self.processes_new as f64 / started as f64).min(1.0), false))
            }
        }
    }
}

/// Which group each of a sample's processes was folded into.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleGroups {
    /// `rules`, `cgroup` or `user`.
    pub by: String,
    /// Group name → its members' pids, ascending. A process no group took is in none.
    pub members: BTreeMap<String, Vec<u32>>,
    /// Group name → the pids of the sample's ended processes that no sample listed alive
    /// (`Sample::exited`, `seen` false) and that group took: what a reader of the recording
    /// needs to fold them as the agent did. Absent in older records; written even when empty,
    /// so that a delta patches `members` rather than replacing the whole part.
    #[serde(default)]
    pub exited: BTreeMap<String, Vec<u32>>,
}

impl SampleGroups {
    /// pid → group name, the shape `proctor_groups::fold` takes.
    pub fn names(&self) -> BTreeMap<u32, String> {
        let mut out = BTreeMap::new();
        for (name, pids) in &self.members {
            for pid in pids {
                out.insert(*pid, name.clone());
            }
        }
        out
    }
}

impl Sample {
    pub fn process(&self, pid: u32) -> Option<&ProcessSample> {
        self.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &self.processes[i])
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostSample {
    pub stat: Option<Stat>,
    pub meminfo: Option<MemInfo>,
    pub loadavg: Option<LoadAvg>,
    pub vmstat: Option<VmStat>,
    pub disks: Vec<DiskStat>,
    pub nets: Vec<NetDev>,
    pub pressure_cpu: Option<Pressure>,
    pub pressure_memory: Option<Pressure>,
    pub pressure_io: Option<Pressure>,
    /// Per NUMA node: (node id, its meminfo).
    pub numa: Vec<(u32, MemInfo)>,
    pub uptime: Option<Uptime>,
    pub online_cpus: Option<Vec<u32>>,
    /// Energy and power counters (RAPL zones, hwmon sensors, NVML boards) this process can
    /// read; empty where there are none. Absent in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power: Vec<PowerReading>,
    /// IP packets as the BPF network programs counted them (issue 36); `None` without them.
    /// Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<HostNet>,
}

/// The cgroup side of one sample, for the process the sampler watches as "the container"
/// (itself by default).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerSample {
    pub pid: u32,
    /// Shared between samples: resolved once per sampler.
    pub paths: Arc<CgroupPaths>,
    /// Shared between samples until the sampler re-reads limits.
    pub limits: Arc<CgroupLimits>,
    /// `mono_ns` of the sample that read `limits`.
    pub limits_read_mono_ns: u64,
    pub counters: CgroupCounters,
    /// `sched_getaffinity` of the watched process.
    pub affinity: Option<Arc<[u32]>>,
}

/// The `status` fields that `stat` and `statm` lack, and when they were read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReading {
    pub effective_uid: Option<u32>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub vm_swap_bytes: Option<u64>,
    /// `mono_ns` of the sample that read it.
    pub read_mono_ns: u64,
}

/// One `smaps_rollup` reading, made by the budgeted worker or on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PssReading {
    pub rollup: SmapsRollup,
    /// Monotonic time of the read, on the sampler's clock.
    pub read_mono_ns: u64,
    /// What the read cost the reader, in CPU nanoseconds.
    pub cost_cpu_ns: u64,
}

/// One process as read in one cycle. Memory sizes in bytes, CPU in clock ticks (cumulative).
/// `Default` is pid 0 with nothing read: for building one field by field, as tests do.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessSample {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    pub comm: Arc<str>,
    pub state: char,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// CPU of reaped children (user, system), cumulative; `None` in samples recorded before
    /// proctor read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutime_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cstime_ticks: Option<u64>,
    /// Minor and major faults of reaped children, cumulative; `None` in samples recorded
    /// before proctor read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cminflt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmajflt: Option<u64>,
    /// Open file descriptors (the size `stat` gives `/proc/PID/fd`, Linux 6.2 and later), read
    /// only when groups are kept; `None` when not read, not readable, or too old a kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_fds: Option<u32>,
    pub num_threads: u64,
    pub minflt: u64,
    pub majflt: u64,
    pub nice: i64,
    pub vsize_bytes: u64,
    /// `status`'s VmRSS as of its last read (the sampler reads it again whenever `stat`'s
    /// footprint moves), or `stat`'s rss where `status` has none: what htop shows, where
    /// `stat` alone is a per-CPU estimate on Linux 6.2 and later.
    pub resident_bytes: Option<u64>,
    pub status: Option<StatusReading>,
    /// Boxed, as `net` is: read only with `--io` (or a Read/s column shown), so most samples
    /// have none, and inline it was 112 of a sample's 832 bytes.
    pub io: Option<Box<Io>>,
    /// Filled in by the cmdline worker some time after the process is first seen.
    pub cmdline: Option<Arc<[String]>>,
    pub pss: Option<PssReading>,
    /// `pss` was read before the process's family last changed (a sharer of its pages
    /// appeared, left or exec'd; `proctor_sampler::pss`), so its share of shared pages may have
    /// moved since. Live only: the store keeps the reading and not this (its flips would cost
    /// a row each), so a stored sample reads `false`.
    #[serde(skip)]
    pub pss_stale: bool,
    /// Where `pss` is missing or stale: the reading of a clone, with its pid, a process of the
    /// same parent and name whose resident size and faults when read were within 16 pages of
    /// this one's now (`proctor_sampler::pss`), which stands for this one's until it is read
    /// itself. Shared with the clone's other stand-ins (no allocation per process and sample),
    /// and a pointer, as few processes have one. Live only: the store never keeps an estimate.
    #[serde(skip)]
    pub pss_estimate: Option<Arc<(u32, PssReading)>>,
    /// The process's cgroup as it names it (v2 path, or the v1 memory path).
    pub cgroup: Option<Arc<str>>,
    /// Its threads other than the main one (whose figures are the process's row), sorted by
    /// tid; read only while asked (`proctor top`'s `H`), so empty and left out otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskSample>,
    /// How long proctor's reads that take this process's mmap lock (`smaps_rollup`, `cmdline`)
    /// have held it since proctor first saw it: the stall ledger. `None` before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    /// Its network use, counted in the kernel against the sockets it owns (BPF, issue 36;
    /// `None` without it, and for a process that never used an IPv4 or IPv6 socket).
    /// Boxed: only with `--net`, and then only for processes that used a socket (160 bytes
    /// inline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<Box<ProcessNet>>,
}

/// One protocol's packets for one process, cumulative since proctor's network programs were
/// attached or the process started, whichever is later. Bytes are IP packets' lengths, headers
/// included (the link header not); `sent_bytes` and `received_bytes` are payload: a
/// datagram's, and for TCP what the peer acknowledged and what arrived in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub sent_bytes: u64,
    pub received_bytes: u64,
}

/// A process's network use ([`ProcessSample::net`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessNet {
    pub tcp: NetCounters,
    pub udp: NetCounters,
    /// TCP connects it started and connections its listeners accepted, cumulative.
    pub connects: u64,
    pub accepts: u64,
    /// TCP segments its sockets retransmitted, and resets sent and received, cumulative.
    pub retransmits: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    /// Its established TCP connections now, and their smoothed round-trip times (µs: median
    /// and max over those connections; `None` with none), from a walk of the TCP sockets.
    pub connections: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt_median_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt_max_us: Option<u32>,
}

impl ProcessNet {
    /// IP bytes and packets both ways, TCP and UDP together.
    pub fn rx_bytes(&self) -> u64 {
        self.tcp.rx_bytes + self.udp.rx_bytes
    }
    pub fn tx_bytes(&self) -> u64 {
        self.tcp.tx_bytes + self.udp.tx_bytes
    }
    pub fn rx_packets(&self) -> u64 {
        self.tcp.rx_packets + self.udp.rx_packets
    }
    pub fn tx_packets(&self) -> u64 {
        self.tcp.tx_packets + self.udp.tx_packets
    }
}

/// The host's IP packets as the network programs counted them, cumulative since they were
/// attached: every packet devices sent and received, and what no process's socket made or took
/// (forwarded, a handshake's answer, TIME_WAIT, ICMP, resets of no socket), so the process rows
/// and this add up to the devices' own counts (less their link headers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostNet {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_unowned_packets: u64,
    pub tx_unowned_bytes: u64,
    pub rx_unowned_packets: u64,
    pub rx_unowned_bytes: u64,
    /// Processes the kernel's table had no room for (their packets counted as unowned).
    pub table_full: u64,
}

/// The stall ledger's entry for one target: how long every proctor read that took the target's
/// mmap lock held it, summed, and the longest. Each read counts the hold the kernel's mmap_lock
/// tracepoints saw where proctor traces it (`proctor_sampler::lockwait`), else its wall time, an
/// upper bound on the hold (it also counts the wait for the lock and the copy out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    pub reads: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// One read held the lock longer than proctor lets one read hold it, so the reads that
    /// may be skipped (`smaps_rollup`) are not made again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
    /// The kernel refused proctor's last read of the target's `smaps_rollup` (no permission:
    /// another user namespace, or the ptrace access check), so it has no PSS; the read is not
    /// made again while the target's counters stand.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// Proctor put its last read of the target off, and has not read it since: the read would
    /// likely have held the lock past the cap on one read while the host had more runnable
    /// tasks than CPUs (or the fewer CPUs the worker may run on were all busy), and a walk of
    /// its pages did not fit the worker's budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub put_off: bool,
    /// The target's side, where the kernel's mmap_lock tracepoints let proctor see it: how long
    /// the target's own threads waited for their mmap lock while a proctor read held it
    /// (`proctor_sampler::lockwait`), whole microseconds. `None`: not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ns: Option<u64>,
}

impl Stall {
    /// One more read of `ns`.
    pub fn add(&mut self, ns: u64) {
        self.add_holds(ns, ns);
    }

    /// One more read that held the lock `total_ns` in holds of at most `longest_ns` each (a
    /// `pagemap` read takes the lock once per page table it walks).
    pub fn add_holds(&mut self, total_ns: u64, longest_ns: u64) {
        self.reads += 1;
        self.total_ns = self.total_ns.saturating_add(total_ns);
        self.max_ns = self.max_ns.max(longest_ns);
    }

    /// Two readers' ledgers of one target, together.
    pub fn merge(a: Option<Stall>, b: Option<Stall>) -> Option<Stall> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Stall {
                reads: a.reads + b.reads,
                total_ns: a.total_ns.saturating_add(b.total_ns),
                max_ns: a.max_ns.max(b.max_ns),
                capped: a.capped || b.capped,
                refused: a.refused || b.refused,
                put_off: a.put_off || b.put_off,
                waited_ns: match (a.waited_ns, b.waited_ns) {
                    (Some(x), Some(y)) => Some(x.saturating_add(y)),
                    (x, y) => x.or(y),
                },
            }),
            (a, b) => a.or(b),
        }
    }
}

/// One thread of a process, from `/proc/PID/task/TID/stat`: its own name, state and CPU. Its
/// memory is the process's (threads share one address space).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskSample {
    pub tid: u32,
    pub start_ticks: u64,
    pub comm: Arc<str>,
    pub state: char,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
}

/// What one collection cycle cost, measured by the cycle itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SampleCost {
    /// CPU time of the sampling thread during the cycle.
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub files_read: u64,
    pub files_opened: u64,
    /// Wall time per reader (`host`, `container`, `processes`, `workers`).
    #[serde(deserialize_with = "deserialize_wall")]
    pub reader_wall_ns: BTreeMap<&'static str, u64>,
    /// Failed reads by reader and reason, e.g. `("process.io", "permission")`; serialized as
    /// `"process.io:permission": n`, since JSON keys are strings.
    #[serde(serialize_with = "serialize_errors", deserialize_with = "deserialize_errors")]
    pub errors: BTreeMap<(&'static str, &'static str), u64>,
    /// Processes that exited between listing and reading: skipped, not errors.
    pub processes_gone: u64,
    pub processes_seen: u64,
    /// Runs of the open-coded task scan, or `read`s of the BPF task iterator's file, this
    /// cycle: every process's stat fields came from it (0: each from its `/proc/PID/stat`).
    #[serde(default)]
    pub task_iter_reads: u64,
    /// Processes `/proc` listed that the iterator's scan did not give (read from their `stat`).
    #[serde(default)]
    pub task_iter_missed: u64,
    /// New processes whose `status` read waits for their next sample: young forked children,
    /// whose first row has the scan's resident size and user and no RSS split.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub status_later: u64,
    /// Per-pid fds currently held open across cycles.
    pub fds_kept: u64,
    /// The stall ledger since the previous sample: proctor's reads that took a target's mmap
    /// lock (every target together; `max_ns` the longest of them), and the target of the
    /// longest (0 when there was none).
    #[serde(default)]
    pub target_lock: Stall,
    #[serde(default)]
    pub target_lock_worst_pid: u32,
    /// Processes started since the previous sample against the kernel's count; `None` on a
    /// sampler's first cycle, and when processes are not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<Starts>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SampleCost {
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

fn serialize_errors<S: serde::Serializer>(
    errors: &BTreeMap<(&'static str, &'static str), u64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(errors.len()))?;
    for ((reader, reason), count) in errors {
        map.serialize_entry(&format!("{reader}:{reason}"), count)?;
    }
    map.end()
}

/// Reader and reason names are `&'static str` because the sampler's are literals; a sample read
/// back from a store gets its names from this table. It leaks each distinct name once and holds
/// at most [`MAX_INTERNED_NAMES`] of them, so a hostile or corrupt record cannot grow it without
/// bound: past the cap, new names become `"other"`.
pub fn intern_name(name: &str) -> &'static str {
    use std::sync::Mutex;
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    // A poisoned lock only means another thread panicked between push and unlock; the Vec
    // is still a valid list of leaked names.
    let mut names = NAMES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(known) = names.iter().find(|known| **known == name) {
        return known;
    }
    if names.len() >= MAX_INTERNED_NAMES {
        return "other";
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

/// The most distinct reader and reason names [`intern_name`] keeps.
pub const MAX_INTERNED_NAMES: usize = 512;

fn deserialize_wall<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<&'static str, u64>, D::Error> {
    let owned: BTreeMap<String, u64> = BTreeMap::deserialize(deserializer)?;
    Ok(owned.into_iter().map(|(name, ns)| (intern_name(&name), ns)).collect())
}

/// The inverse of `serialize_errors`: `"reader:reason"` keys split at the last colon (reader
/// names contain dots, never colons).
fn deserialize_errors<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<(&'static str, &'static str), u64>, D::Error> {
    let owned: BTreeMap<String, u64> = BTreeMap::deserialize(deserializer)?;
    let mut errors = BTreeMap::new();
    for (key, count) in owned {
        let (reader, reason) = key.rsplit_once(':').unwrap_or((key.as_str(), "unknown"));
        *errors.entry((intern_name(reader), intern_name(reason))).or_insert(0) += count;
    }
    Ok(errors)
}
