//! `/metrics`: the Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper asks for
//! it, rendered from the latest snapshot.
//!
//! Names are `proctor_*` in base units (seconds, bytes). Per-process series are limited to the
//! top N by a configured rule, so label cardinality is bounded whatever runs on the host. Label
//! values — process names and command lines are chosen by whoever starts the process — are
//! escaped. This module builds families and renders text; it reads nothing itself.

use proctor_procfs::host::{CpuTicks, Pressure};

use proctor_agent::snapshot::{Snapshot, SAMPLE_DURATION_BUCKETS};
use proctor_vocab::fields::{PromFamily, RowCtx, GROUP_FIELDS, PROCESS_FIELDS};
use proctor_vocab::snapshot::HttpOut;
use proctor_vocab::units::Unit;

// The exposition types and the renderer are proctor-units' (`prom`), shared with statsd's
// families; re-exported here under the names the router and remote write use.
pub use proctor_units::prom::{
    escape_label, render, render_families, Family, Kind, Sample, EOF, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE,
};

/// Which per-process series `/metrics` exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRank {
    Cpu,
    Rss,
}

#[derive(Debug, Clone, Copy)]
pub struct MetricsConfig {
    /// How many processes get their own series (0: none).
    pub top: usize,
    pub rank: ProcessRank,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { top: 10, rank: ProcessRank::Cpu }
    }
}

/// Longest command line kept in a label, in bytes (cut at a character boundary).
const CMDLINE_LABEL_MAX: usize = 200;

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn cpu_ticks_samples(f: &mut Family, cpu: &str, t: &CpuTicks, ticks: f64) {
    let modes: [(&str, u64); 8] = [
        ("user", t.user),
        ("nice", t.nice),
        ("system", t.system),
        ("idle", t.idle),
        ("iowait", t.iowait),
        ("irq", t.irq),
        ("softirq", t.softirq),
        ("steal", t.steal),
    ];
    for (mode, v) in modes {
        f.push(vec![("cpu", cpu.to_string()), ("mode", mode.to_string())], v as f64 / ticks);
    }
}

fn pressure_samples(f: &mut Family, resource: &str, p: Option<Pressure>) {
    let Some(p) = p else { return };
    for (kind, line) in [("some", p.some), ("full", p.full)] {
        if let Some(line) = line {
            f.push(vec![("resource", resource.to_string()), ("kind", kind.to_string())], line.total_usec as f64 / 1e6);
        }
    }
}

fn gauge(name: &str, help: &'static str, value: Option<f64>) -> Family {
    Family::new(name, Kind::Gauge, help).with(value)
}

fn counter(name: &str, help: &'static str, value: Option<f64>) -> Family {
    Family::new(name, Kind::Counter, help).with(value)
}

