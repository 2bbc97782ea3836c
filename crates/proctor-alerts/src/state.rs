//! Alert states: what each rule instance is (pending, firing), the transitions one evaluation
//! makes, flapping holds, repeats and silences. All in wall-clock seconds, so the same code
//! runs live and over a recording, and the whole state (pending timers, firing alerts,
//! silences) can be saved and restored across a restart.
//!
//! A rule instance is pending once its `expr` holds, firing once it has held for `for`. A firing
//! instance resolves once its recovery condition — `clear` if the rule has one, else `expr`
//! being false — has held without a break for `for` plus `keep_firing_for`; or at once when its
//! process or group is gone. A pending instance whose `expr` stops holding goes back to
//! inactive.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::eval::Key;
use crate::rules::{NotifySettings, Rule};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Pending,
    Firing,
}

/// What a transition (or a repeat) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Told {
    Pending,
    Firing,
    Resolved,
    /// Pending that stopped holding before `for`.
    Inactive,
    /// Started flapping: held, not told again until steady.
    Flapping,
}

impl Told {
    pub fn as_str(self) -> &'static str {
        match self {
            Told::Pending => "pending",
            Told::Firing => "firing",
            Told::Resolved => "resolved",
            Told::Inactive => "inactive",
            Told::Flapping => "flapping",
        }
    }
}

/// One instance of a rule: the host's one, a process's or a group's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub labels: BTreeMap<String, String>,
    pub phase: Phase,
    /// When `expr` started holding (pending since).
    pub active_at: f64,
    pub fired_at: Option<f64>,
    /// Since when the recovery condition has held, while firing.
    pub recovering_since: Option<f64>,
    pub value: Option<f64>,
    /// When receivers were last told this instance is firing.
    pub last_told_at: Option<f64>,
}

/// Changes of one instance inside the flapping window, kept after it resolves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Flaps {
    pub changes: VecDeque<f64>,
    pub flapping: bool,
    /// The last state receivers were told (firing or resolved), to tell the steady state once a
    /// hold ends.
    pub told: Option<Told>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuleState {
    pub instances: BTreeMap<String, Instance>,
    pub flaps: BTreeMap<String, Flaps>,
    /// Instances not started because the rule had `max_instances` already.
    pub instances_refused: u64,
    pub last_eval_at: Option<f64>,
}

/// A silence: alerts whose labels match are logged but told to no one until `ends_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub id: u64,
    /// The rule's name, or `*` for every rule.
    pub rule: String,
    /// Label equalities an alert must all have.
    pub matchers: BTreeMap<String, String>,
    pub starts_at: f64,
    pub ends_at: f64,
    pub comment: String,
}

impl Silence {
    pub fn covers(&self, rule: &str, labels: &BTreeMap<String, String>, at: f64) -> bool {
        (self.rule == "*" || self.rule == rule)
            && at >= self.starts_at
            && at < self.ends_at
            && self.matchers.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// A transition, or a repeat of a firing alert, as logged and told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: f64,
    pub rule: String,
    /// The instance's id in the state (`""`, `PID:START_TICKS`, `group:NAME`).
    pub instance: String,
    pub severity: String,
    pub state: Told,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub value: Option<f64>,
    pub active_at: f64,
    pub fired_at: Option<f64>,
    /// `resolved` because the process or group is gone, `repeat` of a firing alert, …
    pub reason: Option<String>,
    pub silenced: bool,
    /// Held by a flapping hold: logged, not told.
    pub held: bool,
}

impl Event {
    /// Whether receivers hear of it (pending and inactive are logged only).
    pub fn tells(&self) -> bool {
        !self.silenced && !self.held && matches!(self.state, Told::Firing | Told::Resolved | Told::Flapping)
    }
}

/// The whole persisted state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertState {
    pub rules: BTreeMap<String, RuleState>,
    pub silences: Vec<Silence>,
    pub next_silence_id: u64,
}

/// A key's stable name in the state (`""`, `pid:start`, `group:NAME`).
pub fn key_id(key: &Key) -> String {
    match key {
        Key::One => String::new(),
        Key::Process { pid, start_ticks } => format!("{pid}:{start_ticks}"),
        Key::Group(name) => format!("group:{name}"),
    }
}

