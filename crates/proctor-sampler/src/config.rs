//! Sampler settings, with defaults for a long-running agent.

use std::time::Duration;

use proctor_procfs::Root;

/// Which host files a cycle reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostFiles {
    /// Everything proctor shows: CPU, memory, load, vmstat, disks, network, PSI, NUMA, uptime.
    #[default]
    All,
    /// `/proc/stat` and `/proc/loadavg` only: what `collectl -sc` reads per sample.
    Cpu,
}

/// The reads a running sampler can be told to start or stop between two cycles
/// ([`crate::Sampler::set_reads`]): `proctor top` turns them on when a column that needs them
/// is shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reads {
    /// As [`SamplerConfig::pss_budget`]: 0 stops the PSS worker.
    pub pss_budget: f64,
    /// As [`SamplerConfig::process_io`].
    pub process_io: bool,
    /// As [`SamplerConfig::process_threads`].
    pub threads: bool,
}

#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub host_files: HostFiles,
    /// Read the watched container's cgroup (limits and counters).
    pub container: bool,
    /// What stands for `/` (a fake tree in tests).
    pub root: Root,
    /// Scan processes at all (host-only sampling is much cheaper).
    pub processes: bool,
    /// Read `/proc/PID/io` on every cycle. Off by default: it is a third file per pid and
    /// unreadable for other users' processes when unprivileged.
    pub process_io: bool,
    /// Read each multi-threaded process's threads (`/proc/PID/task/TID/stat`, open, read and
    /// close each, after listing `/proc/PID/task`) every cycle. Off by default: it costs a file
    /// per thread; `proctor top` turns it on while `H` shows thread rows.
    pub process_threads: bool,
    /// Read `/proc/PID/cgroup` once per new process, to group processes by container.
    pub process_cgroups: bool,
    /// Count each process's open fds every cycle (one `statx` of `/proc/PID/fd` per process;
    /// Linux 6.2 and later give the count as its size). Off by default; on with groups.
    pub process_fds: bool,
    /// Read every process's stat fields through the BPF task iterator (proctor-bpf: one
    /// read for every task) where it can be loaded and the root is this machine's `/`; where
    /// not, `/proc/PID/stat` as always, and [`Sampler::task_iter_status`] says why.
    pub task_iter: bool,
    /// Take every exec and process exit from the BPF process events (proctor-bpf) where they
    /// can be loaded and the root is this machine's `/`: each sample then lists the processes
    /// that ended since the one before (`Sample::exited`), those that lived between two
    /// samples too, and counts starts exactly; where not, [`Sampler::events_status`] says why.
    pub process_events: bool,
    /// Count each process's network use in the kernel (BPF, with CAP_BPF, CAP_PERFMON and
    /// CAP_NET_ADMIN or as root, and the cgroup2 root to attach to): `ProcessSample::net` and
    /// `HostSample::net`; where not, [`crate::Sampler::net_status`] says why. Off by default:
    /// it costs every packet the host sends or receives ~0.2 µs (bench/net/cost.sh: +7.7 % CPU
    /// for a 50,000 packets/s UDP echo), more than the 2 % the monitor may add.
    pub process_net: bool,
    /// Read each process's command line once, on the cmdline worker.
    pub cmdline: bool,
    /// How long a cmdline read may take before the worker is written off and replaced.
    pub cmdline_timeout: Duration,
    /// The process whose cgroup is "the container" (0: proctor itself).
    pub container_pid: u32,
    /// How often cgroup limits (quota, memory limit, cpuset) are re-read: they change at
    /// runtime, but walking every ancestor on every cycle would waste reads.
    pub limits_refresh: Duration,
    /// Share of one core the PSS worker may spend on `smaps_rollup` (0 disables it).
    pub pss_budget: f64,
    /// Restrict PSS reads to this pid's tree (`None`: every process).
    pub pss_root: Option<u32>,
    /// Age past which a PSS reading is refreshed even though the process's own counters did
    /// not move (another sharer of its pages exiting changes its PSS).
    pub pss_max_age: Duration,
    /// Share of wall time one target's mmap lock may be held by proctor's PSS reads (0.001: 1 ms
    /// per second), and the longest one read may hold it before that target is not read again
    /// ([`crate::pss::TargetLimits`]).
    pub target_budget: f64,
    pub target_max_hold: Duration,
    /// Measure what each target's own threads waited on the PSS reads, from the kernel's
    /// mmap_lock tracepoints where proctor may use them ([`crate::lockwait`]).
    pub trace_lock_waits: bool,
    /// Read the agent's own process's PSS again by age or staleness only, not each time its
    /// counters move with its own work ([`crate::pss::TargetLimits::own_by_age`]). Off where
    /// the agent runs inside the process it watches (the Jupyter drop-in).
    pub pss_own_by_age: bool,
    /// The PSS worker thread's own scheduler slice ([`crate::pss::TargetLimits::slice`]; zero:
    /// the kernel's).
    pub pss_slice: Duration,
    /// The sampling thread's own scheduler slice (zero, the default: the kernel's), taken by the
    /// thread that samples in a loop (the agent's) through
    /// [`proctor_procfs::system::set_thread_slice`]: a target's thread that wakes on its CPU
    /// during a sample gets in at its wakeup, not after the kernel's longer slice.
    pub sampling_slice: Duration,
    /// Read energy and power counters (RAPL, hwmon) every cycle.
    pub power: bool,
    /// Read GPUs: DRM clients from fdinfo (on the DRM worker, where the root has `/dev/dri`)
    /// and NVIDIA devices through NVML (on its own thread, on a live root).
    pub gpu: bool,
    /// Share of one core the DRM worker's fd walks may use.
    pub gpu_budget: f64,
    /// How often a process is walked again where the kernel gives no fd count (before 6.2).
    pub gpu_rewalk: Duration,
    /// How long an NVML read may run before it is reported stuck and its figures are left out.
    pub nvml_timeout: Duration,
    /// The NVML library to open (`libnvidia-ml.so.1`).
    pub nvml_library: String,
    /// At most this many per-pid files kept open; past it a file is read with open/read/close.
    /// `None`: the open-file limit less a reserve for the rest of the process
    /// ([`crate::kept_fd_budget`]), so a large process table never takes the fds that `serve`'s
    /// connections, the store and the alert log need.
    pub fd_budget: Option<usize>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            host_files: HostFiles::All,
            container: true,
            root: Root::default(),
            processes: true,
            process_io: false,
            process_threads: false,
            process_cgroups: true,
            process_fds: false,
            task_iter: true,
            process_events: true,
            process_net: false,
            cmdline: true,
            cmdline_timeout: Duration::from_secs(1),
            container_pid: 0,
            limits_refresh: Duration::from_secs(10),
            pss_budget: 0.02,
            pss_root: None,
            pss_max_age: crate::pss::DEFAULT_MAX_AGE,
            target_budget: crate::pss::TargetLimits::default().share,
            target_max_hold: crate::pss::TargetLimits::default().max_hold,
            trace_lock_waits: crate::pss::TargetLimits::default().trace_waits,
            pss_own_by_age: crate::pss::TargetLimits::default().own_by_age,
            pss_slice: crate::pss::TargetLimits::default().slice,
            sampling_slice: Duration::ZERO,
            power: true,
            gpu: true,
            gpu_budget: 0.01,
            gpu_rewalk: Duration::from_secs(30),
            nvml_timeout: Duration::from_secs(2),
            nvml_library: crate::nvml::LIBRARY.to_string(),
            fd_budget: None,
        }
    }
}
