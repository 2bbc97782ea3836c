//! The alerting loop. [`Alerting`] evaluates a rule set over one snapshot and steps the states
//! (no I/O: `proctor alerts test` runs it over a recording). [`Engine`] runs it beside a live
//! agent on a thread of its own for `proctor serve`: it waits for each new snapshot (skipping
//! any it fell behind on, never holding the agent up), appends transitions to the JSON-lines
//! log, hands notifications to the delivery threads, saves the state, and publishes a status
//! document for `/api/v1/alerts` and `/metrics`. Rules reload on request (SIGHUP); a bad file
//! keeps the old rules and says why.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_agent::{Shared, Snapshot};
use proctor_vocab::units::Unit;
use serde::Serialize;

use crate::deliver::{Delivery, DeliveryConfig, Payload, ReceiverStats};
use crate::eval::{Evaluator, Key};
use crate::notify::{self, Limiter, Notification};
use crate::rules::{self, Receiver, Rule, RuleSet};
use crate::state::{AlertState, Event, Phase, RuleState, Silence, Step, Told};

/// The rules' names in name order, each with its rule's index, in one buffer: read in one
/// sweep, not from each rule and each name's own allocation.
#[derive(Debug, Default)]
struct ByName {
    text: String,
    /// (end of the name in `text`, the rule's index)
    names: Vec<(usize, usize)>,
}

impl ByName {
    fn new(rules: &[Rule]) -> ByName {
        let mut order: Vec<usize> = (0..rules.len()).collect();
        order.sort_by(|&a, &b| rules[a].name.cmp(&rules[b].name));
        let mut by = ByName::default();
        for i in order {
            by.text.push_str(&rules[i].name);
            by.names.push((by.text.len(), i));
        }
        by
    }

    fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        let starts = std::iter::once(0).chain(self.names.iter().map(|&(end, _)| end));
        starts.zip(&self.names).map(|(start, &(end, i))| (self.text.get(start..end).unwrap_or(""), i))
    }
}

/// Each rule's state in the rules' order (`None` where it has none, or shares its name with a
/// rule before it), from one walk of `states` in name order.
fn states_in_order<'m>(
    states: &'m mut BTreeMap<String, RuleState>,
    rules: usize,
    by_name: &ByName,
) -> Vec<Option<&'m mut RuleState>> {
    let mut found: Vec<Option<&mut RuleState>> = Vec::with_capacity(rules);
    found.resize_with(rules, || None);
    let mut walk = states.iter_mut().peekable();
    for (name, i) in by_name.iter() {
        // One comparison per key passed.
        while let Some(order) = walk.peek().map(|(k, _)| k.as_str().cmp(name)) {
            match order {
                std::cmp::Ordering::Less => {
                    walk.next();
                }
                std::cmp::Ordering::Equal => {
                    if let (Some(slot), Some((_, st))) = (found.get_mut(i), walk.next()) {
                        *slot = Some(st);
                    }
                    break;
                }
                std::cmp::Ordering::Greater => break,
            }
        }
    }
    found
}

/// A rule set with its evaluator, states and limiter: one evaluation per snapshot.
pub struct Alerting {
    pub set: RuleSet,
    evaluator: Evaluator,
    pub state: AlertState,
    pub limiter: Limiter,
    pub evaluations: u64,
    pub eval_cpu_ns_total: u64,
    pub last_eval_cpu_ns: u64,
    /// The rules in name order, the order of their states.
    by_name: ByName,
}

impl std::fmt::Debug for Alerting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerting")
            .field("rules", &self.set.rules.len())
            .field("evaluations", &self.evaluations)
            .finish()
    }
}

/// `$value` in the unit of the series it came from.
pub fn format_value(unit: Option<Unit>, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "unknown".to_string(),
        (Some(Unit::Percent), Some(v)) => format!("{} %", proctor_vocab::units::percent(v)),
        (Some(u), Some(v)) if u.is_numeric() => u.format(Some(v)),
        (_, Some(v)) => {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        }
    }
}

impl Alerting {
    /// Takes the set's plan for its evaluator (the rules keep their compiled programs).
    pub fn new(mut set: RuleSet, state: AlertState) -> Alerting {
        let plan = std::mem::take(&mut set.plan);
        let users = proctor_procfs::system::read_users(Path::new("/etc/passwd"));
        let evaluator = Evaluator::new(plan, users);
        let limiter = Limiter::new(set.notify.rate_limit, set.notify.rate_window_secs);
        let mut state = state;
        let names: HashSet<&str> = set.rules.iter().map(|r| r.name.as_str()).collect();
        state.retain_rules(&names, 0.0);
        let by_name = ByName::new(&set.rules);
        Alerting { set, evaluator, state, limiter, evaluations: 0, eval_cpu_ns_total: 0, last_eval_cpu_ns: 0, by_name }
    }