/// What one rule's evaluation gave, for [`AlertState::step`].
#[allow(missing_debug_implementations)]
pub struct Step<'a> {
    pub rule: &'a Rule,
    pub at: f64,
    /// Where `expr` holds, with `$value`.
    pub holds: &'a [(Key, Option<f64>)],
    /// Where `clear` holds, when the rule has one.
    pub clear: Option<&'a [(Key, Option<f64>)]>,
    /// Whether an instance still exists (its process or group is there).
    pub exists: &'a dyn Fn(&Key) -> bool,
    /// An instance's labels (pid, name, start time; group) besides the rule's.
    pub labels_of: &'a dyn Fn(&Key) -> BTreeMap<String, String>,
    /// `$value` rendered in the rule's unit.
    pub format_value: &'a dyn Fn(Option<f64>) -> String,
}

impl AlertState {
    /// Drops the state of rules no longer defined and of silences that ended.
    pub fn retain_rules(&mut self, names: &HashSet<&str>, now: f64) {
        self.rules.retain(|name, _| names.contains(name.as_str()));
        self.silences.retain(|s| s.ends_at > now);
    }

    pub fn silenced(&self, rule: &str, labels: &BTreeMap<String, String>, at: f64) -> bool {
        self.silences.iter().any(|s| s.covers(rule, labels, at))
    }

    /// Applies one evaluation of a rule; returns its transitions and repeats.
    pub fn step(&mut self, s: &Step<'_>, settings: &NotifySettings) -> Vec<Event> {
        // One lookup of the rule's state when it is there (every evaluation but the first): the
        // names are heap strings, and each comparison of a lookup is a cache miss once the
        // engine's data has gone cold between samples.
        if let Some(st) = self.rules.get_mut(&s.rule.name) {
            return step_rule(st, &self.silences, s, settings);
        }
        let st = self.rules.entry(s.rule.name.clone()).or_default();
        step_rule(st, &self.silences, s, settings)
    }
}

