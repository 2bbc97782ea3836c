//! The evaluator against snapshots of this machine: every process and group field reads what
//! the published shapes say, every container and agent name in the catalogue exists in its
//! shape, and rules over real processes fire for exactly the processes they select.

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::time::Duration;

use proctor_agent::Snapshot;
use proctor_alerts::catalog::{self, Scope};
use proctor_alerts::engine::Alerting;
use proctor_alerts::rules;
use proctor_alerts::state::{AlertState, Told};
use proctor_vocab::fields;

fn sampler() -> proctor_sampler::Sampler {
    proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
        pss_budget: 0.0,
        process_io: true,
        ..proctor_sampler::SamplerConfig::default()
    })
}

fn live() -> Snapshot {
    let mut s = sampler();
    let first = s.sample();
    std::thread::sleep(Duration::from_millis(50));
    let second = s.sample();
    Snapshot::derive(second, Some(&first))
}

/// Kills and reaps the sleepers it started, by their pids, however the test ends.
struct Sleepers(Vec<Child>);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sleepers(n: usize) -> Sleepers {
    Sleepers((0..n).map(|_| Command::new("sleep").arg("300").spawn().expect("sleep")).collect())
}

#[test]
fn the_catalogue_names_what_the_shapes_publish() {
    let s = live();
    let flat = |v: serde_json::Value| -> BTreeSet<String> { fields::flatten(v).into_iter().map(|(n, _)| n).collect() };
    let container = flat(serde_json::to_value(proctor_vocab::snapshot::container(&s)).expect("json"));
    let agent = flat(
        serde_json::to_value(proctor_vocab::snapshot::agent(&s, &proctor_vocab::snapshot::AgentExtras::default()))
            .expect("json"),
    );
    // A null object (no PSI here) hides its leaves: those names are checked by their prefix.
    let covered = |set: &BTreeSet<String>, name: &str| {
        set.contains(name) || set.iter().any(|n| name.starts_with(&format!("{n}.")))
    };
    for (name, _) in catalog::CONTAINER {
        assert!(covered(&container, name), "container.{name} is not in the container shape: {container:?}");
    }
    for (name, _) in catalog::AGENT {
        assert!(covered(&agent, name), "agent.{name} is not in the agent shape: {agent:?}");
    }
    for f in fields::host_all() {
        assert!(catalog::resolve(Scope::Host, f.name).is_some(), "{}", f.name);
    }
}

/// A host series of the catalog outside the host shape (the page cache, no field of
/// `/api/v1/snapshot`'s host) is read from the model's host series: a rule on it holds on a
/// live host, and its `$value` is the model's number.
#[test]
fn a_catalog_series_outside_the_host_shape_is_a_rule_field() {
    let s = live();
    let cached = fields::host_series_value(&s.host, "memory.cached_bytes").expect("Cached in /proc/meminfo");
    let yaml = "groups:\n  - name: g\n    rules:\n      - alert: Cache\n        expr: host.memory.cached_bytes >= 0\n";
    let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let mut a = Alerting::new(set, AlertState::default());
    let events = a.evaluate(&s);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].value, Some(cached), "{events:?}");
}

/// Every process field a rule can compare reads what `/api/v1/processes` says for it.
#[test]
fn process_fields_in_rules_are_the_published_values() {
    let _kids = sleepers(2);
    let s = live();
    let me = std::process::id();
    let row = s.rows.iter().find(|r| r.pid == me).unwrap_or_else(|| {
        panic!("no row for this test (pid {me}) among {} rows; the sample's cost: {:?}", s.rows.len(), s.sample.cost)
    });
    let out = serde_json::to_value(proctor_vocab::process::process(&s, row)).expect("json");
    let mut checked = 0;
    for f in fields::PROCESS {
        let v = &out[f.name];
        let text = match f.unit {
            proctor_vocab::units::Unit::TextList => continue,
            proctor_vocab::units::Unit::Text => v.as_str().map(|t| format!("{t:?}")),
            _ => v.as_f64().map(|n| format!("{n:?}")),
        };
        let Some(literal) = text else { continue };
        // `process{pid="ME"}.FIELD == VALUE` holds for this process and no other.
        let yaml = format!(
            "groups:\n  - name: g\n    rules:\n      - alert: F\n        expr: 'process{{pid=\"{me}\"}}.{} == {}'\n",
            f.name,
            literal.replace('\'', "''")
        );
        let set = rules::parse(&yaml).unwrap_or_else(|d| panic!("{}: {d:?}", f.name));
        let mut a = Alerting::new(set, AlertState::default());
        let events = a.evaluate(&s);
        assert_eq!(events.len(), 1, "{} == {literal}: {events:?}", f.name);
        assert_eq!(events[0].labels.get("pid"), Some(&me.to_string()));
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} fields had values");
}

