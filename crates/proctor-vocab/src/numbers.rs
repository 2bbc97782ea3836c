//! The numbers of the host, container and agent shapes ([`crate::snapshot::host`],
//! [`crate::snapshot::container`], [`crate::snapshot::agent`]) read straight off a snapshot by
//! their dotted names in the shape, without building the shape: what alert rules read every
//! sample. Building three shapes and walking their `Serialize` to pick a few numbers was most of
//! an evaluation whose caches had gone cold between samples.
//!
//! A reader gives what the shape's field holds, as a JSON reader of the shape would see it: an
//! integer as a float, a float that is not finite as no value (serde_json writes it `null`).
//! The shapes stay the one definition: every reader is held equal to the shape's serialization
//! by this module's tests, and a name without a reader here (one that reads the clock,
//! `agent.last_sample_age_secs`) is for the caller to read off the shape.

use proctor_agent::Snapshot;
use proctor_procfs::host::{Pressure, PressureLine};

/// Reads one number of a shape off the snapshot.
pub type NumberRead = fn(&Snapshot) -> Option<f64>;

/// A number as the shape's JSON holds it.
trait Json {
    fn json(self) -> Option<f64>;
}

impl Json for f64 {
    fn json(self) -> Option<f64> {
        self.is_finite().then_some(self)
    }
}

macro_rules! json_int {
    ($($t:ty),*) => {$(
        impl Json for $t {
            fn json(self) -> Option<f64> {
                Some(self as f64)
            }
        }
    )*};
}
json_int!(u32, u64, usize);

impl<T: Json> Json for Option<T> {
    fn json(self) -> Option<f64> {
        self.and_then(Json::json)
    }
}

fn json(v: impl Json) -> Option<f64> {
    v.json()
}

/// A pressure file's number: `LINE` 0 is `some`, 1 `full`; `FIELD` 0..=3 is `avg10`, `avg60`,
/// `avg300`, `total_seconds`.
fn pressure<const LINE: u8, const FIELD: u8>(p: Option<Pressure>) -> Option<f64> {
    let p = p?;
    let line: PressureLine = if LINE == 0 { p.some? } else { p.full? };
    match FIELD {
        0 => json(line.avg10),
        1 => json(line.avg60),
        2 => json(line.avg300),
        _ => json(line.total_usec as f64 / 1e6),
    }
}

fn host_pressure<const FILE: u8, const LINE: u8, const FIELD: u8>(s: &Snapshot) -> Option<f64> {
    let h = &s.host;
    pressure::<LINE, FIELD>(match FILE {
        0 => h.pressure_cpu,
        1 => h.pressure_memory,
        _ => h.pressure_io,
    })
}

fn container_pressure<const FILE: u8, const LINE: u8, const FIELD: u8>(s: &Snapshot) -> Option<f64> {
    let c = &s.sample.container.as_ref()?.counters;
    pressure::<LINE, FIELD>(match FILE {
        0 => c.cpu_pressure,
        1 => c.memory_pressure,
        _ => c.io_pressure,
    })
}

/// `pressure_{cpu,memory,io}.{some,full}.{avg10,avg60,avg300,total_seconds}`, for a reader
/// generic over which.
macro_rules! pressure_names {
    ($name:expr, $read:ident) => {{
        let (file, rest) = match $name.split_once('.') {
            Some(("pressure_cpu", rest)) => (0u8, rest),
            Some(("pressure_memory", rest)) => (1, rest),
            Some(("pressure_io", rest)) => (2, rest),
            _ => return None,
        };
        let read: NumberRead = match (file, rest) {
            (0, "some.avg10") => $read::<0, 0, 0>,
            (0, "some.avg60") => $read::<0, 0, 1>,
            (0, "some.avg300") => $read::<0, 0, 2>,
            (0, "some.total_seconds") => $read::<0, 0, 3>,
            (0, "full.avg10") => $read::<0, 1, 0>,
            (0, "full.avg60") => $read::<0, 1, 1>,
            (0, "full.avg300") => $read::<0, 1, 2>,
            (0, "full.total_seconds") => $read::<0, 1, 3>,
            (1, "some.avg10") => $read::<1, 0, 0>,
            (1, "some.avg60") => $read::<1, 0, 1>,
            (1, "some.avg300") => $read::<1, 0, 2>,
            (1, "some.total_seconds") => $read::<1, 0, 3>,
            (1, "full.avg10") => $read::<1, 1, 0>,
            (1, "full.avg60") => $read::<1, 1, 1>,
            (1, "full.avg300") => $read::<1, 1, 2>,
            (1, "full.total_seconds") => $read::<1, 1, 3>,
            (2, "some.avg10") => $read::<2, 0, 0>,
            (2, "some.avg60") => $read::<2, 0, 1>,
            (2, "some.avg300") => $read::<2, 0, 2>,
            (2, "some.total_seconds") => $read::<2, 0, 3>,
            (2, "full.avg10") => $read::<2, 1, 0>,
            (2, "full.avg60") => $read::<2, 1, 1>,
            (2, "full.avg300") => $read::<2, 1, 2>,
            (2, "full.total_seconds") => $read::<2, 1, 3>,
            _ => return None,
        };
        Some(read)
    }};
}

