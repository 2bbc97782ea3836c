//! Options and steps shared by the data commands: the fake-root switch, one snapshot from the
//! agent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use anyhow::Context;
use proctor_agent::{Agent, AgentConfig, Snapshot};
use proctor_procfs::Root;
use proctor_sampler::SamplerConfig;

/// Options every reading command shares.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadArgs {
    /// Read the host's /proc, /sys and cgroup mounts under DIR: a container that mounts the
    /// host's / there (podman run --pid=host -v /:/host:ro) watches the host.
    #[arg(long, value_name = "DIR", conflicts_with = "root")]
    pub host_root: Option<PathBuf>,
    /// Read /proc, /sys and cgroups under this directory instead of / (for captured trees).
    #[arg(long, hide = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Whose cgroup counts as "the container" (default: proctor's own).
    #[arg(long, value_name = "PID", default_value_t = 0)]
    pub container_pid: u32,
    /// Also read /proc/PID/io every sample (a third file per process; per-process disk rates).
    #[arg(long)]
    pub io: bool,
    /// Share of wall time one process's mmap lock may be held by proctor's PSS reads: after a
    /// read that held it for h, that process is not read again for h / SHARE (0.001: 1 ms per
    /// second, so a 20 ms read waits 20 s). Where lock waits are traced, a process whose threads
    /// waited on a read is read half as often from then (down to 1/16 of SHARE), and a step
    /// more often after a read it did not wait on. Its PSS age shows it.
    #[arg(long, value_name = "SHARE", default_value_t = 0.001, value_parser = target_share)]
    pub target_budget: f64,
    /// A process whose one read held its mmap lock longer than this is not read for PSS again
    /// (pss_note says so).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = proctor_vocab::duration_arg)]
    pub target_max_hold: Duration,
    /// Do not measure what targets waited on proctor's PSS reads. Where the kernel has the
    /// mmap_lock tracepoints and proctor runs as root, it keeps a tracing instance of its own
    /// (instances/proctor-PID-N under tracefs) that records only around each PSS read.
    #[arg(long)]
    pub no_lock_waits: bool,
    /// The PSS worker thread's own scheduler slice (Linux 6.12+; 0: the kernel's, 0.7 ms × 1 +
    /// log2 of the CPUs). One smaps_rollup of a big process runs tens of ms in the kernel; past
    /// this slice it yields to a thread that wakes on its CPU at that wakeup, where at a longer
    /// one that thread often waits for the next tick. The kernel takes 0.1–100 ms.
    #[arg(long, value_name = "DURATION", default_value = "100us", value_parser = proctor_vocab::duration_arg)]
    pub pss_slice: Duration,
    /// The sampling thread's own scheduler slice (Linux 6.12+; 0, the default: the kernel's).
    /// Past this slice it yields to a thread that wakes on its CPU, at that wakeup; its share of
    /// the CPU is the same. For measuring with `proctor impact`: 0.1 ms was not shown to move a
    /// target's p99 (docs/performance.md, impact, fifty-fourth session).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = proctor_vocab::duration_arg)]
    pub sampling_slice: Duration,
    /// Read each process's stat from /proc even where the BPF task iterator could give them all
    /// in one read (it loads with CAP_BPF and CAP_PERFMON, or as root, on Linux 6.2+ with BTF).
    #[arg(long)]
    pub no_task_iter: bool,
    /// Do not take every exec and process exit from the BPF process events (tracepoints into
    /// a ring buffer, with CAP_BPF and CAP_PERFMON or as root): processes that live between two
    /// samples are then not seen, only their parents' reaped CPU.
    #[arg(long)]
    pub no_process_events: bool,
    /// Count each process's network use in the kernel: BPF programs on the devices' send and
    /// receive tracepoints, the cgroup2 root's ingress, socket creation and release, and TCP's
    /// state changes, retransmits and resets (CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or root).
    /// Off by default: it costs every packet the host sends or receives ~0.2 µs of CPU
    /// (bench/net/programs.py).
    #[arg(long)]
    pub net: bool,
}