    /// Evaluates every rule over `s` at its sample time; returns the transitions and repeats.
    pub fn evaluate(&mut self, s: &Snapshot) -> Vec<Event> {
        let cpu0 = proctor_procfs::system::thread_cpu_ns();
        let frame = self.evaluator.frame(s);
        let at = frame.time;
        // Whether an instance's process or group is still there: asked only of rules that have
        // instances, so the indexes are built on the first question, not every evaluation.
        // Rows come sorted by pid (the sampler lists /proc so): a binary search then, a set
        // only for rows that are not.
        let pids_sorted = std::cell::OnceCell::new();
        let present_pids: std::cell::OnceCell<HashSet<(u32, u64)>> = std::cell::OnceCell::new();
        let groups: std::cell::OnceCell<HashSet<&str>> = std::cell::OnceCell::new();
        let exists = |k: &Key| match k {
            Key::One => true,
            Key::Process { pid, start_ticks } => {
                if *pids_sorted.get_or_init(|| s.rows.windows(2).all(|w| w[0].pid < w[1].pid)) {
                    s.row(*pid).is_some_and(|r| r.start_ticks == *start_ticks)
                } else {
                    present_pids
                        .get_or_init(|| s.rows.iter().map(|r| (r.pid, r.start_ticks)).collect())
                        .contains(&(*pid, *start_ticks))
                }
            }
            Key::Group(name) => groups
                .get_or_init(|| {
                    s.groups
                        .as_ref()
                        .map(|g| g.groups.iter().map(|(row, _)| row.name.as_str()).collect())
                        .unwrap_or_default()
                })
                .contains(name.as_ref()),
        };
        let ticks = s.sample.clock_ticks_per_sec.max(1) as f64;
        let boot = s.host.boot_time_unix_secs;
        let labels_of = |k: &Key| -> BTreeMap<String, String> {
            match k {
                Key::One => BTreeMap::new(),
                Key::Process { pid, start_ticks } => {
                    let mut l = BTreeMap::from([("pid".to_string(), pid.to_string())]);
                    if let Some(r) = s.row(*pid) {
                        l.insert("name".to_string(), r.comm.to_string());
                    }
                    if let Some(b) = boot {
                        l.insert("start".to_string(), notify::rfc3339(b as f64 + *start_ticks as f64 / ticks));
                    }
                    l
                }
                Key::Group(name) => BTreeMap::from([("group".to_string(), name.to_string())]),
            }
        };
        let mut events = Vec::new();
        let evaluator = &mut self.evaluator;
        let notify = &self.set.notify;
        let AlertState { rules: states, silences, .. } = &mut self.state;
        let silences: &[Silence] = silences;
        let mut step_one = |rule: &Rule, st: &mut RuleState| {
            let holds = evaluator.run(&rule.expr, &frame).holds;
            let clear = rule.clear.as_ref().map(|c| evaluator.run(c, &frame).holds);
            let unit = rule.expr.value_unit;
            let fmt = move |v: Option<f64>| format_value(unit, v);
            let step = Step {
                rule,
                at,
                holds: &holds,
                clear: clear.as_deref(),
                exists: &exists,
                labels_of: &labels_of,
                format_value: &fmt,
            };
            events.extend(crate::state::step_rule(st, silences, &step, notify));
        };
        // Each rule's state, found in one walk of the map in name order: a lookup per rule
        // compares its name with several keys, two heap strings each, all cache misses once the
        // engine's data has gone cold between samples. A rule without a state yet gets one first
        // (as its first step would give it).
        let mut found = states_in_order(states, self.set.rules.len(), &self.by_name);
        if found.iter().any(Option::is_none) {
            let missing: Vec<usize> = found.iter().enumerate().filter(|(_, f)| f.is_none()).map(|(i, _)| i).collect();
            drop(found);
            for i in missing {
                let name = &self.set.rules[i].name;
                if !states.contains_key(name) {
                    states.insert(name.clone(), RuleState::default());
                }
            }
            found = states_in_order(states, self.set.rules.len(), &self.by_name);
        }
        if found.iter().all(Option::is_some) {
            for (rule, st) in self.set.rules.iter().zip(found.into_iter().flatten()) {
                step_one(rule, st);
            }
        } else {
            // Two rules of one name (a set not from `rules::parse`) share a state: by name.
            drop(found);
            for rule in &self.set.rules {
                let st = states.entry(rule.name.clone()).or_default();
                step_one(rule, st);
            }
        }
        let spent = proctor_procfs::system::thread_cpu_ns().saturating_sub(cpu0);
        self.evaluations += 1;
        self.last_eval_cpu_ns = spent;
        self.eval_cpu_ns_total += spent;
        events
    }