/// The host shape's number at `name` (`cpu.busy_percent`, `memory.used_bytes`, …).
pub fn host(name: &str) -> Option<NumberRead> {
    let read: NumberRead = match name {
        "online_cpus" => |s| json(s.host.online_cpus),
        "cpu.user_percent" => |s| json(s.host.cpu.map(|c| c.user)),
        "cpu.nice_percent" => |s| json(s.host.cpu.map(|c| c.nice)),
        "cpu.system_percent" => |s| json(s.host.cpu.map(|c| c.system)),
        "cpu.idle_percent" => |s| json(s.host.cpu.map(|c| c.idle)),
        "cpu.iowait_percent" => |s| json(s.host.cpu.map(|c| c.iowait)),
        "cpu.irq_percent" => |s| json(s.host.cpu.map(|c| c.irq)),
        "cpu.softirq_percent" => |s| json(s.host.cpu.map(|c| c.softirq)),
        "cpu.steal_percent" => |s| json(s.host.cpu.map(|c| c.steal)),
        "cpu.busy_percent" => |s| json(s.host.cpu.map(|c| c.busy)),
        "memory.total_bytes" => |s| json(s.host.memory_total_bytes),
        "memory.available_bytes" => |s| json(s.host.memory_available_bytes),
        "memory.used_bytes" => |s| json(s.host.memory_used_bytes),
        "memory.swap_total_bytes" => |s| json(s.sample.host.meminfo.and_then(|m| m.swap_total_bytes)),
        "memory.swap_used_bytes" => |s| json(s.host.swap_used_bytes),
        "load.avg1" => |s| json(s.host.load.map(|l| l[0])),
        "load.avg5" => |s| json(s.host.load.map(|l| l[1])),
        "load.avg15" => |s| json(s.host.load.map(|l| l[2])),
        "context_switches_per_sec" => |s| json(s.host.context_switches_per_sec),
        "forks_per_sec" => |s| json(s.host.forks_per_sec),
        "page_faults_per_sec" => |s| json(s.host.page_faults_per_sec),
        "major_faults_per_sec" => |s| json(s.host.major_faults_per_sec),
        "swap_in_pages_per_sec" => |s| json(s.host.swap_in_pages_per_sec),
        "swap_out_pages_per_sec" => |s| json(s.host.swap_out_pages_per_sec),
        "disk.read_bytes_per_sec" => |s| json(crate::snapshot::host_totals(&s.host)[0]),
        "disk.write_bytes_per_sec" => |s| json(crate::snapshot::host_totals(&s.host)[1]),
        "net.rx_bytes_per_sec" => |s| json(crate::snapshot::host_totals(&s.host)[2]),
        "net.tx_bytes_per_sec" => |s| json(crate::snapshot::host_totals(&s.host)[3]),
        "processes" => |s| json(s.rows.len()),
        "uptime_secs" => |s| json(s.host.uptime_secs),
        "boot_time_unix_secs" => |s| json(s.host.boot_time_unix_secs),
        "power_host_watts" => |s| json(s.host.power_host_watts),
        "process_net.rx_bytes_per_sec" => |s| json(s.host.process_net.map(|n| n.rx_bytes_per_sec)),
        "process_net.tx_bytes_per_sec" => |s| json(s.host.process_net.map(|n| n.tx_bytes_per_sec)),
        "process_net.unowned_rx_bytes_per_sec" => |s| json(s.host.process_net.map(|n| n.unowned_rx_bytes_per_sec)),
        "process_net.unowned_tx_bytes_per_sec" => |s| json(s.host.process_net.map(|n| n.unowned_tx_bytes_per_sec)),
        "process_net.table_full" => |s| json(s.host.process_net.map(|n| n.table_full)),
        _ => return pressure_names!(name, host_pressure),
    };
    Some(read)
}

