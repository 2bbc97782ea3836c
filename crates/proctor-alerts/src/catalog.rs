//! The series a rule can name: proctor's published vocabulary, prefixed by its scope. Host fields
//! are `proctor_vocab::fields::host_all()` (the host shape's, then the catalog's other host
//! series), process fields `fields::PROCESS`, group fields
//! `fields::GROUP`; the container's and the agent's scalar fields are listed here (their JSON
//! shapes have no field table) and tests hold every list equal to the shapes.

use std::sync::OnceLock;

use proctor_vocab::fields::{self, Field};
use proctor_vocab::units::Unit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Host,
    Container,
    Agent,
    Process,
    Group,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Host => "host",
            Scope::Container => "container",
            Scope::Agent => "agent",
            Scope::Process => "process",
            Scope::Group => "group",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Some(match name {
            "host" => Scope::Host,
            "container" => Scope::Container,
            "agent" => Scope::Agent,
            "process" => Scope::Process,
            "group" => Scope::Group,
            _ => return None,
        })
    }

    /// Scopes with one value per instance (a process, a group) rather than one value.
    pub fn per_instance(self) -> bool {
        matches!(self, Scope::Process | Scope::Group)
    }
}

/// The container's scalar fields (`proctor_vocab::snapshot::ContainerOut`, flattened).
pub const CONTAINER: &[(&str, Unit)] = &[
    ("host_online_cpus", Unit::Count),
    ("affinity_cpus", Unit::Count),
    ("cpuset_cpus", Unit::Count),
    ("quota_cpus", Unit::Cpus),
    ("effective_cpus", Unit::Cpus),
    ("effective_cpus_ceil", Unit::Count),
    ("memory_limit_bytes", Unit::Bytes),
    ("memory_current_bytes", Unit::Bytes),
    ("memory_peak_bytes", Unit::Bytes),
    ("cpu_used_cpus", Unit::Cpus),
    ("cpu_throttled_periods_total", Unit::Count),
    ("cpu_throttled_seconds_total", Unit::Seconds),
    ("pids_current", Unit::Count),
    ("pressure_cpu.some.avg10", Unit::Percent),
    ("pressure_cpu.some.avg60", Unit::Percent),
    ("pressure_cpu.some.avg300", Unit::Percent),
    ("pressure_cpu.some.total_seconds", Unit::Seconds),
    ("pressure_cpu.full.avg10", Unit::Percent),
    ("pressure_cpu.full.avg60", Unit::Percent),
    ("pressure_cpu.full.avg300", Unit::Percent),
    ("pressure_cpu.full.total_seconds", Unit::Seconds),
    ("pressure_memory.some.avg10", Unit::Percent),
    ("pressure_memory.some.avg60", Unit::Percent),
    ("pressure_memory.some.avg300", Unit::Percent),
    ("pressure_memory.some.total_seconds", Unit::Seconds),
    ("pressure_memory.full.avg10", Unit::Percent),
    ("pressure_memory.full.avg60", Unit::Percent),
    ("pressure_memory.full.avg300", Unit::Percent),
    ("pressure_memory.full.total_seconds", Unit::Seconds),
    ("pressure_io.some.avg10", Unit::Percent),
    ("pressure_io.some.avg60", Unit::Percent),
    ("pressure_io.some.avg300", Unit::Percent),
    ("pressure_io.some.total_seconds", Unit::Seconds),
    ("pressure_io.full.avg10", Unit::Percent),
    ("pressure_io.full.avg60", Unit::Percent),
    ("pressure_io.full.avg300", Unit::Percent),
    ("pressure_io.full.total_seconds", Unit::Seconds),
    ("limits_age_secs", Unit::Seconds),
];

/// The agent's own scalar fields (`proctor_vocab::snapshot::AgentOut`, flattened).
pub const AGENT: &[(&str, Unit)] = &[
    ("uptime_secs", Unit::Seconds),
    ("interval_secs", Unit::Seconds),
    ("samples_total", Unit::Count),
    ("last_sample_age_secs", Unit::Seconds),
    ("missed_ticks_total", Unit::Count),
    ("cpu_seconds_total", Unit::Seconds),
    ("cpu_percent_of_one_cpu_avg", Unit::Percent),
    ("sampling_cpu_seconds_total", Unit::Seconds),
    ("resident_bytes", Unit::Bytes),
    ("max_resident_bytes", Unit::Bytes),
    ("processes_gone_total", Unit::Count),
    ("last_sample.cpu_seconds", Unit::Seconds),
    ("last_sample.wall_seconds", Unit::Seconds),
    ("last_sample.derive_cpu_seconds", Unit::Seconds),
    ("last_sample.files_read", Unit::Count),
    ("last_sample.files_opened", Unit::Count),
    ("last_sample.fds_kept", Unit::Count),
    ("last_sample.processes_seen", Unit::Count),
    ("last_sample.processes_gone", Unit::Count),
    ("last_sample.target_lock_seconds", Unit::Seconds),
    ("last_sample.target_lock_longest_seconds", Unit::Seconds),
    ("history.points", Unit::Count),
    ("history.bytes", Unit::Bytes),
    ("recording.frames_written", Unit::Count),
    ("recording.bytes_written", Unit::Bytes),
    ("recording.dropped", Unit::Count),
    ("recording.write_errors", Unit::Count),
    ("recording.write_cpu_seconds", Unit::Seconds),
];

/// Labels a process selector can match on (`process{name="x"}`), and group labels.
pub const PROCESS_LABELS: &[&str] = &["name", "cmdline", "user", "uid", "cgroup", "pid", "ppid", "state"];
pub const GROUP_LABELS: &[&str] = &["name"];

