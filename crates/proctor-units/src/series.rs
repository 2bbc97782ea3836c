//! The series catalog: one row per time series proctor keeps, with the one name it has on every
//! surface. The in-memory history ring (`/api/v1/history`, the dashboard's charts), `report`'s
//! host series and plots, the rollup tiers, alert rules and the dashboard (through the
//! generated `vocabulary.js`) name a series by its row's [`Series::name`]; the names each of
//! them used before this catalog are the row's [`Series::aliases`], which every reader still
//! takes for one release (docs/api.md, "Renamed series"). Tests in the crates that own each
//! surface hold their lists equal to this one.
//!
//! A name is `SCOPE.FIELD`: the scope (`host`, `container`, `agent`) and, where the series is a
//! field of that scope's JSON shape, that field's name, so an alert can be written from what the
//! dashboard fetches. Per-device series (`host.cpu3.busy_percent`, `host.disk.sda.read_bytes_per_sec`)
//! put the device after the first part of the total's name and are not rows of their own.
//!
//! Pure data and lookups, in the ground floor so that the lower crates (the report's fold, the
//! agent's ring and rollups) can use it.

use crate::units::Unit;

/// Where a series lives besides its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    /// `SCOPE.FIELD`, the one name on every surface.
    pub name: &'static str,
    pub unit: Unit,
    /// What it measures, for people (docs, legends).
    pub meaning: &'static str,
    /// The history ring keeps it (one point per sample): `/api/v1/history`, the dashboard.
    pub live: bool,
    /// `report` folds it from stored samples and the rollup tiers keep it, as every series of
    /// a row is kept: the minimum, mean, maximum and last value of the samples in the row's
    /// minute (hour).
    pub stored: bool,
    /// It is a field of its scope's JSON shape under the same name (`FIELD` of `SCOPE.FIELD`).
    /// Alerts and `dump` take every series either way: a host series outside the shape is read
    /// from the model's host series (`proctor_vocab::fields::host_all`).
    pub field: bool,
    /// The Prometheus samples it is made from (`/metrics`); a counter's series is its rate.
    pub prometheus: &'static [&'static str],
    /// Earlier names, still answered for one release.
    pub aliases: &'static [&'static str],
}

macro_rules! row {
    ($name:literal, $unit:ident, $meaning:literal, live: $live:literal, stored: $stored:literal, field: $field:literal,
     prom: [$($prom:literal),*], aliases: [$($alias:literal),*]) => {
        Series {
            name: $name,
            unit: Unit::$unit,
            meaning: $meaning,
            live: $live,
            stored: $stored,
            field: $field,
            prometheus: &[$($prom),*],
            aliases: &[$($alias),*],
        }
    };
}