#[test]
fn per_process_rules_fire_per_selected_process_and_count_counts_them() {
    let kids = sleepers(3);
    let pids: BTreeSet<String> = kids.0.iter().map(|c| c.id().to_string()).collect();
    let s = live();
    let yaml = r#"
groups:
  - name: g
    rules:
      - alert: Sleepers
        expr: process{name="sleep", cmdline=~"sleep 300"}.rss > 1KiB
        annotations:
          summary: "{{ $labels.name }} {{ $labels.pid }} holds {{ $value }}"
      - alert: FewSleepers
        expr: count(process{name="sleep"}) >= 3
      - alert: NoSuchThing
        expr: count(process{name="no-such-comm-xyz"}) > 0
      - alert: Busy
        expr: host.cpu.busy_percent >= 0% and host.memory.used_bytes > 1MiB
"#;
    let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let mut a = Alerting::new(set, AlertState::default());
    let events = a.evaluate(&s);
    let fired = |rule: &str| events.iter().filter(|e| e.rule == rule && e.state == Told::Firing).collect::<Vec<_>>();
    let sleepers: BTreeSet<String> = fired("Sleepers").iter().map(|e| e.labels["pid"].clone()).collect();
    assert!(pids.is_subset(&sleepers), "{pids:?} not all in {sleepers:?}");
    let one = fired("Sleepers").into_iter().find(|e| pids.contains(&e.labels["pid"])).expect("one");
    assert!(one.annotations["summary"].starts_with(&format!("sleep {} holds ", one.labels["pid"])), "{one:?}");
    assert!(one.annotations["summary"].ends_with("iB") || one.annotations["summary"].ends_with(" B"), "{one:?}");
    assert!(one.labels.contains_key("start"), "{one:?}");
    assert_eq!(fired("FewSleepers").len(), 1);
    assert_eq!(fired("NoSuchThing").len(), 0);
    assert_eq!(fired("Busy").len(), 1);
    // The sleepers exit: their alerts resolve at once, as gone.
    drop(kids);
    let mut s2 = sampler();
    let first = s2.sample();
    std::thread::sleep(Duration::from_millis(30));
    let later = Snapshot::derive(s2.sample(), Some(&first));
    let events = a.evaluate(&later);
    let gone: BTreeSet<String> = events
        .iter()
        .filter(|e| e.rule == "Sleepers" && e.state == Told::Resolved && e.reason.as_deref() == Some("gone"))
        .map(|e| e.labels["pid"].clone())
        .collect();
    assert!(pids.is_subset(&gone), "{pids:?} not all resolved as gone: {events:?}");
}

#[test]
fn rate_and_windows_follow_the_samples() {
    let yaml = r#"
groups:
  - name: g
    rules:
      - alert: Ticking
        expr: rate(agent.samples_total) >= 0
      - alert: MaxLoad
        expr: max_over(host.load.avg1, 5m) >= 0
"#;
    let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let mut a = Alerting::new(set, AlertState::default());
    let mut smp = sampler();
    let mut prev = smp.sample();
    let mut fired = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(20));
        let cur = smp.sample();
        let s = Snapshot::derive(cur.clone(), Some(&prev));
        fired.extend(a.evaluate(&s).into_iter().map(|e| e.rule));
        prev = cur;
    }
    // A snapshot rebuilt outside an agent has samples_total 0 each time: its rate is 0, known
    // from the second evaluation on; max_over has a value from the first.
    assert_eq!(fired, vec!["MaxLoad".to_string(), "Ticking".to_string()]);
}

/// Comparisons keep only the instances where they hold, except under `not`, which needs the
/// others: `not (rss > 1 TiB)` holds for this process; `or`, `and` and `count` see the same
/// instances either way.
#[test]
fn not_or_and_count_see_every_instance_they_should() {
    let me = std::process::id();
    let s = live();
    let yaml = format!(
        r#"
groups:
  - name: g
    rules:
      - alert: NotHuge
        expr: not (process{{pid="{me}"}}.rss > 1TiB)
      - alert: EitherSide
        expr: process{{pid="{me}"}}.rss > 1TiB or process{{pid="{me}"}}.threads >= 1
      - alert: BothSides
        expr: process{{pid="{me}"}}.rss > 1KiB and process{{pid="{me}"}}.threads > 100000
      - alert: CountTrue
        expr: count(process{{pid="{me}"}}.rss > 1KiB) == 1
"#
    );
    let set = rules::parse(&yaml).unwrap_or_else(|d| panic!("{d:?}"));
    assert!(s.row(me).is_some(), "no row for this test (pid {me}) among {} rows: {:?}", s.rows.len(), s.sample.cost);
    let mut a = Alerting::new(set, AlertState::default());
    let fired: BTreeSet<String> =
        a.evaluate(&s).into_iter().filter(|e| e.state == Told::Firing).map(|e| e.rule).collect();
    assert_eq!(fired, BTreeSet::from(["NotHuge".to_string(), "EitherSide".to_string(), "CountTrue".to_string()]));
}