fn table(scope: Scope) -> Vec<(&'static str, Unit)> {
    let of = |t: &'static [Field]| t.iter().map(|f| (f.name, f.unit)).collect();
    match scope {
        Scope::Host => of(fields::host_all()),
        Scope::Container => CONTAINER.to_vec(),
        Scope::Agent => AGENT.to_vec(),
        Scope::Process => of(fields::PROCESS),
        Scope::Group => of(fields::GROUP),
    }
}

/// Every series name with its unit, `scope.field`, in a stable order.
pub fn all() -> &'static [(String, Unit)] {
    static ALL: OnceLock<Vec<(String, Unit)>> = OnceLock::new();
    ALL.get_or_init(|| {
        [Scope::Host, Scope::Container, Scope::Agent, Scope::Process, Scope::Group]
            .into_iter()
            .flat_map(|scope| table(scope).into_iter().map(move |(n, u)| (format!("{}.{n}", scope.name()), u)))
            .collect()
    })
}

/// The suffixes a name may leave out: `host.cpu.busy` is `host.cpu.busy_percent`.
const UNIT_SUFFIXES: &[&str] =
    &["_percent", "_bytes", "_bytes_per_sec", "_per_sec", "_secs", "_seconds", "_total", "_cpus"];

/// `field` of `scope` with its unit, also when its unit suffix was left out (when that leaves
/// one candidate). Returns the vocabulary's full field name.
pub fn resolve(scope: Scope, field: &str) -> Option<(&'static str, Unit)> {
    let t = table(scope);
    if let Some(found) = t.iter().find(|(n, _)| *n == field) {
        return Some(*found);
    }
    // A process field's alias from the one table (`process.mem`, `process.time`).
    if scope == Scope::Process {
        let field = proctor_vocab::fields::unalias(field);
        if let Some(found) = t.iter().find(|(n, _)| *n == field) {
            return Some(*found);
        }
    }
    // A series' earlier name (`host.pressure.cpu.some_avg10`, as the history API and the
    // dashboard named it): the field the series catalog names it now.
    let renamed = proctor_vocab::series::find(&format!("{}.{field}", scope.name()))
        .filter(|s| s.field)
        .and_then(|s| s.name.strip_prefix(scope.name())?.strip_prefix('.'));
    if let Some(found) = renamed.and_then(|r| t.iter().find(|(n, _)| *n == r)) {
        return Some(*found);
    }
    let mut hits = t.iter().filter(|(n, _)| UNIT_SUFFIXES.iter().any(|s| n.strip_suffix(s) == Some(field)));
    let first = hits.next()?;
    hits.next().is_none().then_some(*first)
}

/// The three known series names closest to `name` (edit distance), for "did you mean".
pub fn closest(name: &str) -> Vec<&'static str> {
    // Also against each name without its unit suffix, since names may leave it out.
    let score = |n: &str| {
        let short = UNIT_SUFFIXES.iter().find_map(|s| n.strip_suffix(s)).unwrap_or(n);
        distance(name, n).min(distance(name, short))
    };
    let mut scored: Vec<(usize, &'static str)> = all().iter().map(|(n, _)| (score(n), n.as_str())).collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_resolve_to_the_vocabularys_when_unambiguous() {
        assert_eq!(resolve(Scope::Host, "cpu.busy").map(|f| f.0), Some("cpu.busy_percent"));
        assert_eq!(resolve(Scope::Host, "memory.used").map(|f| f.0), Some("memory.used_bytes"));
        assert_eq!(resolve(Scope::Process, "rss").map(|f| f.0), Some("rss_bytes"));
        // The one alias table: what `--sort` and `top --slow` take, a rule takes.
        assert_eq!(resolve(Scope::Process, "mem").map(|f| f.0), Some("rss_bytes"));
        assert_eq!(resolve(Scope::Process, "majflt").map(|f| f.0), Some("major_faults_per_sec"));
        assert_eq!(resolve(Scope::Host, "mem"), None);
        assert_eq!(resolve(Scope::Agent, "last_sample.cpu").map(|f| f.0), Some("last_sample.cpu_seconds"));
        assert_eq!(resolve(Scope::Host, "cpu.busy_percent").map(|f| f.1), Some(Unit::Percent));
        assert_eq!(resolve(Scope::Host, "cpu.bsy"), None);
        // Names the history API and rollups used before the series catalog.
        assert_eq!(resolve(Scope::Host, "pressure.cpu.some_avg10").map(|f| f.0), Some("pressure_cpu.some.avg10"));
        assert_eq!(resolve(Scope::Host, "load1").map(|f| f.0), Some("load.avg1"));
        assert_eq!(resolve(Scope::Container, "memory.current_bytes").map(|f| f.0), Some("memory_current_bytes"));
        assert_eq!(resolve(Scope::Agent, "sample_cpu_seconds").map(|f| f.0), Some("last_sample.cpu_seconds"));
    }

    #[test]
    fn every_catalog_series_of_a_field_is_a_series_a_rule_can_name() {
        for s in proctor_vocab::series::CATALOG.iter().filter(|s| s.field) {
            let (scope, field) = s.name.split_once('.').expect("scoped");
            let scope = Scope::parse(scope).expect("a scope of rules");
            assert_eq!(resolve(scope, field), Some((field, s.unit)), "{}", s.name);
        }
    }

    #[test]
    fn closest_names_are_offered() {
        assert_eq!(closest("host.cpu.bsy_percent")[0], "host.cpu.busy_percent");
        assert_eq!(closest("host.cpu.bsy")[0], "host.cpu.busy_percent");
        assert!(
            closest("container.memory.limit").contains(&"container.memory_limit_bytes"),
            "{:?}",
            closest("container.memory.limit")
        );
    }
}
