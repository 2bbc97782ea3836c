//! pgtop's slow threshold, for processes: `--slow cpu>80%,rss>2GiB,state=D>5s` is sugar for
//! proctor-alerts rules (`proctor_alerts::slow`), evaluated by the alerts engine over each new
//! frame `top` shows, whatever its source (this machine's agent, a remote one, a recording). A
//! process whose rule fires (after its hold time, the rule's `for:`) is highlighted, and every
//! transition is one line of `--slow-log`, in the alerts' JSON-lines log format.

use std::collections::HashMap;

use proctor_agent::Snapshot;
use proctor_alerts::engine::Alerting;
use proctor_alerts::slow::SlowRules;
use proctor_alerts::state::{AlertState, Phase};
use proctor_vocab::fields::RowCtx;
use proctor_vocab::process::{row_of, ProcessOut};

/// Rows made from frames count CPU and start times in milliseconds since the epoch (what the
/// frame's JSON carries), so a process's key is its pid and start time to the millisecond.
const CTX: RowCtx = RowCtx { ticks_per_sec: 1000.0, boot_unix_secs: Some(0) };

/// The `--slow` rules and which processes fire them, carried across frames.
#[derive(Debug, Default)]
pub struct Slow {
    engine: Option<Alerting>,
    texts: Vec<String>,
    /// (pid, start in ms) → the rules (by position) it fires now.
    firing: HashMap<(u32, u64), Vec<usize>>,
}

fn start_key(p: &ProcessOut) -> u64 {
    p.start_time_unix_secs.map_or(0, |s| (s * CTX.ticks_per_sec).round().max(0.0) as u64)
}

impl Slow {
    pub fn new(rules: Option<SlowRules>) -> Slow {
        match rules {
            Some(r) => Slow {
                engine: Some(Alerting::new(r.set, AlertState::default())),
                texts: r.texts,
                firing: HashMap::new(),
            },
            None => Slow::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The rules as typed.
    pub fn rules(&self) -> &[String] {
        &self.texts
    }

    /// Evaluates the rules over the next frame's processes; returns the log's lines for the
    /// transitions (a process that exited while firing is resolved).
    pub fn observe(&mut self, time_unix_ms: u64, processes: &[ProcessOut]) -> Vec<String> {
        let Some(engine) = self.engine.as_mut() else { return Vec::new() };
        let mut s = Snapshot::bare(Default::default());
        s.sample.unix_ns = time_unix_ms.saturating_mul(1_000_000);
        s.sample.clock_ticks_per_sec = CTX.ticks_per_sec as u64;
        s.host.boot_time_unix_secs = CTX.boot_unix_secs;
        s.rows = processes.iter().map(|p| row_of(p, &CTX)).collect();
        s.rows.sort_by_key(|r| r.pid);
        let events = engine.evaluate(&s);
        self.firing.clear();
        for (i, rule) in engine.set.rules.iter().enumerate() {
            let Some(st) = engine.state.rules.get(&rule.name) else { continue };
            for (id, inst) in &st.instances {
                let key = id.split_once(':').and_then(|(pid, start)| Some((pid.parse().ok()?, start.parse().ok()?)));
                if let (Phase::Firing, Some(key)) = (inst.phase, key) {
                    self.firing.entry(key).or_default().push(i);
                }
            }
        }
        events.iter().map(proctor_alerts::notify::log_line).collect()
    }

    /// The rules `p` fires now (after their hold time), as typed, for highlighting.
    pub fn flags(&self, p: &ProcessOut) -> Vec<&str> {
        self.firing
            .get(&(p.pid, start_key(p)))
            .map(|rules| rules.iter().filter_map(|&i| self.texts.get(i).map(String::as_str)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::proc_out;

    fn slow(spec: &str) -> Slow {
        Slow::new(Some(proctor_alerts::slow::parse(spec).expect("parses")))
    }

    fn lines(out: &[String]) -> Vec<(String, String)> {
        out.iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                (
                    v["state"].as_str().unwrap_or_default().to_string(),
                    v["labels"]["pid"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn rules_fire_after_their_hold_time_and_resolve_when_the_process_recovers_or_exits() {
        let mut slow = slow("cpu>80%,state=D>5s");
        let mut busy = proc_out(10, 1, "burner", 95.0, 1);
        let mut stuck = proc_out(11, 1, "nfsread", 0.0, 1);
        stuck.state = 'D';
        let out = lines(&slow.observe(1_000, &[busy.clone(), stuck.clone()]));
        assert!(out.contains(&("firing".into(), "10".into())), "{out:?}");
        assert!(out.contains(&("pending".into(), "11".into())), "{out:?}");
        assert_eq!(slow.flags(&busy), ["cpu>80%"]);
        assert!(slow.flags(&stuck).is_empty(), "D for 0 s is not yet 5 s");
        assert!(slow.observe(4_000, &[busy.clone(), stuck.clone()]).is_empty());
        let out = lines(&slow.observe(6_000, &[busy.clone(), stuck.clone()]));
        assert_eq!(out, [("firing".to_string(), "11".to_string())]);
        assert_eq!(slow.flags(&stuck), ["state=D>5s"]);
        busy.cpu_percent = Some(10.0);
        let out = lines(&slow.observe(7_000, &[busy.clone()]));
        assert!(
            out.contains(&("resolved".into(), "10".into())) && out.contains(&("resolved".into(), "11".into())),
            "{out:?}"
        );
        assert!(slow.flags(&busy).is_empty());
    }

    #[test]
    fn a_log_line_is_the_alerts_log_line_with_the_part_as_typed() {
        let mut slow = slow("rss>1MiB");
        let big = proc_out(20, 1, "hog", 1.0, 200);
        let out = slow.observe(1_000, &[big]);
        let v: serde_json::Value = serde_json::from_str(&out[0]).expect("JSON");
        assert_eq!((v["rule"].as_str(), v["state"].as_str()), (Some("rss_gt_1MiB"), Some("firing")));
        assert_eq!((v["labels"]["slow"].as_str(), v["labels"]["name"].as_str()), (Some("rss>1MiB"), Some("hog")));
        assert!(v["time"].as_str().is_some_and(|t| t.starts_with("1970-01-01T00:00:01")), "{v}");
    }
}
