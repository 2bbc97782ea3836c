//! The public field table: every field of a process and of the host that proctor prints, with
//! its name (the JSON key, dotted for nested objects), column title, unit and meaning. One list,
//! many views, like below's render table: `proctor dump`'s columns and `--fields list`, the
//! text tables' headers, the dashboard's columns and formats (through [`crate::js`]), the TUI's
//! columns and `docs/api.md` all read it, and tests hold it equal to the JSON shapes, so a field
//! cannot be added to one and forgotten in the other.

use serde::Serialize;

use crate::units::Unit;

/// One public field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Field {
    /// The JSON key; nested objects are joined with dots (`memory.used_bytes`).
    pub name: &'static str,
    /// A short column title.
    pub title: &'static str,
    pub unit: Unit,
    pub description: &'static str,
}

/// The fields of one process ([`crate::process::ProcessOut`]), in its order.
pub const PROCESS: &[Field] = &[
    Field { name: "pid", title: "PID", unit: Unit::Count, description: "Process id." },
    Field { name: "ppid", title: "PPID", unit: Unit::Count, description: "Parent's process id." },
    Field { name: "name", title: "Name", unit: Unit::Text, description: "`comm`: the kernel's 15-byte name, set by the process itself (attacker-controlled)." },
    Field { name: "cmdline", title: "Command", unit: Unit::TextList, description: "Arguments; null until the cmdline worker read them, empty for kernel threads." },
    Field { name: "state", title: "S", unit: Unit::Text, description: "State letter: R running, S sleeping, D uninterruptible, Z zombie, T stopped, I idle." },
    Field { name: "uid", title: "UID", unit: Unit::Count, description: "Real user id." },
    Field { name: "cpu_percent", title: "CPU%", unit: Unit::Percent, description: "Percent of one CPU over the last interval (200 = two CPUs busy), as top shows it." },
    Field { name: "cpu_percent_of_effective", title: "CPU%eff", unit: Unit::Percent, description: "Percent of the container's effective CPUs." },
    Field { name: "cpu_seconds_total", title: "TIME", unit: Unit::Seconds, description: "CPU time used since the process started (user + system)." },
    Field { name: "start_time_unix_secs", title: "Started", unit: Unit::UnixSeconds, description: "When the process started." },
    Field { name: "rss_bytes", title: "RSS", unit: Unit::Bytes, description: "Resident memory." },
    Field { name: "anon_bytes", title: "Anon", unit: Unit::Bytes, description: "Resident anonymous memory (heap, stacks)." },
    Field { name: "file_bytes", title: "File", unit: Unit::Bytes, description: "Resident file-backed memory (code, mapped files)." },
    Field { name: "shmem_bytes", title: "Shmem", unit: Unit::Bytes, description: "Resident shared memory (tmpfs, SysV and POSIX shm)." },
    Field { name: "swap_bytes", title: "Swap", unit: Unit::Bytes, description: "Swapped-out memory." },
    Field { name: "vsize_bytes", title: "Virt", unit: Unit::Bytes, description: "Virtual address space." },
    Field { name: "threads", title: "Thr", unit: Unit::Count, description: "Threads." },
    Field { name: "major_faults_per_sec", title: "MajFlt/s", unit: Unit::PerSec, description: "Major page faults (a read from disk) per second over the last interval." },
    Field { name: "read_bytes_per_sec", title: "Read/s", unit: Unit::BytesPerSec, description: "Bytes read from storage per second (with --io)." },
    Field { name: "write_bytes_per_sec", title: "Write/s", unit: Unit::BytesPerSec, description: "Bytes written to storage per second (with --io)." },
    Field { name: "io_bytes_per_sec", title: "IO/s", unit: Unit::BytesPerSec, description: "Bytes read and written per second, together (with --io), as htop's IO_RATE." },
    Field { name: "pss_bytes", title: "PSS", unit: Unit::Bytes, description: "Proportional set size: shared pages divided among their sharers (budgeted smaps_rollup worker; see pss_age_secs)." },
    Field { name: "uss_bytes", title: "USS", unit: Unit::Bytes, description: "Unique set size: pages no other process maps." },
    Field { name: "swap_pss_bytes", title: "SwapPSS", unit: Unit::Bytes, description: "Swap divided among its sharers." },
    Field { name: "pss_age_secs", title: "PSS age", unit: Unit::Seconds, description: "How old the PSS reading is; null when there is none yet." },
    Field { name: "cgroup", title: "Cgroup", unit: Unit::Text, description: "The process's cgroup path (v2, or the v1 cpu controller's)." },
    Field { name: "gpu_percent", title: "GPU%", unit: Unit::Percent, description: "The busiest GPU engine's busy share over the interval (DRM fdinfo), or NVML's SM share; null for a process holding no GPU." },
    Field { name: "gpu_memory_bytes", title: "GPUmem", unit: Unit::Bytes, description: "GPU memory held by the process's DRM clients (every region) plus NVML's used memory." },
];