/// [`AlertState::step`] for one rule's state.
pub(crate) fn step_rule(
    st: &mut RuleState,
    silences: &[Silence],
    s: &Step<'_>,
    settings: &NotifySettings,
) -> Vec<Event> {
    let rule = s.rule;
    st.last_eval_at = Some(s.at);
    // Nothing holds and nothing is kept (no instance, no flapping history): no transition,
    // hold or repeat can come of this step, whatever the time. Most rules, most samples.
    if s.holds.is_empty() && st.instances.is_empty() && st.flaps.is_empty() {
        return Vec::new();
    }
    let mut events = Vec::new();
    // Where it holds, by instance id, sorted (the order instances start in) and each id once
    // with the last value given, as a map would keep it; looked up by binary search. A sorted
    // list, not a hash map: most rules that hold have one instance, and a map costs an
    // allocation, a random seed and a hash per lookup, every evaluation of every such rule.
    let mut holds: Vec<(String, &Key, Option<f64>)> = s.holds.iter().map(|(k, v)| (key_id(k), k, *v)).collect();
    holds.sort_by(|a, b| a.0.cmp(&b.0));
    holds.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    let holds_at = |id: &str| holds.binary_search_by(|h| h.0.as_str().cmp(id)).is_ok();
    let clear: Option<Vec<String>> = s.clear.map(|c| {
        let mut ids: Vec<String> = c.iter().map(|(k, _)| key_id(k)).collect();
        ids.sort();
        ids
    });
    let event = |state: Told, id: &str, inst: &Instance, reason: Option<&str>| Event {
        at: s.at,
        rule: rule.name.clone(),
        instance: id.to_string(),
        severity: rule.severity().to_string(),
        state,
        labels: inst.labels.clone(),
        annotations: rule
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), crate::template::render(v, &(s.format_value)(inst.value), &inst.labels)))
            .collect(),
        value: inst.value,
        active_at: inst.active_at,
        fired_at: inst.fired_at,
        reason: reason.map(str::to_string),
        silenced: silences.iter().any(|x| x.covers(&rule.name, &inst.labels, s.at)),
        held: false,
    };

    // New instances, and pending ones that have now held for `for`.
    for (id, key, value) in &holds {
        let (key, value) = (*key, *value);
        match st.instances.get_mut(id) {
            None => {
                if st.instances.len() >= settings.max_instances {
                    st.instances_refused += 1;
                    continue;
                }
                let mut labels = (s.labels_of)(key);
                labels.insert("alertname".to_string(), rule.name.clone());
                for (k, v) in &rule.labels {
                    labels.entry(k.clone()).or_insert_with(|| v.clone());
                }
                let mut inst = Instance {
                    labels,
                    phase: Phase::Pending,
                    active_at: s.at,
                    fired_at: None,
                    recovering_since: None,
                    value,
                    last_told_at: None,
                };
                if rule.for_secs <= 0.0 {
                    inst.phase = Phase::Firing;
                    inst.fired_at = Some(s.at);
                    events.push(event(Told::Firing, id, &inst, None));
                } else {
                    events.push(event(Told::Pending, id, &inst, None));
                }
                st.instances.insert(id.clone(), inst);
            }
            Some(inst) => {
                inst.value = value.or(inst.value);
                if inst.phase == Phase::Pending && s.at - inst.active_at >= rule.for_secs {
                    inst.phase = Phase::Firing;
                    inst.fired_at = Some(s.at);
                    events.push(event(Told::Firing, id, inst, None));
                }
            }
        }
    }

    // Pending instances that stopped holding; firing ones that recovered or are gone.
    let mut gone = Vec::new();
    for (id, inst) in st.instances.iter_mut() {
        let key = parse_key(id);
        let exists = key.as_ref().is_none_or(|k| (s.exists)(k));
        match inst.phase {
            Phase::Pending if !holds_at(id) => {
                events.push(event(Told::Inactive, id, inst, (!exists).then_some("gone")));
                gone.push(id.clone());
            }
            Phase::Pending => {}
            Phase::Firing => {
                if !exists {
                    events.push(event(Told::Resolved, id, inst, Some("gone")));
                    gone.push(id.clone());
                    continue;
                }
                let recovered = match &clear {
                    Some(c) => c.binary_search(id).is_ok(),
                    None => !holds_at(id),
                };
                if !recovered {
                    inst.recovering_since = None;
                    continue;
                }
                let since = *inst.recovering_since.get_or_insert(s.at);
                if s.at - since >= rule.for_secs + rule.keep_firing_for_secs {
                    events.push(event(Told::Resolved, id, inst, None));
                    gone.push(id.clone());
                }
            }
        }
    }
    for id in gone {
        st.instances.remove(&id);
    }

    // Flapping: count each instance's changes that receivers hear of (firing and resolved;
    // a pending step or a pending that never fired tells no one) inside the window; over the
    // limit, hold it. Counting the pending step too made each fire/resolve cycle three
    // changes, so the default 6 in 10 minutes held the third cycle.
    let window = settings.flap_window_secs;
    let mut extra = Vec::new();
    for e in &mut events {
        if !matches!(e.state, Told::Firing | Told::Resolved) {
            continue;
        }
        let f = st.flaps.entry(e.instance.clone()).or_default();
        f.changes.push_back(s.at);
        while f.changes.front().is_some_and(|&t| t < s.at - window) {
            f.changes.pop_front();
        }
        if !f.flapping && f.changes.len() > settings.flap_changes as usize {
            f.flapping = true;
            let mut said = e.clone();
            said.state = Told::Flapping;
            said.reason = Some(format!(
                "{} changes in {}: held until steady",
                f.changes.len(),
                proctor_vocab::units::seconds(window)
            ));
            e.held = true;
            extra.push(said);
        } else if f.flapping {
            e.held = true;
        } else if e.tells() {
            f.told = Some(e.state);
        }
    }
    // A hold ends once the window has no more than the limit; the steady state is told if
    // it differs from what was told last.
    for (id, f) in st.flaps.iter_mut() {
        while f.changes.front().is_some_and(|&t| t < s.at - window) {
            f.changes.pop_front();
        }
        if f.flapping && f.changes.len() <= settings.flap_changes as usize {
            f.flapping = false;
            let now = if st.instances.get(id).is_some_and(|i| i.phase == Phase::Firing) {
                Told::Firing
            } else {
                Told::Resolved
            };
            if f.told.unwrap_or(Told::Resolved) != now {
                let inst = st.instances.get(id).cloned().unwrap_or_else(|| Instance {
                    labels: BTreeMap::from([("alertname".to_string(), rule.name.clone())]),
                    phase: Phase::Pending,
                    active_at: s.at,
                    fired_at: None,
                    recovering_since: None,
                    value: None,
                    last_told_at: None,
                });
                let mut e = event(now, id, &inst, Some("steady after flapping"));
                e.held = false;
                f.told = Some(now);
                extra.push(e);
            }
        }
    }
    st.flaps.retain(|_, f| f.flapping || !f.changes.is_empty());
    events.extend(extra);

    // Repeats: a firing alert told longer ago than the repeat interval is told again.
    let repeat = rule.repeat_interval_secs.unwrap_or(settings.repeat_interval_secs);
    for (id, inst) in st.instances.iter_mut() {
        if inst.phase != Phase::Firing {
            continue;
        }
        let flapping = st.flaps.get(id).is_some_and(|f| f.flapping);
        match inst.last_told_at {
            None => inst.last_told_at = Some(s.at),
            Some(last) if s.at - last >= repeat && !flapping => {
                inst.last_told_at = Some(s.at);
                events.push(event(Told::Firing, id, inst, Some("repeat")));
            }
            _ => {}
        }
    }
    events
}