fn target_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("{text:?} is not a share of wall time above 0 and at most 1 (0.001 is 1 ms per second)")),
    }
}

impl ReadArgs {
    pub fn config(&self) -> anyhow::Result<SamplerConfig> {
        Ok(SamplerConfig {
            root: root_of(self.root.as_deref(), self.host_root.as_deref())?,
            container_pid: self.container_pid,
            process_io: self.io,
            target_budget: self.target_budget,
            target_max_hold: self.target_max_hold,
            trace_lock_waits: !self.no_lock_waits,
            pss_slice: self.pss_slice,
            sampling_slice: self.sampling_slice,
            task_iter: !self.no_task_iter,
            process_events: !self.no_process_events,
            process_net: self.net,
            ..SamplerConfig::default()
        })
    }
}

/// The root a command reads: a captured tree (`--root`), a host's `/` mounted elsewhere
/// (`--host-root`, which must hold a readable `proc/stat`), or `/`.
pub fn root_of(captured: Option<&Path>, host: Option<&Path>) -> anyhow::Result<Root> {
    match (captured, host) {
        (Some(dir), _) => Ok(Root::new(dir)),
        (None, Some(dir)) => {
            let root = Root::host(dir);
            // Read through the root, as every file under it is: a regular file, within the bound.
            // Its own words only: the error's source says the same again.
            root.read("/proc/stat").map_err(|e| anyhow::anyhow!("{e}")).with_context(|| {
                format!(
                    "--host-root {}: {} cannot be read, so that is not a host's / with its /proc mounted (in a container: -v /:{}:ro)",
                    dir.display(),
                    root.path("/proc/stat").display(),
                    dir.display()
                )
            })?;
            Ok(root)
        }
        (None, None) => Ok(Root::default()),
    }
}

/// A token or password kept in a file (every `--token-file`, `--bearer-token-file`, remote
/// write's secrets): the one bounded reader, `proctor_client::secret`.
pub fn secret(path: &Path, what: &str) -> anyhow::Result<String> {
    proctor_client::secret::read(path, what).map_err(anyhow::Error::msg)
}

/// One snapshot from the agent: its first sample, or with an interval the one after it, so
/// rates cover that interval. The agent is the one sampling loop; this starts it, takes what
/// it published and stops it.
pub fn one_snapshot(config: SamplerConfig, interval: Duration) -> anyhow::Result<Arc<Snapshot>> {
    one_snapshot_with(config, AgentConfig::brief(interval), interval)
}

/// [`one_snapshot`] from an agent configured as `agent_config` (its interval is `interval`'s).
pub fn one_snapshot_with(
    config: SamplerConfig,
    agent_config: AgentConfig,
    interval: Duration,
) -> anyhow::Result<Arc<Snapshot>> {
    // With no interval the agent's schedule never fires before it is stopped.
    let every = if interval.is_zero() { Duration::from_secs(3600) } else { interval };
    let agent_config = AgentConfig { interval: every, ..agent_config };
    let agent = Agent::start(config, agent_config).context("cannot start the sampling thread")?;
    let shared = agent.shared();
    let first = shared.latest();
    let snapshot = if interval.is_zero() {
        first
    } else {
        shared
            .wait_newer(first.sample.seq, interval * 10 + Duration::from_secs(10))
            .context("the agent took no second sample")?
    };
    agent.stop();
    Ok(snapshot)
}

/// The wall clock now, Unix nanoseconds: what `--at "10 min ago"` is resolved against.
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Writes text that carries what others chose (process names, a server's error text, label
/// values) to stdout with every control character but the line breaks shown as `?`, so no
/// escape sequence reaches the operator's terminal: the one sanitizer (`top` draws through the
/// same `printable`).
pub fn print_text(text: &str) {
    print!("{}", proctor_vocab::units::printable_lines(text));
}