fn opt(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// Every family for one snapshot: host, container, the top processes and the agent itself.
pub fn families(s: &Snapshot, config: &MetricsConfig, http: &HttpOut) -> Vec<Family> {
    families_of(s, config, s.groups.as_deref(), http)
}

/// [`families`] with the groups given apart from the snapshot's (remote write sends the groups
/// as stored with each sample, whichever way the sample came).
pub fn families_of(
    s: &Snapshot,
    config: &MetricsConfig,
    groups: Option<&proctor_agent::groups::GroupsView>,
    http: &HttpOut,
) -> Vec<Family> {
    let mut out = Vec::with_capacity(64);
    let h = &s.sample.host;
    let ticks = s.sample.clock_ticks_per_sec.max(1) as f64;

    let mut cpu = Family::new("proctor_host_cpu_seconds", Kind::Counter, "CPU time spent by each CPU in each mode.");
    if let Some(stat) = h.stat.as_ref() {
        for (id, t) in stat.cpu_ids.iter().zip(&stat.per_cpu) {
            cpu_ticks_samples(&mut cpu, &id.to_string(), t, ticks);
        }
    }
    out.push(cpu);
    out.push(gauge(
        "proctor_host_cpus_online",
        "CPUs online on the host.",
        h.online_cpus.as_ref().map(|c| c.len() as f64),
    ));
    let stat = h.stat.as_ref();
    out.push(counter(
        "proctor_host_context_switches",
        "Context switches since boot.",
        opt(stat.and_then(|s| s.context_switches)),
    ));
    out.push(counter(
        "proctor_host_forks",
        "Processes and threads created since boot.",
        opt(stat.and_then(|s| s.forks)),
    ));
    out.push(gauge("proctor_host_procs_running", "Runnable tasks.", opt(stat.and_then(|s| s.procs_running))));
    out.push(gauge("proctor_host_procs_blocked", "Tasks blocked on I/O.", opt(stat.and_then(|s| s.procs_blocked))));
    out.push(gauge(
        "proctor_host_boot_time_seconds",
        "Boot time, Unix seconds.",
        opt(stat.and_then(|s| s.boot_time_secs)),
    ));

    let m = h.meminfo;
    let mem = |f: fn(&proctor_procfs::host::MemInfo) -> Option<u64>| opt(m.as_ref().and_then(f));
    out.push(gauge("proctor_host_memory_total_bytes", "MemTotal.", mem(|m| m.total_bytes)));
    out.push(gauge(
        "proctor_host_memory_available_bytes",
        "MemAvailable: what can be had without swapping.",
        mem(|m| m.available_bytes),
    ));
    out.push(gauge("proctor_host_memory_free_bytes", "MemFree.", mem(|m| m.free_bytes)));
    out.push(gauge("proctor_host_memory_cached_bytes", "Cached (page cache).", mem(|m| m.cached_bytes)));
    out.push(gauge("proctor_host_memory_buffers_bytes", "Buffers.", mem(|m| m.buffers_bytes)));
    out.push(gauge("proctor_host_memory_shmem_bytes", "Shmem.", mem(|m| m.shmem_bytes)));
    out.push(gauge("proctor_host_swap_total_bytes", "SwapTotal.", mem(|m| m.swap_total_bytes)));
    out.push(gauge("proctor_host_swap_free_bytes", "SwapFree.", mem(|m| m.swap_free_bytes)));
    let load = h.loadavg;
    out.push(gauge("proctor_host_load1", "Load average over 1 minute.", load.map(|l| l.one)));
    out.push(gauge("proctor_host_load5", "Load average over 5 minutes.", load.map(|l| l.five)));
    out.push(gauge("proctor_host_load15", "Load average over 15 minutes.", load.map(|l| l.fifteen)));
    let mut psi = Family::new(
        "proctor_host_pressure_stalled_seconds",
        Kind::Counter,
        "PSI: time some or all tasks were stalled on a resource.",
    );
    pressure_samples(&mut psi, "cpu", h.pressure_cpu);
    pressure_samples(&mut psi, "memory", h.pressure_memory);
    pressure_samples(&mut psi, "io", h.pressure_io);
    out.push(psi);
    let vm = h.vmstat;
    out.push(counter("proctor_host_page_faults", "Page faults since boot.", opt(vm.and_then(|v| v.pgfault))));
    out.push(counter(
        "proctor_host_major_page_faults",
        "Major page faults since boot.",
        opt(vm.and_then(|v| v.pgmajfault)),
    ));
    out.push(counter(
        "proctor_host_swapped_in_pages",
        "Pages swapped in since boot.",
        opt(vm.and_then(|v| v.pswpin_pages)),
    ));
    out.push(counter(
        "proctor_host_swapped_out_pages",
        "Pages swapped out since boot.",
        opt(vm.and_then(|v| v.pswpout_pages)),
    ));
    out.push(counter("proctor_host_oom_kills", "OOM kills since boot.", opt(vm.and_then(|v| v.oom_kill))));

    let mut read = Family::new("proctor_host_disk_read_bytes", Kind::Counter, "Bytes read from each block device.");
    let mut written =
        Family::new("proctor_host_disk_written_bytes", Kind::Counter, "Bytes written to each block device.");
    let mut reads =
        Family::new("proctor_host_disk_reads_completed", Kind::Counter, "Reads completed by each block device.");
    let mut writes =
        Family::new("proctor_host_disk_writes_completed", Kind::Counter, "Writes completed by each block device.");
    let mut busy =
        Family::new("proctor_host_disk_io_time_seconds", Kind::Counter, "Time each block device had I/O in flight.");
    for d in h.disks.iter().filter(|d| proctor_model::is_interesting_disk(&d.name)) {
        let l = || vec![("device", d.name.to_string())];
        read.push(l(), d.read_sectors as f64 * 512.0);
        written.push(l(), d.write_sectors as f64 * 512.0);
        reads.push(l(), d.reads as f64);
        writes.push(l(), d.writes as f64);
        busy.push(l(), d.io_ms as f64 / 1e3);
    }
    out.extend([read, written, reads, writes, busy]);
    let mut rx =
        Family::new("proctor_host_network_receive_bytes", Kind::Counter, "Bytes received by each network device.");
    let mut tx =
        Family::new("proctor_host_network_transmit_bytes", Kind::Counter, "Bytes sent by each network device.");
    let mut rxp =
        Family::new("proctor_host_network_receive_packets", Kind::Counter, "Packets received by each network device.");
    let mut txp =
        Family::new("proctor_host_network_transmit_packets", Kind::Counter, "Packets sent by each network device.");
    let mut rxd = Family::new(
        "proctor_host_network_receive_drop",
        Kind::Counter,
        "Received packets dropped by each network device.",
    );
    let mut txd = Family::new(
        "proctor_host_network_transmit_drop",
        Kind::Counter,
        "Outgoing packets dropped by each network device.",
    );
    for n in &h.nets {
        let l = || vec![("device", n.name.to_string())];
        rx.push(l(), n.rx_bytes as f64);
        tx.push(l(), n.tx_bytes as f64);
        rxp.push(l(), n.rx_packets as f64);
        txp.push(l(), n.tx_packets as f64);
        rxd.push(l(), n.rx_dropped as f64);
        txd.push(l(), n.tx_dropped as f64);
    }
    out.extend([rx, tx, rxp, txp, rxd, txd]);
    if let Some(n) = h.net {
        // With --net: every device's IP traffic as the network programs counted it, split by
        // whether a process's socket owned it, so sum() over `owner` is the devices' traffic
        // and the process series add up to the `process` part.
        let split = |name: &str, help: &'static str, all: u64, unowned: u64| {
            let mut f = Family::new(name, Kind::Counter, help);
            f.push(vec![("owner", "process".to_string())], all.saturating_sub(unowned) as f64);
            f.push(vec![("owner", "none".to_string())], unowned as f64);
            f
        };
        out.push(split(
            "proctor_host_ip_receive_bytes",
            "IP bytes every device received (lo included), by whether a process's socket took them (--net).",
            n.rx_bytes,
            n.rx_unowned_bytes,
        ));
        out.push(split(
            "proctor_host_ip_transmit_bytes",
            "IP bytes every device sent (lo included), by whether a process's socket made them (--net).",
            n.tx_bytes,
            n.tx_unowned_bytes,
        ));
        out.push(split(
            "proctor_host_ip_receive_packets",
            "IP packets every device received (lo included), by whether a process's socket took them (--net).",
            n.rx_packets,
            n.rx_unowned_packets,
        ));
        out.push(split(
            "proctor_host_ip_transmit_packets",
            "IP packets every device sent (lo included), by whether a process's socket made them (--net).",
            n.tx_packets,
            n.tx_unowned_packets,
        ));
        out.push(counter(
            "proctor_agent_net_table_full",
            "Processes the kernel's network table had no room for (their packets counted as owner=\"none\").",
            Some(n.table_full as f64),
        ));
    }
    out.push(gauge("proctor_host_processes", "Processes on the host.", Some(s.rows.len() as f64)));
    out.push(gauge(
        "proctor_host_threads",
        "Threads on the host.",
        Some(s.rows.iter().map(|r| r.threads).sum::<u64>() as f64),
    ));

    power_and_gpu_families(s, &mut out);
    container_families(s, &mut out);
    process_families(s, config, &mut out);
    group_families(groups, &mut out);
    agent_families(s, http, &mut out);
    out
}