/// The fields of one process group (`proctor_groups::GroupRow`: `/api/v1/groups`' rows less
/// the agent's counter, and `proctor dump group`'s columns), in its order.
pub const GROUP: &[Field] = &[
    Field { name: "name", title: "Group", unit: Unit::Text, description: "The group's name: a rule's name template, a cgroup's unit, container or pod, or a user." },
    Field { name: "processes", title: "Procs", unit: Unit::Count, description: "Member processes." },
    Field { name: "threads", title: "Thr", unit: Unit::Count, description: "Members' threads." },
    Field { name: "cpu_percent", title: "CPU%", unit: Unit::Percent, description: "Percent of one CPU over the interval, members' reaped children included." },
    Field { name: "reaped_cpu_percent", title: "Reaped%", unit: Unit::Percent, description: "The part of cpu_percent used by members' children that exited since the previous sample (from cutime/cstime)." },
    Field { name: "cpu_user_percent", title: "User%", unit: Unit::Percent, description: "cpu_percent's user time, reaped children's (cutime) included." },
    Field { name: "cpu_system_percent", title: "Sys%", unit: Unit::Percent, description: "cpu_percent's system time, reaped children's (cstime) included." },
    Field { name: "cpu_seconds_total", title: "TIME", unit: Unit::Seconds, description: "CPU seconds members used since they started, summed." },
    Field { name: "rss_bytes", title: "RSS", unit: Unit::Bytes, description: "Members' resident memory, summed." },
    Field { name: "pss_bytes", title: "PSS", unit: Unit::Bytes, description: "PSS of the members whose PSS is known (pss_known of processes)." },
    Field { name: "pss_known", title: "PSS of", unit: Unit::Count, description: "Members whose PSS is known." },
    Field { name: "uss_bytes", title: "USS", unit: Unit::Bytes, description: "USS of the members whose PSS is known." },
    Field { name: "swap_bytes", title: "Swap", unit: Unit::Bytes, description: "Members' swapped-out memory." },
    Field { name: "major_faults_per_sec", title: "MajFlt/s", unit: Unit::PerSec, description: "Major page faults per second, reaped children's included (cmajflt)." },
    Field { name: "minor_faults_per_sec", title: "MinFlt/s", unit: Unit::PerSec, description: "Minor page faults per second, reaped children's included (cminflt)." },
    Field { name: "read_bytes_per_sec", title: "Read/s", unit: Unit::BytesPerSec, description: "Bytes members read from storage per second (with --io)." },
    Field { name: "write_bytes_per_sec", title: "Write/s", unit: Unit::BytesPerSec, description: "Bytes members wrote to storage per second (with --io)." },
    Field { name: "open_fds", title: "FDs", unit: Unit::Count, description: "Open fds of the members whose count is known (fds_known of processes; Linux 6.2 and later)." },
    Field { name: "fds_known", title: "FDs of", unit: Unit::Count, description: "Members whose open fds were counted." },
    Field { name: "oldest_start_unix_secs", title: "Oldest", unit: Unit::UnixSeconds, description: "When the group's oldest member started." },
    Field { name: "started", title: "Started", unit: Unit::Count, description: "Members that appeared since the previous sample." },
    Field { name: "exited", title: "Exited", unit: Unit::Count, description: "Members of the previous sample that are gone." },
];