fn parse_key(id: &str) -> Option<Key> {
    if id.is_empty() {
        return None;
    }
    if let Some(name) = id.strip_prefix("group:") {
        return Some(Key::Group(name.into()));
    }
    let (pid, start) = id.split_once(':')?;
    Some(Key::Process { pid: pid.parse().ok()?, start_ticks: start.parse().ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules;

    fn rule(extra: &str) -> rules::RuleSet {
        let text = format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Busy\n        expr: host.cpu.busy_percent > 90%\n{extra}"
        );
        rules::parse(&text).unwrap_or_else(|d| panic!("{d:?}"))
    }

    fn run(
        state: &mut AlertState,
        set: &rules::RuleSet,
        at: f64,
        holds: bool,
        clear: Option<bool>,
    ) -> Vec<(Told, bool)> {
        let h = if holds { vec![(Key::One, Some(95.0))] } else { vec![] };
        let c = clear.map(|c| if c { vec![(Key::One, None)] } else { vec![] });
        let step = Step {
            rule: &set.rules[0],
            at,
            holds: &h,
            clear: c.as_deref(),
            exists: &|_| true,
            labels_of: &|_| BTreeMap::new(),
            format_value: &|v| format!("{v:?}"),
        };
        state.step(&step, &set.notify).into_iter().map(|e| (e.state, e.tells())).collect()
    }

    /// Instances are found among where a rule holds whatever order the keys come in: the
    /// holds are sorted by id before they are searched, and an id given twice keeps its last
    /// value (as the map they were once collected into did).
    #[test]
    fn holds_in_any_order_find_their_instances() {
        let text = "groups:\n  - name: g\n    rules:\n      - alert: Big\n        expr: process.rss_bytes > 1GiB\n        for: 30s\n";
        let set = rules::parse(text).unwrap_or_else(|d| panic!("{d:?}"));
        let p = |pid: u32| Key::Process { pid, start_ticks: 7 };
        let step = |st: &mut AlertState, at: f64, holds: &[(Key, Option<f64>)]| {
            let step = Step {
                rule: &set.rules[0],
                at,
                holds,
                clear: None,
                exists: &|_| true,
                labels_of: &|_| BTreeMap::new(),
                format_value: &|v| format!("{v:?}"),
            };
            let mut told: Vec<(Told, String)> =
                st.step(&step, &set.notify).into_iter().map(|e| (e.state, e.instance)).collect();
            told.sort_by(|a, b| a.1.cmp(&b.1));
            told
        };
        let mut st = AlertState::default();
        let started =
            step(&mut st, 0.0, &[(p(30), Some(1.0)), (p(5), Some(2.0)), (p(200), Some(3.0)), (p(5), Some(4.0))]);
        assert_eq!(
            started,
            vec![(Told::Pending, "200:7".into()), (Told::Pending, "30:7".into()), (Told::Pending, "5:7".into())]
        );
        let values: Vec<(String, Option<f64>)> =
            st.rules["Big"].instances.iter().map(|(id, i)| (id.clone(), i.value)).collect();
        assert_eq!(values, vec![("200:7".into(), Some(3.0)), ("30:7".into(), Some(1.0)), ("5:7".into(), Some(4.0))]);
        // 30 stops holding; 200 and 5, given out of order, still hold: only 30 goes.
        assert_eq!(
            step(&mut st, 10.0, &[(p(200), Some(3.0)), (p(5), Some(4.0))]),
            vec![(Told::Inactive, "30:7".into())]
        );
        assert_eq!(step(&mut st, 20.0, &[(p(5), Some(4.0)), (p(200), Some(3.0))]), vec![]);
        assert_eq!(
            step(&mut st, 30.0, &[(p(200), Some(3.0)), (p(5), Some(4.0))]),
            vec![(Told::Firing, "200:7".into()), (Told::Firing, "5:7".into())]
        );
    }

    #[test]
    fn pending_then_firing_after_for_then_resolved_after_for_of_recovery() {
        let set = rule("        for: 30s\n");
        let mut st = AlertState::default();
        assert_eq!(run(&mut st, &set, 0.0, true, None), vec![(Told::Pending, false)]);
        assert_eq!(run(&mut st, &set, 29.0, true, None), vec![]);
        assert_eq!(run(&mut st, &set, 30.0, true, None), vec![(Told::Firing, true)]);
        // Recovery must hold for `for` too: a dip is not a resolve.
        assert_eq!(run(&mut st, &set, 40.0, false, None), vec![]);
        assert_eq!(run(&mut st, &set, 50.0, true, None), vec![]);
        assert_eq!(run(&mut st, &set, 60.0, false, None), vec![]);
        assert_eq!(run(&mut st, &set, 90.0, false, None), vec![(Told::Resolved, true)]);
        // A pending that stops holding goes back to inactive, logged only.
        assert_eq!(run(&mut st, &set, 100.0, true, None), vec![(Told::Pending, false)]);
        assert_eq!(run(&mut st, &set, 101.0, false, None), vec![(Told::Inactive, false)]);
    }

    #[test]
    fn clear_gives_hysteresis_and_keep_firing_for_adds_to_it() {
        let set = rule("        clear: host.cpu.busy_percent < 50%\n        keep_firing_for: 10s\n");
        let mut st = AlertState::default();
        assert_eq!(run(&mut st, &set, 0.0, true, Some(false)), vec![(Told::Firing, true)]);
        // Below 90 but not below 50: still firing.
        assert_eq!(run(&mut st, &set, 5.0, false, Some(false)), vec![]);
        assert_eq!(run(&mut st, &set, 100.0, false, Some(false)), vec![]);
        assert_eq!(run(&mut st, &set, 101.0, false, Some(true)), vec![]);
        assert_eq!(run(&mut st, &set, 110.0, false, Some(true)), vec![]);
        assert_eq!(run(&mut st, &set, 111.0, false, Some(true)), vec![(Told::Resolved, true)]);
    }

    #[test]
    fn flapping_is_held_and_said_once_then_the_steady_state_is_told() {
        let set = rule("notify:\n  flapping: 4/1m\n");
        let mut st = AlertState::default();
        let mut told = Vec::new();
        for i in 0..10 {
            told.extend(run(&mut st, &set, f64::from(i) * 5.0, i % 2 == 0, None));
        }
        let heard: Vec<Told> = told.iter().filter(|(_, t)| *t).map(|(s, _)| *s).collect();
        // Firing, resolved, firing, resolved; the fifth change starts the hold, said once.
        assert_eq!(heard, vec![Told::Firing, Told::Resolved, Told::Firing, Told::Resolved, Told::Flapping]);
        // Steady (still resolved at 45 s) for a minute: the hold ends; resolved was told last,
        // so nothing more is said.
        let after: Vec<(Told, bool)> =
            (0..20).flat_map(|i| run(&mut st, &set, 50.0 + f64::from(i) * 5.0, false, None)).collect();
        assert!(after.iter().all(|(_, t)| !t), "{after:?}");
        assert!(!st.rules["Busy"].flaps.values().any(|f| f.flapping));
    }

    #[test]
    fn only_what_receivers_hear_counts_toward_flapping() {
        // `for: 10s`: every cycle is pending, firing, then resolved after 10 s of recovery.
        let set = rule("        for: 10s\nnotify:\n  flapping: 4/1m\n");
        let mut st = AlertState::default();
        let mut told = Vec::new();
        for cycle in 0..3 {
            let base = f64::from(cycle) * 30.0;
            for (at, holds) in [(0.0, true), (10.0, true), (15.0, false), (25.0, false)] {
                told.extend(run(&mut st, &set, base + at, holds, None));
            }
        }
        let heard: Vec<Told> = told.iter().filter(|(_, t)| *t).map(|(s, _)| *s).collect();
        // Two whole cycles are four changes, the limit; the third firing is the fifth.
        assert_eq!(heard[..5], [Told::Firing, Told::Resolved, Told::Firing, Told::Resolved, Told::Flapping]);
        assert!(told.iter().any(|(s, _)| *s == Told::Pending), "the cycles did go through pending");
    }

    /// A step with nothing holding and no instance is cut short, but not while a flapping
    /// history is kept: a hold that started on a resolve must still end, on time alone, with
    /// the steady state told (firing was told last).
    #[test]
    fn a_quiet_rule_still_ends_a_flapping_hold_on_schedule() {
        let set = rule("notify:\n  flapping: 3/1m\n");
        let mut st = AlertState::default();
        let mut told = Vec::new();
        for i in 0..4 {
            told.extend(run(&mut st, &set, f64::from(i) * 5.0, i % 2 == 0, None));
        }
        // Firing, resolved, firing told; the fourth change (a resolve) starts the hold.
        let heard: Vec<Told> = told.iter().filter(|(_, t)| *t).map(|(s, _)| *s).collect();
        assert_eq!(heard, vec![Told::Firing, Told::Resolved, Told::Firing, Told::Flapping]);
        assert!(st.rules["Busy"].instances.is_empty());
        let mut after = Vec::new();
        for i in 0..20 {
            let at = 20.0 + f64::from(i) * 5.0;
            let said = run(&mut st, &set, at, false, None);
            after.extend(said.into_iter().map(|s| (at, s)));
            // Each step is recorded, quiet or not.
            assert_eq!(st.rules["Busy"].last_eval_at, Some(at));
        }
        // The window holds no more than 3 changes once the one at 0 s is out of it (at 65 s).
        assert_eq!(after, vec![(65.0, (Told::Resolved, true))]);
        assert!(st.rules["Busy"].flaps.is_empty(), "{:?}", st.rules["Busy"].flaps);
    }

    #[test]
    fn silences_log_but_do_not_tell_and_repeats_come_after_the_interval() {
        let set = rule("        repeat_interval: 1m\n");
        let mut st = AlertState::default();
        st.silences.push(Silence {
            id: 1,
            rule: "Busy".into(),
            matchers: BTreeMap::new(),
            starts_at: 0.0,
            ends_at: 10.0,
            comment: String::new(),
        });
        assert_eq!(run(&mut st, &set, 0.0, true, None), vec![(Told::Firing, false)]);
        assert_eq!(run(&mut st, &set, 59.0, true, None), vec![]);
        assert_eq!(run(&mut st, &set, 60.0, true, None), vec![(Told::Firing, true)]);
        assert_eq!(run(&mut st, &set, 100.0, true, None), vec![]);
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let set = rule("        for: 1m\n");
        let mut st = AlertState::default();
        run(&mut st, &set, 0.0, true, None);
        let text = serde_json::to_string(&st).expect("json");
        let mut back: AlertState = serde_json::from_str(&text).expect("back");
        assert_eq!(back, st);
        // Restored, the pending timer goes on from where it was.
        assert_eq!(run(&mut back, &set, 60.0, true, None), vec![(Told::Firing, true)]);
    }
}