/// Energy counters and watts per domain, and GPUs; only the families that have samples (a host
/// without RAPL, hwmon or a GPU shows none of them). Bounded: at most
/// `proctor_procfs::power::MAX_SOURCES` domains, one series per GPU and per engine of each.
fn power_and_gpu_families(s: &Snapshot, out: &mut Vec<Family>) {
    use proctor_procfs::power::Unit;
    let mut energy = Family::new(
        "proctor_host_energy_joules",
        Kind::Counter,
        "Energy counted by each domain's counter (RAPL zones wrap to 0 past their range: a reset).",
    );
    for p in s.sample.host.power.iter().filter(|p| p.unit == Unit::EnergyMicrojoules) {
        energy.push(vec![("domain", p.domain.to_string())], p.value as f64 / 1e6);
    }
    let mut watts =
        Family::new("proctor_host_power_watts", Kind::Gauge, "Power of each domain over the last interval.");
    for p in &s.host.power {
        if let Some(w) = p.watts {
            watts.push(vec![("domain", p.domain.to_string())], w);
        }
    }
    let total = gauge(
        "proctor_host_power_host_watts",
        "The host's power over the last interval (psys, else packages and DRAM; plus NVIDIA boards).",
        s.host.power_host_watts,
    );
    let mut busy = Family::new("proctor_gpu_busy_ratio", Kind::Gauge, "Each GPU's busy share over the last interval.");
    let mut engine =
        Family::new("proctor_gpu_engine_busy_ratio", Kind::Gauge, "Each DRM engine's busy share, summed over clients.");
    let mut used = Family::new("proctor_gpu_memory_used_bytes", Kind::Gauge, "GPU memory in use.");
    let mut total_mem = Family::new("proctor_gpu_memory_total_bytes", Kind::Gauge, "GPU memory installed (NVML).");
    let mut power = Family::new("proctor_gpu_power_watts", Kind::Gauge, "Board power (NVML).");
    let mut temp = Family::new("proctor_gpu_temperature_celsius", Kind::Gauge, "GPU temperature (NVML).");
    let mut sm = Family::new("proctor_gpu_sm_clock_hertz", Kind::Gauge, "SM clock (NVML).");
    let mut mem_clock = Family::new("proctor_gpu_memory_clock_hertz", Kind::Gauge, "Memory clock (NVML).");
    let mut clients = Family::new("proctor_gpu_clients", Kind::Gauge, "DRM clients (each once) or NVML processes.");
    for g in &s.host.gpus {
        let l = || vec![("gpu", g.id.clone()), ("name", g.name.clone())];
        let put = |f: &mut Family, v: Option<f64>| {
            if let Some(v) = v {
                f.push(l(), v);
            }
        };
        put(&mut busy, g.busy_percent.map(|p| p / 100.0));
        put(&mut used, opt(g.memory_used_bytes));
        put(&mut total_mem, opt(g.memory_total_bytes));
        put(&mut power, g.power_watts);
        put(&mut temp, g.temperature_celsius.map(f64::from));
        put(&mut sm, g.sm_clock_mhz.map(|m| f64::from(m) * 1e6));
        put(&mut mem_clock, g.memory_clock_mhz.map(|m| f64::from(m) * 1e6));
        put(&mut clients, Some(g.clients as f64));
        for e in &g.engines {
            engine.push(vec![("gpu", g.id.clone()), ("engine", e.name.clone())], e.busy_percent / 100.0);
        }
    }
    let families = [energy, watts, total, busy, engine, used, total_mem, power, temp, sm, mem_clock, clients];
    out.extend(families.into_iter().filter(|f| !f.samples.is_empty()));
}