/// The host's scalar fields ([`crate::snapshot::HostOut`] flattened; the per-CPU, per-disk and
/// per-interface lists are left out: they are not columns).
pub const HOST: &[Field] = &[
    Field { name: "online_cpus", title: "CPUs", unit: Unit::Count, description: "CPUs online." },
    Field {
        name: "cpu.user_percent",
        title: "User%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in user mode (nice excluded) over the interval.",
    },
    Field {
        name: "cpu.nice_percent",
        title: "Nice%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in user mode at positive nice over the interval.",
    },
    Field {
        name: "cpu.system_percent",
        title: "System%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in kernel mode over the interval.",
    },
    Field {
        name: "cpu.idle_percent",
        title: "Idle%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in idle over the interval.",
    },
    Field {
        name: "cpu.iowait_percent",
        title: "Iowait%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in idle with I/O outstanding over the interval.",
    },
    Field {
        name: "cpu.irq_percent",
        title: "Irq%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in hard interrupts over the interval.",
    },
    Field {
        name: "cpu.softirq_percent",
        title: "Softirq%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in soft interrupts over the interval.",
    },
    Field {
        name: "cpu.steal_percent",
        title: "Steal%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in stolen by the hypervisor over the interval.",
    },
    Field {
        name: "cpu.busy_percent",
        title: "Busy%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in everything but idle and iowait over the interval.",
    },
    Field {
        name: "memory.total_bytes",
        title: "Mem",
        unit: Unit::Bytes,
        description: "Memory the kernel manages (MemTotal).",
    },
    Field {
        name: "memory.available_bytes",
        title: "Avail",
        unit: Unit::Bytes,
        description: "Memory available for new work without swapping (MemAvailable).",
    },
    Field { name: "memory.used_bytes", title: "Used", unit: Unit::Bytes, description: "total − available." },
    Field { name: "memory.swap_total_bytes", title: "SwapTotal", unit: Unit::Bytes, description: "Swap space." },
    Field { name: "memory.swap_used_bytes", title: "SwapUsed", unit: Unit::Bytes, description: "Swap in use." },
    Field {
        name: "load.avg1",
        title: "Load1",
        unit: Unit::Number,
        description: "Load average over 1 minute (runnable and uninterruptible tasks).",
    },
    Field {
        name: "load.avg5",
        title: "Load5",
        unit: Unit::Number,
        description: "Load average over 5 minutes (runnable and uninterruptible tasks).",
    },
    Field {
        name: "load.avg15",
        title: "Load15",
        unit: Unit::Number,
        description: "Load average over 15 minutes (runnable and uninterruptible tasks).",
    },
    Field {
        name: "pressure_cpu.some.avg10",
        title: "PSI cpu some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 10 s.",
    },
    Field {
        name: "pressure_cpu.some.avg60",
        title: "PSI cpu some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 60 s.",
    },
    Field {
        name: "pressure_cpu.some.avg300",
        title: "PSI cpu some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 300 s.",
    },
    Field {
        name: "pressure_cpu.some.total_seconds",
        title: "PSI cpu some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for cpu.",
    },
    Field {
        name: "pressure_cpu.full.avg10",
        title: "PSI cpu full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 10 s.",
    },
    Field {
        name: "pressure_cpu.full.avg60",
        title: "PSI cpu full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 60 s.",
    },
    Field {
        name: "pressure_cpu.full.avg300",
        title: "PSI cpu full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 300 s.",
    },
    Field {
        name: "pressure_cpu.full.total_seconds",
        title: "PSI cpu full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for cpu.",
    },
    Field {
        name: "pressure_memory.some.avg10",
        title: "PSI memory some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 10 s.",
    },
    Field {
        name: "pressure_memory.some.avg60",
        title: "PSI memory some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 60 s.",
    },
    Field {
        name: "pressure_memory.some.avg300",
        title: "PSI memory some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 300 s.",
    },
    Field {
        name: "pressure_memory.some.total_seconds",
        title: "PSI memory some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for memory.",
    },
    Field {
        name: "pressure_memory.full.avg10",
        title: "PSI memory full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 10 s.",
    },
    Field {
        name: "pressure_memory.full.avg60",
        title: "PSI memory full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 60 s.",
    },
    Field {
        name: "pressure_memory.full.avg300",
        title: "PSI memory full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 300 s.",
    },
    Field {
        name: "pressure_memory.full.total_seconds",
        title: "PSI memory full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for memory.",
    },
    Field {
        name: "pressure_io.some.avg10",
        title: "PSI io some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 10 s.",
    },
    Field {
        name: "pressure_io.some.avg60",
        title: "PSI io some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 60 s.",
    },
    Field {
        name: "pressure_io.some.avg300",
        title: "PSI io some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 300 s.",
    },
    Field {
        name: "pressure_io.some.total_seconds",
        title: "PSI io some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for io.",
    },
    Field {
        name: "pressure_io.full.avg10",
        title: "PSI io full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 10 s.",
    },
    Field {
        name: "pressure_io.full.avg60",
        title: "PSI io full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 60 s.",
    },
    Field {
        name: "pressure_io.full.avg300",
        title: "PSI io full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 300 s.",
    },
    Field {
        name: "pressure_io.full.total_seconds",
        title: "PSI io full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for io.",
    },
    Field {
        name: "context_switches_per_sec",
        title: "Ctxsw/s",
        unit: Unit::PerSec,
        description: "Context switches per second.",
    },
    Field {
        name: "forks_per_sec",
        title: "Forks/s",
        unit: Unit::PerSec,
        description: "Processes and threads created per second.",
    },
    Field { name: "page_faults_per_sec", title: "Flt/s", unit: Unit::PerSec, description: "Page faults per second." },
    Field {
        name: "major_faults_per_sec",
        title: "MajFlt/s",
        unit: Unit::PerSec,
        description: "Major page faults (a read from disk) per second.",
    },
    Field {
        name: "swap_in_pages_per_sec",
        title: "SwapIn/s",
        unit: Unit::PerSec,
        description: "Pages swapped in per second.",
    },
    Field {
        name: "swap_out_pages_per_sec",
        title: "SwapOut/s",
        unit: Unit::PerSec,
        description: "Pages swapped out per second.",
    },
    Field {
        name: "disk.read_bytes_per_sec",
        title: "DiskRd/s",
        unit: Unit::BytesPerSec,
        description: "Bytes read from whole disks per second.",
    },
    Field {
        name: "disk.write_bytes_per_sec",
        title: "DiskWr/s",
        unit: Unit::BytesPerSec,
        description: "Bytes written to whole disks per second.",
    },
    Field {
        name: "net.rx_bytes_per_sec",
        title: "NetRx/s",
        unit: Unit::BytesPerSec,
        description: "Bytes received per second, every interface but lo.",
    },
    Field {
        name: "net.tx_bytes_per_sec",
        title: "NetTx/s",
        unit: Unit::BytesPerSec,
        description: "Bytes sent per second, every interface but lo.",
    },
    Field { name: "processes", title: "Procs", unit: Unit::Count, description: "Processes on the host." },
    Field { name: "uptime_secs", title: "Up", unit: Unit::Seconds, description: "Time since boot." },
    Field { name: "boot_time_unix_secs", title: "Boot", unit: Unit::UnixSeconds, description: "When the host booted." },
    Field { name: "power_host_watts", title: "Power", unit: Unit::Watts, description: "The host's power over the interval: RAPL's psys zone, else its packages and DRAM, plus NVIDIA boards; null where a part is unreadable (see doctor)." },
];