/// Every series, in the order surfaces list them.
pub const CATALOG: &[Series] = &[
    row!("host.cpu.busy_percent", Percent, "All CPUs' time that was neither idle nor iowait, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total"], aliases: ["host.cpu.busy", "cpu.busy"]),
    row!("host.cpu.user_percent", Percent, "User time, % of all CPUs (niced time is apart).",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"user\"}"], aliases: ["host.cpu.user", "cpu.user"]),
    row!("host.cpu.nice_percent", Percent, "Niced user time, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"nice\"}"], aliases: ["host.cpu.nice", "cpu.nice"]),
    row!("host.cpu.system_percent", Percent, "System time, % of all CPUs (interrupts are apart).",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"system\"}"], aliases: ["host.cpu.system", "cpu.system"]),
    row!("host.cpu.iowait_percent", Percent, "Idle time with I/O outstanding, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"iowait\"}"], aliases: ["host.cpu.iowait", "cpu.iowait"]),
    row!("host.cpu.irq_percent", Percent, "Hard interrupts, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"irq\"}"], aliases: ["host.cpu.irq", "cpu.irq"]),
    row!("host.cpu.softirq_percent", Percent, "Soft interrupts, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"softirq\"}"], aliases: []),
    row!("host.cpu.steal_percent", Percent, "Time the hypervisor ran something else, % of all CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_host_cpu_seconds_total{mode=\"steal\"}"], aliases: ["host.cpu.steal", "cpu.steal"]),
    row!("host.memory.used_bytes", Bytes, "Memory in use: total − available.",
        live: true, stored: true, field: true,
        prom: ["proctor_host_memory_total_bytes", "proctor_host_memory_available_bytes"], aliases: ["host.memory.used", "memory.used"]),
    row!("host.memory.available_bytes", Bytes, "MemAvailable: what can be allocated without swapping.",
        live: true, stored: true, field: true, prom: ["proctor_host_memory_available_bytes"], aliases: ["host.memory.available", "memory.available"]),
    row!("host.memory.cached_bytes", Bytes, "Page cache (Cached).",
        live: false, stored: true, field: false, prom: ["proctor_host_memory_cached_bytes"], aliases: ["host.memory.cached", "memory.cached"]),
    row!("host.memory.swap_used_bytes", Bytes, "Swap in use: total − free.",
        live: true, stored: true, field: true,
        prom: ["proctor_host_swap_total_bytes", "proctor_host_swap_free_bytes"], aliases: ["host.swap.used_bytes", "host.swap.used", "swap.used"]),
    row!("host.load.avg1", Number, "Load average over 1 minute.",
        live: true, stored: true, field: true, prom: ["proctor_host_load1"], aliases: ["host.load1"]),
    row!("host.context_switches_per_sec", PerSec, "Context switches per second.",
        live: true, stored: true, field: true, prom: ["proctor_host_context_switches_total"], aliases: []),
    row!("host.procs_running", Count, "Tasks runnable at the sample (procs_running of /proc/stat, vmstat's r).",
        live: true, stored: true, field: false, prom: ["proctor_host_procs_running"], aliases: []),
    row!("host.procs_blocked", Count, "Tasks blocked on I/O at the sample (procs_blocked of /proc/stat, vmstat's b).",
        live: true, stored: true, field: false, prom: ["proctor_host_procs_blocked"], aliases: []),
    row!("host.pressure_cpu.some.avg10", Percent, "Share of time some task waited for a CPU, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"cpu\",kind=\"some\"}"],
        aliases: ["host.pressure.cpu.some_avg10", "host.psi.cpu.some", "psi.cpu.some"]),
    row!("host.pressure_cpu.full.avg10", Percent, "Share of time all non-idle tasks waited for a CPU, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"cpu\",kind=\"full\"}"],
        aliases: ["host.psi.cpu.full", "psi.cpu.full"]),
    row!("host.pressure_memory.some.avg10", Percent, "Share of time some task waited for memory, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"memory\",kind=\"some\"}"],
        aliases: ["host.pressure.memory.some_avg10", "host.psi.memory.some", "psi.memory.some"]),
    row!("host.pressure_memory.full.avg10", Percent, "Share of time all non-idle tasks waited for memory, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"memory\",kind=\"full\"}"],
        aliases: ["host.pressure.memory.full_avg10", "host.psi.memory.full", "psi.memory.full"]),
    row!("host.pressure_io.some.avg10", Percent, "Share of time some task waited for I/O, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"io\",kind=\"some\"}"],
        aliases: ["host.pressure.io.some_avg10", "host.psi.io.some", "psi.io.some"]),
    row!("host.pressure_io.full.avg10", Percent, "Share of time all non-idle tasks waited for I/O, the kernel's 10 s average.",
        live: true, stored: true, field: true, prom: ["proctor_host_pressure_stalled_seconds_total{resource=\"io\",kind=\"full\"}"],
        aliases: ["host.pressure.io.full_avg10", "host.psi.io.full", "psi.io.full"]),
    row!("host.disk.read_bytes_per_sec", BytesPerSec, "Bytes read from whole disks per second.",
        live: true, stored: true, field: true, prom: ["proctor_host_disk_read_bytes_total"], aliases: ["host.disk.read", "disk.read"]),
    row!("host.disk.write_bytes_per_sec", BytesPerSec, "Bytes written to whole disks per second.",
        live: true, stored: true, field: true, prom: ["proctor_host_disk_written_bytes_total"], aliases: ["host.disk.write", "disk.write"]),
    row!("host.disk.busy_percent", Percent, "I/O time of the busiest whole disk, % of wall time.",
        live: false, stored: true, field: false, prom: ["proctor_host_disk_io_time_seconds_total"], aliases: ["host.disk.busy", "disk.busy"]),
    row!("host.disk.io_time_percent", Percent, "I/O time of all whole disks together, % of wall time.",
        live: false, stored: true, field: false, prom: ["proctor_host_disk_io_time_seconds_total"], aliases: ["host.disk.io_time", "disk.io_time"]),
    row!("host.net.rx_bytes_per_sec", BytesPerSec, "Bytes received per second, every interface but lo.",
        live: true, stored: true, field: true, prom: ["proctor_host_network_receive_bytes_total"], aliases: ["host.net.rx", "net.rx"]),
    row!("host.net.tx_bytes_per_sec", BytesPerSec, "Bytes sent per second, every interface but lo.",
        live: true, stored: true, field: true, prom: ["proctor_host_network_transmit_bytes_total"], aliases: ["host.net.tx", "net.tx"]),
    row!("host.processes", Count, "Processes on the host.",
        live: true, stored: false, field: true, prom: ["proctor_host_processes"], aliases: []),
    row!("container.memory_current_bytes", Bytes, "The watched cgroup's memory in use (memory.current, usage_in_bytes).",
        live: true, stored: true, field: true, prom: ["proctor_container_memory_usage_bytes"],
        aliases: ["container.memory.current_bytes", "container.memory"]),
    row!("container.memory_limit_bytes", Bytes, "The tightest memory limit over the cgroup and its ancestors.",
        live: true, stored: false, field: true, prom: ["proctor_container_memory_limit_bytes"], aliases: ["container.memory.limit_bytes"]),
    row!("container.cpu_used_cpus", Cpus, "The watched cgroup's CPU use, in CPUs.",
        live: true, stored: true, field: true, prom: ["proctor_container_cpu_usage_seconds_total"],
        aliases: ["container.cpu.used_cpus", "container.cpu"]),
    row!("container.effective_cpus", Cpus, "CPUs the cgroup may use: the least of online CPUs, affinity, cpuset and quota.",
        live: true, stored: false, field: true, prom: ["proctor_container_effective_cpus"], aliases: ["container.cpu.effective_cpus"]),
    row!("agent.cpu_seconds_total", Seconds, "CPU time of the whole agent process.",
        live: true, stored: false, field: true, prom: ["proctor_agent_cpu_seconds_total"], aliases: []),
    row!("agent.last_sample.cpu_seconds", Seconds, "CPU time of one sampling cycle.",
        live: true, stored: false, field: true, prom: ["proctor_agent_sampling_cpu_seconds_total"], aliases: ["agent.sample_cpu_seconds"]),
    row!("agent.resident_bytes", Bytes, "Resident memory of the agent.",
        live: true, stored: false, field: true, prom: ["proctor_agent_resident_bytes"], aliases: []),
];