/// Per-group series, when the agent keeps groups: one set per published group (the agent caps
/// them, `--max-groups`) and how many it left out.
type Labels = Vec<(&'static str, String)>;

/// A field's family (when the field table names one): a sample per labelled row with a value.
fn field_family<'a>(
    prom: Option<PromFamily>,
    unit: Unit,
    values: impl Iterator<Item = (&'a Labels, Option<f64>)>,
    out: &mut Vec<Family>,
) {
    let Some(p) = prom else { return };
    let mut family = Family::new(p.name, p.kind, p.help);
    for (labels, v) in values {
        if let Some(v) = v {
            family.push(labels.clone(), v * unit.prometheus_scale());
        }
    }
    if !(p.omit_empty && family.samples.is_empty()) {
        out.push(family);
    }
}

fn group_families(groups: Option<&proctor_agent::groups::GroupsView>, out: &mut Vec<Family>) {
    let Some(g) = groups else { return };
    let labels: Vec<_> =
        g.groups.iter().map(|(row, _)| vec![("group", row.name.clone()), ("by", g.by.to_string())]).collect();
    // The counter is the agent's (it only grows while the agent watches); the rest are the
    // fields of the group table that name a family, in its order.
    let mut cpu = Family::new(
        "proctor_group_cpu_seconds",
        Kind::Counter,
        "CPU time of each group while the agent watched it, members' reaped children included.",
    );
    for ((_, counter), labels) in g.groups.iter().zip(&labels) {
        cpu.push(labels.clone(), *counter);
    }
    out.push(cpu);
    let mut exited = Family::new(
        "proctor_group_processes_exited",
        Kind::Counter,
        "Members of each group that ended while the agent watched (with BPF process events, those that lived between two samples too).",
    );
    for ((row, _), labels) in g.groups.iter().zip(&labels) {
        exited.push(labels.clone(), g.exited_total.get(&row.name).copied().unwrap_or(0) as f64);
    }
    out.push(exited);
    for f in GROUP_FIELDS {
        let values = g.groups.iter().map(|(row, _)| (f.read)(row).num());
        field_family(f.prom, f.field.unit, labels.iter().zip(values), out);
    }
    let mut overflow = Family::new(
        "proctor_group_overflow",
        Kind::Gauge,
        "Groups left out of these series by the agent's cap (--max-groups).",
    );
    overflow.push(Vec::new(), g.overflow as f64);
    out.push(overflow);
}

fn container_families(s: &Snapshot, out: &mut Vec<Family>) {
    let t = &s.truth;
    let mut info =
        Family::new("proctor_container_info", Kind::Gauge, "The watched cgroup: version and path (always 1).");
    if let (Some(version), Some(path)) = (t.cgroup_version, t.cgroup_path.as_ref()) {
        info.push(vec![("version", version.to_string()), ("cgroup", path.clone())], 1.0);
    }
    out.push(info);
    out.push(gauge(
        "proctor_container_effective_cpus",
        "CPUs the watched process can use: min(affinity, cgroup quota over every level).",
        t.effective_cpus,
    ));
    out.push(gauge(
        "proctor_container_host_cpus",
        "CPUs online on the host, what os.cpu_count() reports.",
        t.host_online_cpus.map(|n| n as f64),
    ));
    out.push(gauge(
        "proctor_container_quota_cpus",
        "The tightest CPU quota over the cgroup and its ancestors.",
        t.quota_cpus,
    ));
    out.push(gauge(
        "proctor_container_memory_limit_bytes",
        "The smallest memory limit on the cgroup path, else the host's memory.",
        opt(t.memory_limit_bytes),
    ));
    out.push(gauge(
        "proctor_container_memory_usage_bytes",
        "Memory charged to the cgroup.",
        opt(t.memory_current_bytes),
    ));
    let c = s.sample.container.as_ref().map(|c| &c.counters);
    out.push(counter(
        "proctor_container_cpu_usage_seconds",
        "CPU time charged to the cgroup.",
        c.and_then(|c| c.cpu_usage_usec).map(|u| u as f64 / 1e6),
    ));
    out.push(counter(
        "proctor_container_cpu_throttled_periods",
        "Periods in which the cgroup was throttled.",
        opt(c.and_then(|c| c.cpu_nr_throttled)),
    ));
    out.push(counter(
        "proctor_container_cpu_throttled_seconds",
        "Time the cgroup was throttled.",
        c.and_then(|c| c.cpu_throttled_usec).map(|u| u as f64 / 1e6),
    ));
    out.push(gauge("proctor_container_pids", "Tasks in the cgroup.", opt(c.and_then(|c| c.pids_current))));
}

fn process_families(s: &Snapshot, config: &MetricsConfig, out: &mut Vec<Family>) {
    let mut ranked: Vec<&proctor_model::ProcessRow> = s.rows.iter().collect();
    let key = |r: &proctor_model::ProcessRow| match config.rank {
        ProcessRank::Cpu => r.cpu_ticks_total as f64,
        ProcessRank::Rss => r.rss_bytes.unwrap_or(0) as f64,
    };
    // CPU is ranked by the last interval's use, falling back to lifetime CPU before rates exist.
    ranked.sort_by(|a, b| {
        let (ka, kb) = match config.rank {
            ProcessRank::Cpu => (a.cpu_percent.unwrap_or(0.0), b.cpu_percent.unwrap_or(0.0)),
            ProcessRank::Rss => (key(a), key(b)),
        };
        kb.total_cmp(&ka).then_with(|| key(b).total_cmp(&key(a))).then(a.pid.cmp(&b.pid))
    });
    ranked.truncate(config.top);
    ranked.sort_by_key(|r| r.pid);
    let ctx = RowCtx::of(s);
    let labels: Vec<_> = ranked
        .iter()
        .map(|r| {
            let cmdline = r.cmdline.as_ref().map(|c| c.join(" ")).unwrap_or_default();
            vec![
                ("pid", r.pid.to_string()),
                ("name", r.comm.to_string()),
                ("cmdline", cut(&cmdline, CMDLINE_LABEL_MAX).to_string()),
            ]
        })
        .collect();
    // One family per field of the table that names one, in the table's order.
    for f in PROCESS_FIELDS {
        let values = ranked.iter().map(|r| (f.row)(&ctx, r).num());
        field_family(f.prom, f.field.unit, labels.iter().zip(values), out);
    }
}

/// The agent's own families alone (`proctor_agent_*`), for remote write's live samples.
pub fn agent_families_of(s: &Snapshot, http: &HttpOut) -> Vec<Family> {
    let mut out = Vec::with_capacity(40);
    agent_families(s, http, &mut out);
    out
}

fn agent_families(s: &Snapshot, http: &HttpOut, out: &mut Vec<Family>) {
    let a = &s.agent;
    let mut build = Family::new("proctor_agent_build_info", Kind::Gauge, "The agent's version (always 1).");
    build.push(vec![("version", env!("CARGO_PKG_VERSION").to_string())], 1.0);
    out.push(build);
    let mut hist =
        Family::new("proctor_agent_sample_duration_seconds", Kind::Histogram, "Wall time of each sampling cycle.");
    let mut cumulative = 0u64;
    for (i, bound) in SAMPLE_DURATION_BUCKETS.iter().enumerate() {
        cumulative += a.duration_counts[i];
        hist.samples.push(Sample {
            suffix: "_bucket",
            labels: vec![("le", format!("{bound}"))],
            value: cumulative as f64,
        });
    }
    cumulative += a.duration_counts[SAMPLE_DURATION_BUCKETS.len()];
    hist.samples.push(Sample { suffix: "_bucket", labels: vec![("le", "+Inf".to_string())], value: cumulative as f64 });
    hist.samples.push(Sample { suffix: "_sum", labels: Vec::new(), value: a.duration_sum_seconds });
    hist.samples.push(Sample { suffix: "_count", labels: Vec::new(), value: cumulative as f64 });
    out.push(hist);
    out.push(counter("proctor_agent_cpu_seconds", "CPU time of the whole agent process.", Some(a.process_cpu_seconds)));
    out.push(counter(
        "proctor_agent_sampling_cpu_seconds",
        "CPU time of the sampling thread, summed over cycles.",
        Some(a.sampling_cpu_seconds),
    ));
    out.push(gauge("proctor_agent_resident_bytes", "Resident memory of the agent.", Some(a.resident_bytes as f64)));
    out.push(counter("proctor_agent_samples", "Sampling cycles completed.", Some(a.samples as f64)));
    out.push(gauge(
        "proctor_agent_last_sample_timestamp_seconds",
        "When the sample behind this scrape was taken, Unix seconds (stale means the sampler stopped).",
        Some(s.sample.unix_ns as f64 / 1e9),
    ));
    out.push(counter(
        "proctor_agent_missed_ticks",
        "Sampling ticks skipped because a cycle overran.",
        Some(a.missed_ticks as f64),
    ));
    let mut errors = Family::new(
        "proctor_agent_read_errors",
        Kind::Counter,
        "Failed reads by reader and reason (gone, permission, parse, io).",
    );
    for ((reader, reason), n) in &a.errors {
        errors.push(vec![("reader", reader.to_string()), ("reason", reason.to_string())], *n as f64);
    }
    out.push(errors);
    out.push(counter(
        "proctor_agent_processes_gone",
        "Processes that exited between listing and reading.",
        Some(a.processes_gone as f64),
    ));
    let t = &a.starts;
    out.push(counter(
        "proctor_agent_kernel_forks",
        "Tasks the kernel created since the agent's second sample (/proc/stat processes: threads included).",
        Some(t.forks as f64),
    ));
    let mut seen = Family::new(
        "proctor_agent_processes_started_seen",
        Kind::Counter,
        "Processes started that proctor saw: listed by a sample (how=listed), or ended between two samples and told by the BPF process events (how=exited_unseen).",
    );
    seen.push(vec![("how", "listed".to_string())], t.processes_new as f64);
    if a.events_used {
        seen.push(vec![("how", "exited_unseen".to_string())], t.exited_unseen as f64);
        out.push(seen);
        out.push(counter(
            "proctor_agent_process_forks",
            "Processes (not threads) the kernel's fork tracepoint counted, from the BPF process events.",
            Some(t.process_forks as f64),
        ));
        out.push(counter(
            "proctor_agent_process_events_lost",
            "Exec and exit events lost: the kernel's ring or proctor's queue was full.",
            Some(t.lost as f64),
        ));
        let mut waits = Family::new(
            "proctor_agent_process_event_drain_waits",
            Kind::Counter,
            "Drains of the event ring that found a record written before them still being written on another CPU and waited for it: until it was done (outcome=settled), or up to the bound, the record then coming a drain later (outcome=unsettled).",
        );
        waits.push(vec![("outcome", "settled".to_string())], t.drain_waits.saturating_sub(t.drain_unsettled) as f64);
        waits.push(vec![("outcome", "unsettled".to_string())], t.drain_unsettled as f64);
        out.push(waits);
    } else {
        out.push(seen);
    }
    out.push(gauge(
        "proctor_agent_start_coverage_ratio",
        "Processes started that proctor saw, over those the kernel started, since the agent's second sample: exact with the BPF process events, else a lower bound.",
        t.coverage(a.events_used).map(|(c, _)| c),
    ));
    out.push(gauge("proctor_agent_history_bytes", "Memory held by the history ring.", Some(a.history.bytes as f64)));
    out.push(gauge(
        "proctor_agent_history_max_bytes",
        "Memory the history ring holds when full.",
        Some(a.history.max_bytes as f64),
    ));
    if let Some(p) = a.pss.as_ref() {
        out.push(counter(
            "proctor_agent_pss_reads",
            "PSS reads by the budgeted worker (smaps_rollup, or pagemap for big targets).",
            Some(p.reads as f64),
        ));
        out.push(counter("proctor_agent_pss_cpu_seconds", "CPU spent reading PSS.", Some(p.cpu_ns as f64 / 1e9)));
        out.push(counter(
            "proctor_agent_pss_estimates_checked",
            "Clones' PSS readings that stood in for a process's own, checked against its own when it was read.",
            Some(p.estimates_checked as f64),
        ));
        out.push(counter(
            "proctor_agent_pss_estimates_off",
            "Of those, the ones more than 1 % off the process's own (their family gets no more stand-ins).",
            Some(p.estimates_off as f64),
        ));
    }
    if let Some(c) = a.cmdline.as_ref() {
        out.push(counter("proctor_agent_cmdline_reads", "cmdline reads by the worker.", Some(c.reads as f64)));
        out.push(counter(
            "proctor_agent_cmdline_timeouts",
            "cmdline reads that overran the timeout.",
            Some(c.timeouts as f64),
        ));
    }
    // The stall ledger, by the read that took a target's mmap lock.
    let ledger = [
        ("smaps_rollup", a.pss.as_ref().map(|p| p.lock)),
        ("pagemap", a.pss.as_ref().filter(|p| p.pagemap).map(|p| p.pagemap_lock)),
        ("cmdline", a.cmdline.as_ref().map(|c| c.lock)),
    ];
    let mut held = Family::new(
        "proctor_agent_target_lock_seconds",
        Kind::Counter,
        "Wall time of proctor's reads that took a target's mmap lock, by read (an upper bound on the hold).",
    );
    let mut longest = Family::new(
        "proctor_agent_target_lock_max_seconds",
        Kind::Gauge,
        "The longest single hold of a target's mmap lock by a proctor read, by read (a pagemap read takes it once per 2 MiB walked).",
    );
    let mut any = false;
    for (read, totals) in ledger {
        if let Some(totals) = totals {
            held.push(vec![("read", read.to_string())], totals.lock_ns as f64 / 1e9);
            longest.push(vec![("read", read.to_string())], totals.max_lock_ns as f64 / 1e9);
            any = true;
        }
    }
    if any {
        out.extend([held, longest]);
    }
    if let Some(p) = a.pss.as_ref().filter(|p| p.waits_traced) {
        out.push(counter(
            "proctor_agent_target_waited_seconds",
            "How long targets' own threads waited for their mmap lock while a proctor PSS read held it (mmap_lock tracepoints).",
            Some(p.target_waited_ns as f64 / 1e9),
        ));
    }
    out.push(counter("proctor_agent_http_requests", "HTTP requests answered.", Some(http.requests_total as f64)));
    out.push(gauge(
        "proctor_agent_http_connections_open",
        "HTTP connections open.",
        Some(http.connections_open as f64),
    ));
    out.push(counter(
        "proctor_agent_http_connections_refused",
        "HTTP connections refused at the cap because every open one was busy.",
        Some(http.connections_refused_total as f64),
    ));
    out.push(counter(
        "proctor_agent_http_connections_evicted",
        "Quiet HTTP connections closed at the cap to make room for a new one.",
        Some(http.connections_evicted_total as f64),
    ));
    out.push(counter(
        "proctor_agent_http_foreign_host_refused",
        "HTTP requests refused for a Host or Origin that is not this agent's.",
        Some(http.foreign_host_refused_total as f64),
    ));
    out.push(counter(
        "proctor_agent_http_heap_trims",
        "Times free heap went back to the kernel after a burst of HTTP connections ended.",
        Some(http.heap_trims_total as f64),
    ));
    let r = &a.recording;
    let flag = |b: bool| Some(if b { 1.0 } else { 0.0 });
    out.push(gauge(
        "proctor_agent_record_enabled",
        "1 while samples are written to the data directory.",
        flag(r.enabled),
    ));
    out.push(gauge(
        "proctor_agent_record_error",
        "1 when recording was asked for but the store could not be opened (the reason is in /api/v1/agent).",
        flag(r.error.is_some()),
    ));
    out.push(counter("proctor_agent_record_frames", "Samples written to the store.", Some(r.stats.written as f64)));
    out.push(counter(
        "proctor_agent_record_bytes",
        "Bytes the store's files grew by (frame headers and compressed samples).",
        Some(r.stats.frame_bytes as f64),
    ));
    out.push(counter(
        "proctor_agent_record_dropped",
        "Samples not recorded because the recorder's queue was full.",
        Some(r.stats.dropped as f64),
    ));
    out.push(counter(
        "proctor_agent_record_write_errors",
        "Failed writes to the store.",
        Some(r.stats.write_errors as f64),
    ));
    out.push(counter(
        "proctor_agent_record_cpu_seconds",
        "CPU time of the recorder thread (encode, compress, write).",
        Some(r.stats.cpu_ns as f64 / 1e9),
    ));
}