    /// The firing alerts Alertmanager should hear of now: every one not silenced. A flapping
    /// hold is not applied here: Alertmanager groups, inhibits and throttles by itself, and an
    /// alert it is not sent again it resolves on its own (`resolve_timeout`), so it must see
    /// every firing alert, as Prometheus sends it every one.
    pub fn firing_events(&self, at: f64) -> Vec<Event> {
        let mut out = Vec::new();
        for rule in &self.set.rules {
            let Some(st) = self.state.rules.get(&rule.name) else { continue };
            for (id, inst) in &st.instances {
                if inst.phase != Phase::Firing || self.state.silenced(&rule.name, &inst.labels, at) {
                    continue;
                }
                let unit = rule.expr.value_unit;
                out.push(Event {
                    at,
                    rule: rule.name.clone(),
                    instance: id.clone(),
                    severity: rule.severity().to_string(),
                    state: Told::Firing,
                    labels: inst.labels.clone(),
                    annotations: rule
                        .annotations
                        .iter()
                        .map(|(k, v)| {
                            (k.clone(), crate::template::render(v, &format_value(unit, inst.value), &inst.labels))
                        })
                        .collect(),
                    value: inst.value,
                    active_at: inst.active_at,
                    fired_at: inst.fired_at,
                    reason: None,
                    silenced: false,
                    held: false,
                });
            }
        }
        out
    }

    /// Where the statsd values the rules name come from.
    pub fn set_statsd(&mut self, source: Option<crate::eval::StatsdSource>) {
        self.evaluator.set_statsd(source);
    }

    /// Whether any rule names a statsd value.
    pub fn uses_statsd(&self) -> bool {
        !self.evaluator.plan().statsd_refs().is_empty()
    }

    pub fn eval_stats(&self) -> &crate::eval::EvalStats {
        &self.evaluator.stats
    }
}

/// Settings for a live engine.
#[derive(Clone)]
pub struct EngineConfig {
    pub rules_path: PathBuf,
    /// Where `events.jsonl` and `state.json` live (`DATA/alerts`).
    pub dir: PathBuf,
    /// Receivers from `serve`'s flags, added to the file's.
    pub extra_receivers: Vec<Receiver>,
    pub host: String,
    /// The dashboard's address, as Alertmanager's `generatorURL`.
    pub generator_url: String,
    pub delivery: DeliveryConfig,
    /// The statsd server's last flush (`serve --statsd`), for `statsd.*` series.
    pub statsd: Option<crate::eval::StatsdSource>,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("rules_path", &self.rules_path)
            .field("dir", &self.dir)
            .field("extra_receivers", &self.extra_receivers)
            .field("statsd", &self.statsd.is_some())
            .finish_non_exhaustive()
    }
}

/// `PROCTOR_ALERT_JSON` is set only for a webhook body of at most this many bytes: far below
/// the kernel's 128 KiB limit on one environment string and its limit on argv and environment
/// together. The events are always on the command's stdin.
pub const EXEC_JSON_ENV_MAX: usize = 32 * 1024;

/// What a command (`--alert-exec`) gets: the first event in `PROCTOR_ALERT_*` variables, the
/// count, and every event on stdin as a JSON line.
pub fn exec_payload(n: &Notification, host: &str) -> Payload {
    let Some(first) = n.events.first() else { return Payload { body: Vec::new(), env: Vec::new() } };
    let mut env = vec![
        ("PROCTOR_ALERT_RULE".to_string(), first.rule.clone()),
        ("PROCTOR_ALERT_STATE".to_string(), first.state.as_str().to_string()),
        ("PROCTOR_ALERT_SEVERITY".to_string(), first.severity.clone()),
        ("PROCTOR_ALERT_SUMMARY".to_string(), notify::headline(n)),
        ("PROCTOR_ALERT_VALUE".to_string(), first.value.map(|v| v.to_string()).unwrap_or_default()),
        ("PROCTOR_ALERT_LABELS".to_string(), serde_json::to_string(&first.labels).unwrap_or_default()),
        ("PROCTOR_ALERT_COUNT".to_string(), (n.events.len() as u64 + n.omitted).to_string()),
    ];
    // The events go on stdin; the environment (whose size the kernel limits with argv's,
    // `E2BIG`) keeps the whole body only while it is small.
    let json = notify::webhook_body(n, host);
    if json.len() <= EXEC_JSON_ENV_MAX {
        env.push(("PROCTOR_ALERT_JSON".to_string(), String::from_utf8_lossy(&json).into_owned()));
    }
    Payload { body: notify::exec_lines(n), env }
}

/// The log is cut to a second file past this size, so it never grows without bound.
pub const LOG_MAX_BYTES: u64 = 16 << 20;

/// A silence asked for through the API.
#[derive(Debug, Clone, PartialEq)]
pub struct SilenceRequest {
    pub rule: String,
    pub matchers: BTreeMap<String, String>,
    pub duration_secs: f64,
    pub comment: String,
}