/// The container shape's number at `name` (`memory_current_bytes`, `cpu_used_cpus`, …).
pub fn container(name: &str) -> Option<NumberRead> {
    let read: NumberRead = match name {
        "pid" => |s| json(s.sample.container.as_ref().map(|c| c.pid)),
        "host_online_cpus" => |s| json(s.truth.host_online_cpus),
        "affinity_cpus" => |s| json(s.truth.affinity_cpus),
        "cpuset_cpus" => |s| json(s.truth.cpuset_cpus),
        "quota_cpus" => |s| json(s.truth.quota_cpus),
        "effective_cpus" => |s| json(s.truth.effective_cpus),
        "effective_cpus_ceil" => |s| json(s.truth.effective_cpus_ceil),
        "memory_limit_bytes" => |s| json(s.truth.memory_limit_bytes),
        "memory_current_bytes" => |s| json(s.truth.memory_current_bytes),
        "memory_peak_bytes" => |s| json(s.sample.container.as_ref().and_then(|c| c.counters.memory_peak_bytes)),
        "cpu_used_cpus" => |s| json(s.container_cpu_cores),
        "cpu_throttled_periods_total" => {
            |s| json(s.sample.container.as_ref().and_then(|c| c.counters.cpu_nr_throttled))
        }
        "cpu_throttled_seconds_total" => {
            |s| json(s.sample.container.as_ref().and_then(|c| c.counters.cpu_throttled_usec).map(|u| u as f64 / 1e6))
        }
        "pids_current" => |s| json(s.sample.container.as_ref().and_then(|c| c.counters.pids_current)),
        "limits_age_secs" => |s| {
            json(
                s.sample
                    .container
                    .as_ref()
                    .map(|c| s.sample.mono_ns.saturating_sub(c.limits_read_mono_ns) as f64 / 1e9),
            )
        },
        _ => return pressure_names!(name, container_pressure),
    };
    Some(read)
}

/// The agent shape's number at `name` (`last_sample.cpu_seconds`, `resident_bytes`, …); none
/// for `last_sample_age_secs`, which the shape reads off the clock.
pub fn agent(name: &str) -> Option<NumberRead> {
    let read: NumberRead = match name {
        "pid" => |s| json(s.agent.pid),
        "uptime_secs" => |s| json(uptime_secs(s)),
        "interval_secs" => |s| json(s.agent.interval_ns as f64 / 1e9),
        "samples_total" => |s| json(s.agent.samples),
        "missed_ticks_total" => |s| json(s.agent.missed_ticks),
        "cpu_seconds_total" => |s| json(s.agent.process_cpu_seconds),
        "cpu_percent_of_one_cpu_avg" => |s| {
            let uptime = uptime_secs(s);
            json(if uptime > 0.0 { 100.0 * s.agent.process_cpu_seconds / uptime } else { 0.0 })
        },
        "sampling_cpu_seconds_total" => |s| json(s.agent.sampling_cpu_seconds),
        "resident_bytes" => |s| json(s.agent.resident_bytes),
        "max_resident_bytes" => |s| json(s.agent.max_resident_bytes),
        "processes_gone_total" => |s| json(s.agent.processes_gone),
        "last_sample.cpu_seconds" => |s| json(s.sample.cost.cpu_ns as f64 / 1e9),
        "last_sample.wall_seconds" => |s| json(s.sample.cost.wall_ns as f64 / 1e9),
        "last_sample.derive_cpu_seconds" => |s| json(s.agent.last_derive_cpu_ns as f64 / 1e9),
        "last_sample.files_read" => |s| json(s.sample.cost.files_read),
        "last_sample.files_opened" => |s| json(s.sample.cost.files_opened),
        "last_sample.fds_kept" => |s| json(s.sample.cost.fds_kept),
        "last_sample.processes_seen" => |s| json(s.sample.cost.processes_seen),
        "last_sample.processes_gone" => |s| json(s.sample.cost.processes_gone),
        "last_sample.target_lock_seconds" => |s| json(s.sample.cost.target_lock.total_ns as f64 / 1e9),
        "last_sample.target_lock_longest_seconds" => |s| json(s.sample.cost.target_lock.max_ns as f64 / 1e9),
        "history.points" => |s| json(s.agent.history.points),
        "history.capacity" => |s| json(s.agent.history.capacity),
        "history.series" => |s| json(s.agent.history.series),
        "history.bytes" => |s| json(s.agent.history.bytes),
        "history.max_bytes" => |s| json(s.agent.history.max_bytes),
        "recording.frames_written" => |s| json(s.agent.recording.stats.written),
        "recording.key_frames" => |s| json(s.agent.recording.stats.key_frames),
        "recording.bytes_written" => |s| json(s.agent.recording.stats.frame_bytes),
        "recording.dropped" => |s| json(s.agent.recording.stats.dropped),
        "recording.write_errors" => |s| json(s.agent.recording.stats.write_errors),
        "recording.write_cpu_seconds" => |s| json(s.agent.recording.stats.cpu_ns as f64 / 1e9),
        _ => return None,
    };
    Some(read)
}