/// The short names people type for process fields, as top, htop and pgtop users think of them:
/// the one alias table (sort keys, `top --slow`, `top`'s column and sort names, alert rules'
/// `process.NAME`). Every target is a field of [`PROCESS`]; a test holds that.
pub const ALIASES: &[(&str, &str)] = &[
    ("cpu", "cpu_percent"),
    ("rss", "rss_bytes"),
    ("mem", "rss_bytes"),
    ("pss", "pss_bytes"),
    ("uss", "uss_bytes"),
    ("swap", "swap_bytes"),
    ("vsize", "vsize_bytes"),
    ("time", "cpu_seconds_total"),
    ("majflt", "major_faults_per_sec"),
    ("read", "read_bytes_per_sec"),
    ("write", "write_bytes_per_sec"),
    ("io", "io_bytes_per_sec"),
];

/// The process field `name` stands for: an alias's target, or `name` itself.
pub fn unalias(name: &str) -> &str {
    ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, f)| f)
}

/// The process field named `name` or an alias of it.
pub fn process_field(name: &str) -> Option<&'static Field> {
    find(PROCESS, unalias(name))
}

/// The field called `name` in `table`.
pub fn find(table: &'static [Field], name: &str) -> Option<&'static Field> {
    table.iter().find(|f| f.name == name)
}

/// A JSON document's leaves as (dotted name, value): what a row of `proctor dump` holds. A `null` object stays one `null` leaf; lists of objects (per-CPU,
/// per-device) are left out; lists of scalars stay one leaf.
pub fn flatten(value: serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    flatten_into("", value, &mut out);
    out
}

fn flatten_into(prefix: &str, value: serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                flatten_into(&name, inner, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {}
        other => out.push((prefix.to_string(), other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_names_a_process_field() {
        for (alias, field) in ALIASES {
            assert!(find(PROCESS, field).is_some(), "{alias} -> {field}");
            assert!(find(PROCESS, alias).is_none(), "{alias} is a field's own name");
            assert_eq!(process_field(alias).map(|f| f.name), Some(*field));
        }
        assert_eq!(process_field("rss_bytes").map(|f| f.name), Some("rss_bytes"));
        assert!(process_field("nosuch").is_none());
    }
    use std::collections::BTreeSet;

    /// A snapshot of this machine with rates (two samples), PSS and command lines as a live
    /// agent would have them after a while.
    fn live() -> proctor_agent::Snapshot {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            process_io: true,
            ..proctor_sampler::SamplerConfig::default()
        });
        let first = sampler.sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let second = sampler.sample();
        proctor_agent::Snapshot::derive(second, Some(&first))
    }

    fn names(table: &[Field]) -> Vec<&str> {
        table.iter().map(|f| f.name).collect()
    }

    #[test]
    fn the_process_table_is_exactly_the_process_shape() {
        let s = live();
        let row = s.rows.iter().find(|r| r.pid == std::process::id()).expect("this test's own process");
        let leaves: BTreeSet<String> = flatten(serde_json::to_value(crate::process::process(&s, row)).expect("json"))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let table: BTreeSet<String> = names(PROCESS).into_iter().map(str::to_string).collect();
        assert_eq!(leaves, table);
    }

    #[test]
    fn the_group_table_is_exactly_the_group_shape() {
        // Every field set (no null hides a name); a field added to GroupRow fails to compile here.
        let row = proctor_groups::GroupRow {
            name: "web".into(),
            processes: 2,
            threads: 3,
            cpu_percent: 1.0,
            reaped_cpu_percent: 0.5,
            cpu_user_percent: 0.75,
            cpu_system_percent: 0.25,
            cpu_seconds_total: 9.0,
            rss_bytes: 1,
            pss_bytes: 1,
            pss_known: 1,
            uss_bytes: 1,
            swap_bytes: 0,
            major_faults_per_sec: 0.0,
            minor_faults_per_sec: 1.0,
            read_bytes_per_sec: Some(1.0),
            write_bytes_per_sec: Some(1.0),
            open_fds: 7,
            fds_known: 2,
            oldest_start_unix_secs: Some(1.0),
            started: 1,
            exited: 0,
        };
        let leaves: BTreeSet<String> =
            flatten(serde_json::to_value(&row).expect("json")).into_iter().map(|(n, _)| n).collect();
        let table: BTreeSet<String> = names(GROUP).into_iter().map(str::to_string).collect();
        assert_eq!(leaves, table);
    }

    #[test]
    fn the_host_table_is_exactly_the_host_shapes_scalars() {
        let s = live();
        let leaves: Vec<(String, serde_json::Value)> =
            flatten(serde_json::to_value(crate::snapshot::host(&s)).expect("json"));
        // A pressure object this kernel does not have (`full` for cpu on older kernels) is one
        // null leaf: every other leaf is in the table, and every table name is a leaf or under a
        // null one.
        let table: BTreeSet<&str> = names(HOST).into_iter().collect();
        for (name, value) in &leaves {
            assert!(table.contains(name.as_str()) || value.is_null(), "{name} is not in fields::HOST");
        }
        for name in &table {
            let covered = leaves.iter().any(|(leaf, value)| {
                leaf == name
                    || (value.is_null() && name.strip_prefix(leaf.as_str()).is_some_and(|r| r.starts_with('.')))
            });
            assert!(covered, "fields::HOST names {name}, which the host shape does not have");
        }
    }

    #[test]
    fn docs_api_md_documents_every_field_with_its_unit() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).expect("docs/api.md");
        for f in PROCESS.iter().chain(HOST) {
            let row = format!("| `{}` | {} | {} |", f.name, f.unit.as_str(), f.description);
            assert!(docs.contains(&row), "docs/api.md lacks the row {row}");
        }
    }

    #[test]
    fn names_are_unique_and_units_follow_the_naming_rule() {
        for table in [PROCESS, HOST] {
            let unique: BTreeSet<&str> = names(table).into_iter().collect();
            assert_eq!(unique.len(), table.len());
            for f in table {
                let expected = if f.name.ends_with("_bytes_per_sec") {
                    Some(Unit::BytesPerSec)
                } else if f.name.ends_with("_bytes") {
                    Some(Unit::Bytes)
                } else if f.name.ends_with("_percent") {
                    Some(Unit::Percent)
                } else if f.name.ends_with("_per_sec") {
                    Some(Unit::PerSec)
                } else if f.name.ends_with("_watts") {
                    Some(Unit::Watts)
                } else {
                    None
                };
                if let Some(unit) = expected {
                    assert_eq!(f.unit, unit, "{}", f.name);
                }
            }
        }
    }
}
