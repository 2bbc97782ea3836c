//! Backtesting: a rule set replayed over recorded snapshots through the same evaluation and
//! state machine `serve` runs, collecting when each rule would have fired and resolved and what
//! receivers would have been told. The caller reads the store and derives the snapshots.

use std::collections::BTreeMap;

use proctor_agent::Snapshot;
use serde::Serialize;

use crate::engine::{format_value, Alerting};
use crate::notify;
use crate::rules::RuleSet;
use crate::state::{AlertState, Event, Told};

/// One stretch during which an instance fired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    pub rule: String,
    pub labels: BTreeMap<String, String>,
    pub fired_at: String,
    /// `None` when still firing at the end of the range.
    pub resolved_at: Option<String>,
    pub seconds: f64,
    pub peak_value: Option<f64>,
    pub peak_text: String,
    #[serde(skip)]
    fired_secs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleSummary {
    pub rule: String,
    pub severity: String,
    pub expr: String,
    pub fired: usize,
    pub firing_seconds: f64,
    pub periods: Vec<Period>,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct BacktestOut {
    pub samples: u64,
    pub from: Option<String>,
    pub to: Option<String>,
    pub rules: Vec<RuleSummary>,
    /// Notifications receivers would have got (after silences, flapping holds and the rate
    /// limit), and the events in them.
    pub notifications: u64,
    pub transitions: usize,
    pub events: Vec<Event>,
    pub evaluation_cpu_seconds: f64,
}

#[derive(Debug)]
pub struct Backtest {
    alerting: Alerting,
    events: Vec<Event>,
    open: BTreeMap<(String, String), Period>,
    done: Vec<Period>,
    samples: u64,
    first: Option<f64>,
    last: Option<f64>,
    notifications: u64,
}

impl Backtest {
    pub fn new(set: RuleSet) -> Backtest {
        Backtest {
            alerting: Alerting::new(set, AlertState::default()),
            events: Vec::new(),
            open: BTreeMap::new(),
            done: Vec::new(),
            samples: 0,
            first: None,
            last: None,
            notifications: 0,
        }
    }

    pub fn push(&mut self, s: &Snapshot) {
        let at = s.sample.unix_ns as f64 / 1e9;
        self.samples += 1;
        self.first.get_or_insert(at);
        self.last = Some(at);
        let events = self.alerting.evaluate(s);
        self.notifications += self.alerting.limiter.offer(at, events.iter().cloned()).len() as u64;
        for (k, p) in &mut self.open {
            if let Some(inst) = self.alerting.state.rules.get(&k.0).and_then(|r| r.instances.get(&k.1)) {
                if inst.value.is_some_and(|v| p.peak_value.is_none_or(|peak| v > peak)) {
                    p.peak_value = inst.value;
                }
            }
        }
        for e in &events {
            let key = (e.rule.clone(), e.instance.clone());
            match e.state {
                Told::Firing if e.reason.as_deref() != Some("repeat") && !self.open.contains_key(&key) => {
                    self.open.insert(
                        key,
                        Period {
                            rule: e.rule.clone(),
                            labels: e.labels.clone(),
                            fired_at: notify::rfc3339(e.at),
                            resolved_at: None,
                            seconds: 0.0,
                            peak_value: e.value,
                            peak_text: String::new(),
                            fired_secs: e.at,
                        },
                    );
                }
                Told::Resolved => {
                    if let Some(mut p) = self.open.remove(&key) {
                        p.resolved_at = Some(notify::rfc3339(e.at));
                        p.seconds = e.at - p.fired_secs;
                        self.done.push(p);
                    }
                }
                _ => {}
            }
        }
        self.events.extend(events);
    }

    pub fn finish(mut self) -> BacktestOut {
        let last = self.last.unwrap_or(0.0);
        if let Some(n) = self.alerting.limiter.flush(f64::INFINITY) {
            let _ = n;
            self.notifications += 1;
        }
        for (_, mut p) in std::mem::take(&mut self.open) {
            p.seconds = last - p.fired_secs;
            self.done.push(p);
        }
        let rules = self
            .alerting
            .set
            .rules
            .iter()
            .map(|r| {
                let mut periods: Vec<Period> = self.done.iter().filter(|p| p.rule == r.name).cloned().collect();
                periods.sort_by(|a, b| a.fired_secs.total_cmp(&b.fired_secs));
                for p in &mut periods {
                    p.peak_text = format_value(r.expr.value_unit, p.peak_value);
                }
                RuleSummary {
                    rule: r.name.clone(),
                    severity: r.severity().to_string(),
                    expr: r.expr_text.clone(),
                    fired: periods.len(),
                    firing_seconds: periods.iter().map(|p| p.seconds).sum(),
                    periods,
                }
            })
            .collect();
        BacktestOut {
            samples: self.samples,
            from: self.first.map(notify::rfc3339),
            to: self.last.map(notify::rfc3339),
            rules,
            notifications: self.notifications,
            transitions: self.events.len(),
            events: self.events,
            evaluation_cpu_seconds: self.alerting.eval_cpu_ns_total as f64 / 1e9,
        }
    }
}

/// The text report: per rule, when it fired and resolved.
pub fn render_text(out: &BacktestOut) -> String {
    let mut s = format!(
        "{} samples from {} to {}; {} transitions; receivers would have had {} notifications\n",
        out.samples,
        out.from.as_deref().unwrap_or("-"),
        out.to.as_deref().unwrap_or("-"),
        out.transitions,
        out.notifications
    );
    for r in &out.rules {
        if r.fired == 0 {
            s.push_str(&format!("{} ({}): never fired\n", r.rule, r.severity));
            continue;
        }
        s.push_str(&format!(
            "{} ({}): fired {} time{}, {} in all\n",
            r.rule,
            r.severity,
            r.fired,
            if r.fired == 1 { "" } else { "s" },
            proctor_vocab::units::seconds(r.firing_seconds)
        ));
        for p in &r.periods {
            let labels: Vec<String> = p
                .labels
                .iter()
                .filter(|(k, _)| *k != "alertname" && *k != "severity")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            s.push_str(&format!(
                "  fired {} → {} ({}), peak {}{}\n",
                p.fired_at,
                p.resolved_at.as_deref().unwrap_or("still firing at the end"),
                proctor_vocab::units::seconds(p.seconds),
                p.peak_text,
                if labels.is_empty() { String::new() } else { format!("  {}", labels.join(" ")) }
            ));
        }
    }
    s
}