fn uptime_secs(s: &Snapshot) -> f64 {
    s.sample.unix_ns.saturating_sub(s.agent.started_unix_ns) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proctor_procfs::host::{Pressure, PressureLine};

    use super::*;
    use crate::snapshot::AgentExtras;

    use crate::snapshot::tests::live;

    type Readers = fn(&str) -> Option<NumberRead>;

    /// Every number of `v` by its dotted name, `None` for `null`; lists are not entered.
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, Option<f64>>) {
        let name = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
        if let serde_json::Value::Object(map) = v {
            for (k, v) in map {
                match v {
                    serde_json::Value::Object(_) => flatten(&name(k), v, out),
                    serde_json::Value::Number(n) => drop(out.insert(name(k), n.as_f64())),
                    serde_json::Value::Null => drop(out.insert(name(k), None)),
                    _ => {}
                }
            }
        }
    }

    /// Each reader gives what the shape serializes under its name: on this machine's snapshot,
    /// and on one whose host, container and agent figures are all set, each to its own value
    /// (so a reader of the wrong field cannot agree by chance), one of them not finite.
    #[test]
    fn every_reader_reads_what_the_shape_holds() {
        let mut set = live();
        let line =
            |b: f64| PressureLine { avg10: b + 0.1, avg60: b + 0.2, avg300: b + 0.3, total_usec: (b * 1e6) as u64 + 7 };
        let pressure = |b: f64| Some(Pressure { some: Some(line(b)), full: Some(line(b + 10.0)) });
        let h = &mut set.host;
        (h.pressure_cpu, h.pressure_memory, h.pressure_io) = (pressure(100.0), pressure(200.0), pressure(300.0));
        h.load = Some([1.25, 5.5, 15.75]);
        h.context_switches_per_sec = Some(f64::NAN);
        h.forks_per_sec = Some(11.5);
        h.power_host_watts = Some(42.5);
        h.process_net = Some(proctor_model::HostNetRates {
            rx_bytes_per_sec: 71.5,
            tx_bytes_per_sec: 72.5,
            unowned_rx_bytes_per_sec: 73.5,
            unowned_tx_bytes_per_sec: 74.5,
            table_full: 75,
        });
        let t = &mut set.truth;
        (t.host_online_cpus, t.affinity_cpus, t.cpuset_cpus) = (Some(61), Some(62), Some(63));
        (t.quota_cpus, t.effective_cpus, t.effective_cpus_ceil) = (Some(1.5), Some(2.5), Some(3));
        (t.memory_limit_bytes, t.memory_current_bytes) = (Some(1 << 30), Some(1 << 29));
        set.container_cpu_cores = Some(0.75);
        set.agent.missed_ticks = 17;
        set.agent.processes_gone = 19;
        set.agent.last_derive_cpu_ns = 23_000;
        set.agent.history.points = 29;
        set.agent.recording.stats.dropped = 31;
        for s in [live(), set] {
            let extras = AgentExtras::default();
            let shapes: [(&str, serde_json::Value, Readers); 3] = [
                ("host", serde_json::to_value(crate::snapshot::host(&s)).expect("host"), host),
                ("container", serde_json::to_value(crate::snapshot::container(&s)).expect("container"), container),
                ("agent", serde_json::to_value(crate::snapshot::agent(&s, &extras)).expect("agent"), agent),
            ];
            for (scope, json, reader) in shapes {
                let mut numbers = BTreeMap::new();
                flatten("", &json, &mut numbers);
                let mut read = 0;
                for (name, value) in &numbers {
                    if let Some(r) = reader(name) {
                        assert_eq!(r(&s), *value, "{scope}.{name}");
                        read += 1;
                    }
                }
                assert!(read >= 15, "{scope}: only {read} names have readers");
            }
        }
    }
}