/// The row named `name`, by its name or an alias.
pub fn find(name: &str) -> Option<&'static Series> {
    CATALOG.iter().find(|s| s.name == name).or_else(|| CATALOG.iter().find(|s| s.aliases.contains(&name)))
}

/// `name` as the catalog names it now: the row's name for an alias, `name` itself otherwise
/// (a series of no row, such as a per-device one, keeps its name).
pub fn canonical(name: &str) -> &str {
    find(name).map_or(name, |s| s.name)
}

/// The row of a series that may be kept by scope-less name (`cpu.user` in old reports):
/// `name` with `host.` in front, when that is a row's name.
pub fn find_host(name: &str) -> Option<&'static Series> {
    find(name).or_else(|| CATALOG.iter().find(|s| s.name.strip_prefix("host.") == Some(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_each_one_series() {
        let mut seen = std::collections::HashSet::new();
        for s in CATALOG {
            for n in std::iter::once(&s.name).chain(s.aliases) {
                assert!(seen.insert(*n), "{n} names two series");
            }
            let scope = s.name.split('.').next().unwrap_or_default();
            assert!(["host", "container", "agent"].contains(&scope), "{} has no scope", s.name);
            assert!(s.live || s.stored, "{} is on no surface", s.name);
            assert!(!s.prometheus.is_empty(), "{} names no Prometheus family", s.name);
        }
    }

    #[test]
    fn every_old_name_answers_as_the_new_one() {
        for (old, new) in [
            ("host.pressure.cpu.some_avg10", "host.pressure_cpu.some.avg10"),
            ("psi.cpu.some", "host.pressure_cpu.some.avg10"),
            ("host.psi.cpu.some", "host.pressure_cpu.some.avg10"),
            ("host.load1", "host.load.avg1"),
            ("host.swap.used_bytes", "host.memory.swap_used_bytes"),
            ("swap.used", "host.memory.swap_used_bytes"),
            ("container.memory.current_bytes", "container.memory_current_bytes"),
            ("container.memory", "container.memory_current_bytes"),
            ("host.cpu.busy_percent", "host.cpu.busy_percent"),
        ] {
            assert_eq!(canonical(old), new);
        }
        assert_eq!(canonical("host.disk.sda.read_bytes_per_sec"), "host.disk.sda.read_bytes_per_sec");
        assert_eq!(find_host("cpu.softirq_percent").map(|s| s.name), Some("host.cpu.softirq_percent"));
        assert!(find("host.nope").is_none());
    }
}