/// A firing process instance resolves as gone exactly when its (pid, start time) is no longer
/// among the rows: a process still there is not resolved, a pid reused by a new process is.
/// The same whether the rows come sorted by pid (the sampler's order, searched) or not.
#[test]
fn gone_means_this_pid_and_start_time_are_not_among_the_rows() {
    let kids = sleepers(3);
    let pids: Vec<u32> = kids.0.iter().map(Child::id).collect();
    let mut smp = sampler();
    let first = smp.sample();
    std::thread::sleep(Duration::from_millis(50));
    let second = smp.sample();
    let s = Snapshot::derive(second.clone(), Some(&first));
    let yaml = "groups:\n  - name: g\n    rules:\n      - alert: Sleepers\n        expr: process{name=\"sleep\", cmdline=~\"sleep 300\"}.pid > 0\n";
    for reversed in [false, true] {
        let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
        let mut a = Alerting::new(set, AlertState::default());
        let told = a.evaluate(&s);
        let fired: BTreeSet<String> =
            told.iter().filter(|e| e.state == Told::Firing).map(|e| e.instance.clone()).collect();
        let reused = pids[1];
        let old = s.rows.iter().find(|r| r.pid == reused).expect("the sleeper's row");
        let old_id = format!("{}:{}", old.pid, old.start_ticks);
        assert!(fired.contains(&old_id), "{old_id} not in {fired:?}");
        // Ten seconds on, the second sleeper's pid belongs to a process started later.
        let mut next = second.clone();
        next.unix_ns += 10_000_000_000;
        for p in &mut next.processes {
            if p.pid == reused {
                p.start_ticks += 1;
            }
        }
        let mut later = Snapshot::derive(next, Some(&first));
        if reversed {
            later.rows.reverse();
        }
        let events = a.evaluate(&later);
        let said: Vec<(String, Told, Option<String>)> =
            events.iter().map(|e| (e.instance.clone(), e.state, e.reason.clone())).collect();
        let new_id = format!("{}:{}", old.pid, old.start_ticks + 1);
        assert_eq!(
            said,
            vec![(new_id, Told::Firing, None), (old_id.clone(), Told::Resolved, Some("gone".to_string()))],
            "reversed rows: {reversed}"
        );
    }
}

/// Each rule steps its own state, whatever the order of the rules' names, states restored or
/// new; two rules given one name (not something `rules::parse` allows) step the one state.
#[test]
fn each_rule_steps_its_own_state() {
    let s = live();
    let yaml = "groups:\n  - name: g\n    rules:\n      - alert: Zed\n        expr: host.cpu.busy_percent >= 0%\n        for: 30s\n      - alert: Alpha\n        expr: host.cpu.busy_percent < 0%\n      - alert: Mid\n        expr: host.cpu.busy_percent >= 0%\n";
    let kinds = |events: &[proctor_alerts::state::Event]| -> Vec<(String, Told)> {
        events.iter().map(|e| (e.rule.clone(), e.state)).collect()
    };
    // Mid fired before a restart; Zed and Alpha have no state yet.
    let mut restored = AlertState::default();
    {
        let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
        let mut a = Alerting::new(set, AlertState::default());
        a.evaluate(&s);
        restored.rules.insert("Mid".to_string(), a.state.rules["Mid"].clone());
    }
    let set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let mut a = Alerting::new(set, restored);
    assert_eq!(kinds(&a.evaluate(&s)), vec![("Zed".to_string(), Told::Pending)]);
    let mut later = sampler();
    let first = later.sample();
    std::thread::sleep(Duration::from_millis(50));
    let mut next = later.sample();
    next.unix_ns = s.sample.unix_ns + 30_000_000_000;
    let s2 = Snapshot::derive(next, Some(&first));
    assert_eq!(kinds(&a.evaluate(&s2)), vec![("Zed".to_string(), Told::Firing)]);
    let phase = |name: &str| a.state.rules[name].instances.values().map(|i| i.phase).collect::<Vec<_>>();
    assert_eq!(phase("Zed"), vec![proctor_alerts::state::Phase::Firing]);
    assert_eq!(phase("Mid"), vec![proctor_alerts::state::Phase::Firing]);
    assert_eq!(phase("Alpha"), vec![]);
    assert_eq!(a.state.rules.len(), 3);

    let mut set = rules::parse(yaml).unwrap_or_else(|d| panic!("{d:?}"));
    set.rules[1].name = "Mid".to_string();
    let mut a = Alerting::new(set, AlertState::default());
    // Zed pends; Alpha-named-Mid finds nothing; Mid fires.
    let said = kinds(&a.evaluate(&s));
    assert_eq!(said, vec![("Zed".to_string(), Told::Pending), ("Mid".to_string(), Told::Firing)]);
    // The next time, the rule before Mid (holding nowhere) resolves the one state's instance, and
    // Mid starts it again.
    let said = kinds(&a.evaluate(&s2));
    assert_eq!(
        said,
        vec![("Zed".to_string(), Told::Firing), ("Mid".to_string(), Told::Resolved), ("Mid".to_string(), Told::Firing)]
    );
}