/// What `/api/v1/alerts` answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AlertsOut {
    /// Whether this agent runs rules (`serve --rules`); `false` answers carry nothing else.
    pub enabled: bool,
    pub rules_file: String,
    pub loaded_at: Option<String>,
    /// Why the last reload kept the old rules, if it did.
    pub reload_error: Option<String>,
    pub evaluations_total: u64,
    pub last_evaluation_at: Option<String>,
    pub last_evaluation_cpu_seconds: f64,
    pub evaluation_cpu_seconds_total: f64,
    /// Snapshots the engine did not evaluate because it was still busy with an earlier one.
    pub snapshots_skipped_total: u64,
    /// Process rows whose selectors were matched afresh (new or changed processes), and rows
    /// whose matches were kept from the sample before.
    pub selector_rows_matched_total: u64,
    pub selector_rows_reused_total: u64,
    pub firing: usize,
    pub pending: usize,
    pub rules: Vec<RuleOut>,
    pub silences: Vec<SilenceOut>,
    pub receivers: Vec<ReceiverStats>,
    pub notifications_total: u64,
    pub coalesced_total: u64,
    pub held_by_rate_limit: usize,
    pub log: String,
    pub log_errors_total: u64,
    pub last_log_error: Option<String>,
    pub state_errors_total: u64,
    /// What the rules cannot see here (statsd series without a statsd server).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleOut {
    pub name: String,
    pub group: String,
    pub severity: String,
    pub expr: String,
    pub clear: Option<String>,
    pub for_secs: f64,
    pub keep_firing_for_secs: f64,
    /// `firing` if any instance fires, else `pending` if any is pending, else `inactive`.
    pub state: &'static str,
    pub instances: Vec<InstanceOut>,
    pub instances_refused_total: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstanceOut {
    pub labels: BTreeMap<String, String>,
    pub state: &'static str,
    pub active_at: String,
    pub fired_at: Option<String>,
    pub value: Option<f64>,
    pub value_text: String,
    pub silenced: bool,
    pub flapping: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SilenceOut {
    pub id: u64,
    pub rule: String,
    pub matchers: BTreeMap<String, String>,
    pub starts_at: String,
    pub ends_at: String,
    pub comment: String,
}

impl SilenceOut {
    pub fn of(s: &Silence) -> SilenceOut {
        SilenceOut {
            id: s.id,
            rule: s.rule.clone(),
            matchers: s.matchers.clone(),
            starts_at: notify::rfc3339(s.starts_at),
            ends_at: notify::rfc3339(s.ends_at),
            comment: s.comment.clone(),
        }
    }
}

/// Silences in force and waiting, together, are at most this many.
pub const MAX_SILENCES: usize = 1_000;
/// A silence's rule, matchers and comment are at most this many bytes together.
pub const MAX_SILENCE_BYTES: usize = 4 << 10;

#[derive(Debug, Default)]
struct Waiting {
    new: Vec<Silence>,
    in_force: usize,
}

/// What the HTTP side holds: the published status and a way in for silences and reloads.
#[derive(Debug, Default)]
pub struct Handle {
    status: RwLock<Arc<AlertsOut>>,
    /// Silences waiting to be applied, and how many are in force: the loop moves the first into
    /// its state and sets the second under this one lock, so the cap holds across that move.
    silences: Mutex<Waiting>,
    /// Silences to end before their time (ids), applied with the new ones.
    expire: Mutex<Vec<u64>>,
    next_silence: AtomicU64,
    reload: AtomicBool,
    stop: AtomicBool,
    /// Wakes the loop early (a stop, a reload, a silence).
    poke: (Mutex<bool>, std::sync::Condvar),
}

impl Handle {
    /// The latest status; the lock is held to clone the `Arc`.
    pub fn status(&self) -> Arc<AlertsOut> {
        Arc::clone(&self.status.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Adds a silence (applied at the next evaluation, and said in the status then).
    pub fn silence(&self, req: SilenceRequest) -> Result<SilenceOut, String> {
        if req.rule.is_empty() {
            return Err("name a rule, or `*` for all".to_string());
        }
        if !(req.duration_secs > 0.0 && req.duration_secs <= 366.0 * 86400.0) {
            return Err("a silence lasts more than 0 and at most a year".to_string());
        }
        let bytes =
            req.rule.len() + req.comment.len() + req.matchers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        if req.matchers.len() > 32 || bytes > MAX_SILENCE_BYTES {
            return Err(format!(
                "a silence's rule, matchers and comment are at most {MAX_SILENCE_BYTES} bytes together and 32 matchers; this one is {bytes} bytes and {} matchers",
                req.matchers.len()
            ));
        }
        let known = &self.status().rules;
        if req.rule != "*" && !known.iter().any(|r| r.name == req.rule) {
            let names: Vec<&str> = known.iter().map(|r| r.name.as_str()).collect();
            return Err(format!("no rule named {:?}; rules: {}", req.rule, names.join(", ")));
        }
        let now = unix_now();
        let silence = Silence {
            id: self.next_silence.fetch_add(1, Ordering::Relaxed),
            rule: req.rule,
            matchers: req.matchers,
            starts_at: now,
            ends_at: now + req.duration_secs,
            comment: req.comment,
        };
        let out = SilenceOut::of(&silence);
        let mut pending = self.silences.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.in_force + pending.new.len() >= MAX_SILENCES {
            return Err(format!(
                "{MAX_SILENCES} silences are in force or waiting, the most there may be: end one (DELETE /api/v1/alerts/silences/ID) or wait for one to end"
            ));
        }
        pending.new.push(silence);
        drop(pending);
        self.wake();
        Ok(out)
    }

    /// Ends silence `id` now (as `amtool silence expire` does): it stops holding anything at
    /// the next evaluation, and is gone from the status then. An id neither in force nor
    /// waiting to be applied is refused, naming the ones that are.
    pub fn expire(&self, id: u64) -> Result<SilenceOut, String> {
        let found = self.status().silences.iter().find(|s| s.id == id).cloned().or_else(|| {
            let pending = self.silences.lock().unwrap_or_else(PoisonError::into_inner);
            pending.new.iter().find(|s| s.id == id).map(SilenceOut::of)
        });
        let Some(mut out) = found else {
            let ids: Vec<String> = self.status().silences.iter().map(|s| s.id.to_string()).collect();
            return Err(format!(
                "no silence {id} in force; silences: {}",
                if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
            ));
        };
        let mut expire = self.expire.lock().unwrap_or_else(PoisonError::into_inner);
        if expire.len() >= 1000 {
            return Err("too many silences waiting to be ended".to_string());
        }
        expire.push(id);
        drop(expire);
        self.wake();
        out.ends_at = notify::rfc3339(unix_now());
        Ok(out)
    }

    /// The loop's side: moves the waiting silences into `state`, ends those asked to end,
    /// drops those past their end and counts the rest, all under the lock new ones are counted
    /// under. Whether anything changed.
    fn apply_silences(&self, state: &mut AlertState, now: f64) -> bool {
        let mut pending = self.silences.lock().unwrap_or_else(PoisonError::into_inner);
        let expire: Vec<u64> = std::mem::take(&mut *self.expire.lock().unwrap_or_else(PoisonError::into_inner));
        let changed = !pending.new.is_empty();
        for s in pending.new.drain(..) {
            state.next_silence_id = state.next_silence_id.max(s.id + 1);
            state.silences.push(s);
        }
        for s in state.silences.iter_mut().filter(|s| expire.contains(&s.id)) {
            s.ends_at = s.ends_at.min(now);
        }
        let before = state.silences.len();
        state.silences.retain(|s| s.ends_at > now);
        pending.in_force = state.silences.len();
        changed || before != state.silences.len()
    }

    /// Asks the loop to read the rules file again (SIGHUP).
    pub fn reload(&self) {
        self.reload.store(true, Ordering::Relaxed);
        self.wake();
    }

    fn wake(&self) {
        let (lock, cv) = &self.poke;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        cv.notify_all();
    }
}

pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A running engine.
#[derive(Debug)]
pub struct Engine {
    handle: Arc<Handle>,
    /// Its result: the lines saying what delivery dropped at the stop.
    thread: Option<JoinHandle<Vec<String>>>,
}

/// Reads and compiles the rules file, every mistake said with its line and column.
/// A rules file's text: a regular file (a FIFO at `--rules` would hold a reload forever) of at
/// most [`proctor_groups::limits::MAX_FILE_BYTES`].
pub fn read_rules_text(path: &Path) -> Result<String, String> {
    const MOST: u64 = proctor_groups::limits::MAX_FILE_BYTES;
    proctor_procfs::regular::read_text(path, MOST).map_err(|e| match e {
        proctor_procfs::regular::FileError::TooBig { .. } => {
            format!("{} is over {} KiB: not a rules file proctor reads", path.display(), MOST >> 10)
        }
        other => other.to_string(),
    })
}

pub fn load_rules(path: &Path) -> Result<RuleSet, String> {
    let text = read_rules_text(path)?;
    rules::parse(&text).map_err(|diags| {
        let mut msg = format!("{}: {} mistake{}", path.display(), diags.len(), if diags.len() == 1 { "" } else { "s" });
        for d in diags {
            msg.push_str(&format!("\n  {d}"));
        }
        msg
    })
}

impl Engine {
    /// Loads the rules (a mistake is an error here: nothing runs yet), restores the saved
    /// state, starts delivery and the loop.
    pub fn start(shared: Arc<Shared>, config: EngineConfig) -> Result<Engine, String> {
        let set = load_rules(&config.rules_path)?;
        std::fs::create_dir_all(&config.dir).map_err(|e| format!("cannot create {}: {e}", config.dir.display()))?;
        let (state, state_note) = load_state(&config.dir.join("state.json"));
        let handle = Arc::new(Handle::default());
        handle.next_silence.store(state.next_silence_id.max(1), Ordering::Relaxed);
        handle.silences.lock().unwrap_or_else(PoisonError::into_inner).in_force = state.silences.len();
        let mut looped = Loop::new(set, state, config, Arc::clone(&handle));
        if let Some(note) = state_note {
            looped.out.last_log_error = Some(note);
        }
        looped.publish(None);
        let thread = std::thread::Builder::new()
            .name("alerts".to_string())
            .spawn(move || looped.run(&shared))
            .map_err(|e| format!("cannot start the alerts thread: {e}"))?;
        Ok(Engine { handle, thread: Some(thread) })
    }

    pub fn handle(&self) -> Arc<Handle> {
        Arc::clone(&self.handle)
    }

    /// Stops the loop and its delivery (bounded by the delivery's shutdown grace); returns a
    /// line for each receiver that lost notifications at the stop, for the log.
    pub fn stop(mut self) -> Vec<String> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Vec<String> {
        self.handle.stop.store(true, Ordering::Relaxed);
        self.handle.wake();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(lines)) => lines,
            Some(Err(_)) => vec!["alerts: the alerts thread panicked".to_string()],
            None => Vec::new(),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The most of `state.json` read back: far above any state the engine's caps let it write.
const STATE_MAX_BYTES: u64 = 64 << 20;

/// The saved state. Opened as every data-directory file is (proctor-procfs's `regular`): a
/// FIFO there once made `serve` wait for ever before it listened.
fn load_state(path: &Path) -> (AlertState, Option<String>) {
    match proctor_procfs::regular::read(path, STATE_MAX_BYTES) {
        Ok(bytes) => match serde_json::from_slice::<AlertState>(&bytes) {
            Ok(state) => (state, None),
            Err(e) => {
                // Kept aside, not lost: a person can read what it held.
                let aside = path.with_extension("json.corrupt");
                let _ = std::fs::rename(path, &aside);
                (
                    AlertState::default(),
                    Some(format!(
                        "{}: unreadable ({e}); set aside as {}, starting afresh",
                        path.display(),
                        aside.display()
                    )),
                )
            }
        },
        Err(e) if e.is_not_found() => (AlertState::default(), None),
        Err(e) => (AlertState::default(), Some(format!("{e}; starting afresh"))),
    }
}

struct Loop {
    alerting: Alerting,
    config: EngineConfig,
    handle: Arc<Handle>,
    delivery: Delivery,
    receivers: Vec<Receiver>,
    out: AlertsOut,
    loaded_at: f64,
    last_am_at: f64,
    notifications_total: u64,
    skipped: u64,
}

impl Loop {
    fn new(set: RuleSet, state: AlertState, config: EngineConfig, handle: Arc<Handle>) -> Loop {
        let mut receivers = set.receivers.clone();
        receivers.extend(config.extra_receivers.iter().cloned());
        let delivery = Delivery::start(&receivers, &config.delivery);
        let out = AlertsOut {
            enabled: true,
            rules_file: config.rules_path.display().to_string(),
            log: config.dir.join("events.jsonl").display().to_string(),
            ..AlertsOut::default()
        };
        let mut alerting = Alerting::new(set, state);
        alerting.set_statsd(config.statsd.clone());
        Loop {
            alerting,
            config,
            handle,
            delivery,
            receivers,
            out,
            loaded_at: unix_now(),
            last_am_at: 0.0,
            notifications_total: 0,
            skipped: 0,
        }
    }

    /// Runs until stopped; returns what the delivery threads could not deliver by then.
    fn run(mut self, shared: &Shared) -> Vec<String> {
        let mut last_seq = shared.latest().sample.seq;
        while !self.handle.stop.load(Ordering::Relaxed) {
            if self.handle.reload.swap(false, Ordering::Relaxed) {
                self.reload();
            }
            let Some(snap) = shared.wait_newer(last_seq, Duration::from_millis(250)) else {
                self.apply_silences(unix_now());
                continue;
            };
            self.skipped += snap.sample.seq.saturating_sub(last_seq + 1);
            last_seq = snap.sample.seq;
            self.tick(&snap);
        }
        self.save_state();
        let Loop { delivery, .. } = self;
        delivery.stop()
    }

    fn reload(&mut self) {
        match load_rules(&self.config.rules_path) {
            Ok(set) => {
                let state = std::mem::take(&mut self.alerting.state);
                let mut receivers = set.receivers.clone();
                receivers.extend(self.config.extra_receivers.iter().cloned());
                if receivers != self.receivers {
                    // Never waits on a delivery: a receiver that stays keeps its queue, a
                    // removed one finishes on its own thread within the grace.
                    self.delivery.reconfigure(&receivers);
                    self.receivers = receivers;
                }
                // The agent's counters run for the process's life, not the rules file's: a
                // counter that fell at each SIGHUP would read as a restart.
                let (evaluations, cpu_ns) = (self.alerting.evaluations, self.alerting.eval_cpu_ns_total);
                let stats = std::mem::take(&mut self.alerting.evaluator.stats);
                self.alerting = Alerting::new(set, state);
                (self.alerting.evaluations, self.alerting.eval_cpu_ns_total) = (evaluations, cpu_ns);
                // Its frame number too: a new evaluator's windows hold no memo to compare with.
                self.alerting.evaluator.stats = stats;
                self.alerting.set_statsd(self.config.statsd.clone());
                self.loaded_at = unix_now();
                self.out.reload_error = None;
            }
            Err(e) => self.out.reload_error = Some(format!("kept the rules loaded before: {e}")),
        }
        self.publish(None);
    }

    fn apply_silences(&mut self, now: f64) -> bool {
        if !self.handle.apply_silences(&mut self.alerting.state, now) {
            return false;
        }
        self.save_state();
        self.publish(None);
        true
    }

    fn tick(&mut self, snap: &Snapshot) {
        let now = snap.sample.unix_ns as f64 / 1e9;
        self.apply_silences(now);
        let events = self.alerting.evaluate(snap);
        self.log(&events);
        let notifications = self.alerting.limiter.offer(now, events.iter().cloned());
        for n in &notifications {
            self.tell(n);
        }
        // Alertmanager: on any firing/resolved change, and every `resend` while firing. A
        // flapping hold holds back the other receivers only: Alertmanager is told every change
        // that is not silenced (it groups and throttles by itself).
        let am: Vec<usize> = self
            .receivers
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Receiver::Alertmanager(_)))
            .map(|(i, _)| i)
            .collect();
        let changed: Vec<&Event> =
            events.iter().filter(|e| !e.silenced && matches!(e.state, Told::Firing | Told::Resolved)).collect();
        if !am.is_empty() && (!changed.is_empty() || now - self.last_am_at >= self.alerting.set.notify.resend_secs) {
            let resend = self.alerting.set.notify.resend_secs;
            let mut alerts: Vec<notify::PostableAlert> = self
                .alerting
                .firing_events(now)
                .iter()
                .map(|e| notify::postable(e, now, resend, &self.config.host, &self.config.generator_url))
                .collect();
            alerts.extend(
                changed
                    .iter()
                    .filter(|e| e.state == Told::Resolved)
                    .map(|e| notify::postable(e, now, resend, &self.config.host, &self.config.generator_url)),
            );
            if !alerts.is_empty() || !changed.is_empty() {
                let body = serde_json::to_vec(&alerts).unwrap_or_default();
                for &i in &am {
                    self.delivery.send(i, Payload { body: body.clone(), env: Vec::new() });
                }
            }
            self.last_am_at = now;
        }
        if !events.is_empty() {
            self.save_state();
        }
        self.publish(Some(now));
    }

    fn tell(&mut self, n: &Notification) {
        self.notifications_total += 1;
        let host = self.config.host.clone();
        for (i, r) in self.receivers.iter().enumerate() {
            let payload = match r {
                Receiver::Webhook(_) => Payload { body: notify::webhook_body(n, &host), env: Vec::new() },
                Receiver::Slack(_) => Payload { body: notify::slack_body(n, &host), env: Vec::new() },
                Receiver::Exec { .. } => exec_payload(n, &host),
                Receiver::Alertmanager(_) => continue,
            };
            self.delivery.send(i, payload);
        }
    }

    fn log(&mut self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let path = self.config.dir.join("events.jsonl");
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > LOG_MAX_BYTES) {
            let _ = std::fs::rename(&path, self.config.dir.join("events.jsonl.1"));
        }
        let mut text = String::new();
        for e in events {
            text.push_str(&notify::log_line(e));
            text.push('\n');
        }
        // A FIFO here once held this thread (and `serve`'s stop) until a reader came.
        let written = proctor_procfs::regular::open(&path, std::fs::OpenOptions::new().create(true).append(true))
            .map_err(|e| e.to_string())
            .and_then(|mut f| f.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display())));
        if let Err(e) = written {
            self.out.log_errors_total += 1;
            self.out.last_log_error = Some(e);
        }
    }

    fn save_state(&mut self) {
        let path = self.config.dir.join("state.json");
        let tmp = self.config.dir.join("state.json.tmp");
        let saved = serde_json::to_vec(&self.alerting.state)
            .map_err(std::io::Error::other)
            .and_then(|bytes| proctor_procfs::regular::replace(&path, &tmp, &bytes));
        if saved.is_err() {
            self.out.state_errors_total += 1;
        }
    }

    fn publish(&mut self, at: Option<f64>) {
        let a = &self.alerting;
        let mut out = self.out.clone();
        out.loaded_at = Some(notify::rfc3339(self.loaded_at));
        out.evaluations_total = a.evaluations;
        if let Some(at) = at {
            out.last_evaluation_at = Some(notify::rfc3339(at));
        }
        out.last_evaluation_cpu_seconds = a.last_eval_cpu_ns as f64 / 1e9;
        out.evaluation_cpu_seconds_total = a.eval_cpu_ns_total as f64 / 1e9;
        out.snapshots_skipped_total = self.skipped;
        out.notes = if a.uses_statsd() && self.config.statsd.is_none() {
            vec!["rules name statsd series, but this serve runs no statsd server (--statsd): they are unknown and never fire".to_string()]
        } else {
            Vec::new()
        };
        out.selector_rows_matched_total = a.eval_stats().selector_rows_matched;
        out.selector_rows_reused_total = a.eval_stats().selector_rows_reused;
        let now = at.unwrap_or_else(unix_now);
        out.rules = a
            .set
            .rules
            .iter()
            .map(|r| {
                let st = a.state.rules.get(&r.name);
                let instances: Vec<InstanceOut> = st
                    .map(|st| {
                        st.instances
                            .iter()
                            .map(|(id, i)| InstanceOut {
                                labels: i.labels.clone(),
                                state: if i.phase == Phase::Firing { "firing" } else { "pending" },
                                active_at: notify::rfc3339(i.active_at),
                                fired_at: i.fired_at.map(notify::rfc3339),
                                value: i.value.filter(|v| v.is_finite()),
                                value_text: format_value(r.expr.value_unit, i.value),
                                silenced: a.state.silenced(&r.name, &i.labels, now),
                                flapping: st.flaps.get(id).is_some_and(|f| f.flapping),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let state = if instances.iter().any(|i| i.state == "firing") {
                    "firing"
                } else if instances.is_empty() {
                    "inactive"
                } else {
                    "pending"
                };
                RuleOut {
                    name: r.name.clone(),
                    group: r.group.clone(),
                    severity: r.severity().to_string(),
                    expr: r.expr_text.clone(),
                    clear: r.clear_text.clone(),
                    for_secs: r.for_secs,
                    keep_firing_for_secs: r.keep_firing_for_secs,
                    state,
                    instances,
                    instances_refused_total: st.map_or(0, |s| s.instances_refused),
                }
            })
            .collect();
        out.firing = out.rules.iter().flat_map(|r| &r.instances).filter(|i| i.state == "firing").count();
        out.pending = out.rules.iter().flat_map(|r| &r.instances).filter(|i| i.state == "pending").count();
        out.silences = a.state.silences.iter().map(SilenceOut::of).collect();
        out.receivers = self.delivery.stats();
        out.notifications_total = self.notifications_total;
        out.coalesced_total = a.limiter.coalesced_total;
        out.held_by_rate_limit = a.limiter.held();
        self.out.log_errors_total = out.log_errors_total;
        *self.handle.status.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(out);
        let _ = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33 item 12: 606 coalesced events put the webhook body in the command's
    /// environment, the exec failed with "Argument list too long", and the command heard of
    /// none of them. Every event goes on its stdin, one JSON line each.
    #[test]
    fn a_command_hears_of_every_event_of_a_storm() {
        let events: Vec<Event> = (0..2000)
            .map(|i| Event {
                at: 1.0e9,
                rule: "Busy".to_string(),
                instance: format!("{i}:1"),
                severity: "warning".to_string(),
                state: Told::Firing,
                labels: BTreeMap::from([("pid".to_string(), i.to_string()), ("name".to_string(), "x".repeat(100))]),
                annotations: BTreeMap::from([("summary".to_string(), "busy ".repeat(20))]),
                value: Some(99.0),
                active_at: 1.0e9,
                fired_at: Some(1.0e9),
                reason: None,
                silenced: false,
                held: false,
            })
            .collect();
        let n = Notification { events, omitted: 7 };
        let payload = exec_payload(&n, "web-1");
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let script = format!(
            "grep -c '\"rule\":\"Busy\"' > {out}; echo \"$PROCTOR_ALERT_COUNT ${{PROCTOR_ALERT_JSON:+json}}\" >> {out}",
            out = out.display()
        );
        let command = Receiver::Exec { argv: vec!["sh".into(), "-c".into(), script], timeout_secs: 30.0 };
        let d = Delivery::start(&[command], &DeliveryConfig::default());
        d.send(0, payload);
        let until = Instant::now() + Duration::from_secs(30);
        let s = loop {
            let s = d.stats().remove(0);
            if s.delivered_total + s.given_up_total > 0 || Instant::now() > until {
                break s;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(s.delivered_total, 1, "{s:?}");
        // Every event on stdin; the count in the environment; the body too large for it.
        assert_eq!(std::fs::read_to_string(&out).expect("written"), "2000\n2007 \n");
    }

    fn request(comment: &str) -> SilenceRequest {
        SilenceRequest { rule: "*".into(), matchers: BTreeMap::new(), duration_secs: 3600.0, comment: comment.into() }
    }

    /// Issue 33: 6,000 POSTs of 14 KB silences were 5,271 accepted, 363 MiB of RSS and a 75 MB
    /// `state.json`: the cap was on silences waiting only, and the loop emptied that each turn.
    #[test]
    fn silences_in_force_and_waiting_are_capped_in_count_and_size() {
        let handle = Handle::default();
        let mut state = AlertState::default();
        let why = handle.silence(request(&"x".repeat(MAX_SILENCE_BYTES))).expect_err("too big");
        assert!(why.contains("at most 4096 bytes together"), "{why}");
        for turn in 0..MAX_SILENCES {
            handle.silence(request(&"x".repeat(2_000))).expect("under the cap");
            if turn % 100 == 0 {
                handle.apply_silences(&mut state, unix_now());
            }
        }
        handle.apply_silences(&mut state, unix_now());
        assert_eq!(state.silences.len(), MAX_SILENCES);
        let why = handle.silence(request("one more")).expect_err("full");
        assert!(why.contains("1000 silences are in force or waiting"), "{why}");
        // One that ends makes room for one.
        state.silences[0].ends_at = 0.0;
        handle.apply_silences(&mut state, unix_now());
        handle.silence(request("room again")).expect("one ended");
        assert!(handle.silence(request("and no more")).is_err());
    }
}
