//! pgtop's slow threshold, for processes: `--slow cpu>80%,rss>2GiB,state=D>5s`. A process past
//! a rule (for at least the rule's hold time) is highlighted, and each crossing — and each
//! return below — is one JSON line for `--slow-log`. Pure: the caller feeds frames and writes
//! the lines.

use std::collections::HashMap;
use std::sync::Arc;

use proctor_vocab::fields::{Field, Reading, ALIASES};
use proctor_vocab::process::ProcessOut;
use proctor_vocab::units::Unit;
use serde::Serialize;

use crate::view::{column, value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq)]
enum Threshold {
    Num(f64),
    Text(String),
}

/// One rule: a field, a comparison, a threshold and how long it must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// As typed, for the log and the help line.
    pub text: String,
    field: &'static Field,
    op: Op,
    threshold: Threshold,
    hold_ms: u64,
}

/// Parses `cpu>80%,rss>2GiB,state=D>5s`: comma-separated `FIELD OP VALUE[>HOLD]`, FIELD an
/// alias of the one table (`proctor_vocab::fields::ALIASES`) or any public process field name, OP one of `> >= < <= = !=`, VALUE with its
/// unit (`80%`, `2GiB`, `1.5s`), HOLD a duration the condition must last.
pub fn parse(spec: &str) -> Result<Vec<Rule>, String> {
    spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse_rule).collect()
}

fn parse_rule(text: &str) -> Result<Rule, String> {
    let at = text
        .find(['>', '<', '=', '!'])
        .ok_or_else(|| format!("'{text}': expected FIELD>VALUE (or >=, <, <=, =, !=), e.g. cpu>80%"))?;
    let name = text[..at].trim();
    let rest = &text[at..];
    let (op, rest) = [(">=", Op::Ge), ("<=", Op::Le), ("!=", Op::Ne), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)]
        .iter()
        .find_map(|(s, op)| rest.strip_prefix(s).map(|r| (*op, r)))
        .ok_or_else(|| format!("'{text}': no comparison after '{name}'"))?;
    let field = column(name).ok_or_else(|| {
        format!(
            "'{text}': unknown field '{name}' (use {} or a field of `proctor dump process --fields list`)",
            ALIASES.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ")
        )
    })?;
    // `VALUE>HOLD`: the last '>' followed by a duration is the hold time.
    let (value_text, hold_ms) = match rest.rfind('>') {
        Some(i) => {
            let hold = proctor_vocab::parse_duration(rest[i + 1..].trim())
                .map_err(|e| format!("'{text}': the hold time after '>' {e}"))?;
            (rest[..i].trim(), hold.as_millis() as u64)
        }
        None => (rest.trim(), 0),
    };
    if value_text.is_empty() {
        return Err(format!("'{text}': no value to compare with"));
    }
    let threshold = if field.unit.is_numeric() {
        Threshold::Num(number(value_text, field.unit).map_err(|e| format!("'{text}': {e}"))?)
    } else {
        if !matches!(op, Op::Eq | Op::Ne) {
            return Err(format!("'{text}': {} is text: compare it with = or !=", field.name));
        }
        Threshold::Text(value_text.to_string())
    };
    Ok(Rule { text: text.to_string(), field, op, threshold, hold_ms })
}

/// A number with an optional unit fitting the field's unit, in the one quantity grammar
/// (proctor-units): `80%`, `2G` (= `2GiB` = `2 GiB`), `1.5s`, `10MiB/s`, `50/s`; a bare number
/// is taken in the field's own unit.
fn number(text: &str, unit: Unit) -> Result<f64, String> {
    let q = proctor_units::parse_quantity(text).map_err(|e| format!("'{text}': {e}"))?;
    let fits = q.dim.fits(unit);
    if !fits {
        return Err(format!("'{text}' is {}, which does not fit a {} field", q.dim.name(), unit.as_str()));
    }
    Ok(q.value)
}

impl Rule {
    fn holds(&self, p: &ProcessOut) -> Option<String> {
        let v = value(p, self.field.name);
        let hit = match (&v, &self.threshold) {
            (Reading::Num(x), Threshold::Num(t)) => match self.op {
                Op::Gt => x > t,
                Op::Ge => x >= t,
                Op::Lt => x < t,
                Op::Le => x <= t,
                Op::Eq => x == t,
                Op::Ne => x != t,
            },
            (Reading::Text(x), Threshold::Text(t)) => match self.op {
                Op::Eq => x == t,
                Op::Ne => x != t,
                _ => false,
            },
            _ => false,
        };
        hit.then(|| match v {
            Reading::Text(t) => t.into_owned(),
            v => self.field.unit.format(v.num()),
        })
    }
}

/// One line of the slow log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crossing {
    /// `crossed` when a process went past the rule (after its hold time), `cleared` when it
    /// came back.
    pub event: &'static str,
    pub time_unix_ms: u64,
    pub rule: String,
    pub pid: u32,
    pub name: Arc<str>,
    pub cmdline: Option<Arc<[String]>>,
    /// The value as shown (`93.0`, `2.1 GiB`, `D`) when crossed; the last value past the rule
    /// when cleared.
    pub value: String,
    /// How long the process had been past the rule.
    pub for_seconds: f64,
}

#[derive(Debug, Clone)]
struct Since {
    since_ms: u64,
    flagged: bool,
    value: String,
    name: Arc<str>,
    cmdline: Option<Arc<[String]>>,
}

/// Which processes are past which rules, carried across frames.
#[derive(Debug, Default)]
pub struct Slow {
    rules: Vec<Rule>,
    /// (rule index, pid, start time in ms) → since when it has been past the rule.
    past: HashMap<(usize, u32, u64), Since>,
}

fn start_key(p: &ProcessOut) -> u64 {
    p.start_time_unix_secs.map_or(0, |s| (s * 1000.0) as u64)
}

impl Slow {
    pub fn new(rules: Vec<Rule>) -> Slow {
        Slow { rules, past: HashMap::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Takes the next live frame; returns the crossings and returns below since the last one.
    /// A process that exited while past a rule is cleared.
    pub fn observe(&mut self, time_unix_ms: u64, processes: &[ProcessOut]) -> Vec<Crossing> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (ri, rule) in self.rules.iter().enumerate() {
            for p in processes {
                let key = (ri, p.pid, start_key(p));
                if let Some(value) = rule.holds(p) {
                    seen.insert(key);
                    let entry = self.past.entry(key).or_insert_with(|| Since {
                        since_ms: time_unix_ms,
                        flagged: false,
                        value: value.clone(),
                        name: p.name.clone(),
                        cmdline: p.cmdline.clone(),
                    });
                    entry.value = value;
                    if !entry.flagged && time_unix_ms.saturating_sub(entry.since_ms) >= rule.hold_ms {
                        entry.flagged = true;
                        out.push(Crossing {
                            event: "crossed",
                            time_unix_ms,
                            rule: rule.text.clone(),
                            pid: p.pid,
                            name: p.name.clone(),
                            cmdline: p.cmdline.clone(),
                            value: entry.value.clone(),
                            for_seconds: time_unix_ms.saturating_sub(entry.since_ms) as f64 / 1e3,
                        });
                    }
                }
            }
        }
        let gone: Vec<_> = self.past.keys().filter(|k| !seen.contains(k)).copied().collect();
        for key in gone {
            if let Some(s) = self.past.remove(&key) {
                if s.flagged {
                    out.push(Crossing {
                        event: "cleared",
                        time_unix_ms,
                        rule: self.rules[key.0].text.clone(),
                        pid: key.1,
                        name: s.name,
                        cmdline: s.cmdline,
                        value: s.value,
                        for_seconds: time_unix_ms.saturating_sub(s.since_ms) as f64 / 1e3,
                    });
                }
            }
        }
        out
    }

    /// The rules `p` is past now (after their hold time), for highlighting.
    pub fn flags(&self, p: &ProcessOut) -> Vec<&str> {
        let start = start_key(p);
        self.rules
            .iter()
            .enumerate()
            .filter(|(ri, _)| self.past.get(&(*ri, p.pid, start)).is_some_and(|s| s.flagged))
            .map(|(_, r)| r.text.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::proc_out;

    #[test]
    fn the_issue_example_parses_with_units_and_a_hold_time() {
        let rules = parse("cpu>80%,rss>2GiB,state=D>5s").expect("parses");
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].field.name, "cpu_percent");
        assert_eq!(rules[1].threshold, Threshold::Num(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!((rules[2].field.name, rules[2].hold_ms), ("state", 5000));
        assert_eq!(parse("time>=1m").expect("parses")[0].threshold, Threshold::Num(60.0));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (spec, says) in [
            ("cpu", "expected FIELD>VALUE"),
            ("nosuch>1", "unknown field 'nosuch'"),
            ("rss>2parsecs", "unknown unit \"parsecs\""),
            ("rss>5s", "a duration, which does not fit a bytes field"),
            ("state>D", "compare it with = or !="),
            ("cpu>", "no value"),
            ("cpu>5%>soon", "hold time"),
        ] {
            let err = parse(spec).expect_err(spec);
            assert!(err.contains(says), "{spec}: {err}");
        }
    }

    #[test]
    fn crossings_wait_for_the_hold_time_and_clear_when_the_process_recovers_or_exits() {
        let mut slow = Slow::new(parse("cpu>80%,state=D>5s").expect("parses"));
        let mut busy = proc_out(10, 1, "burner", 95.0, 1);
        let mut stuck = proc_out(11, 1, "nfsread", 0.0, 1);
        stuck.state = 'D';
        let out = slow.observe(1_000, &[busy.clone(), stuck.clone()]);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].event, out[0].pid, out[0].value.as_str()), ("crossed", 10, "95"));
        assert_eq!(slow.flags(&busy), ["cpu>80%"]);
        assert!(slow.flags(&stuck).is_empty(), "D for 0 s is not yet 5 s");
        assert!(slow.observe(4_000, &[busy.clone(), stuck.clone()]).is_empty());
        let out = slow.observe(6_000, &[busy.clone(), stuck.clone()]);
        assert_eq!((out.len(), out[0].pid, out[0].for_seconds), (1, 11, 5.0));
        busy.cpu_percent = Some(10.0);
        let out = slow.observe(7_000, &[busy.clone()]);
        let events: Vec<(&str, u32)> = out.iter().map(|c| (c.event, c.pid)).collect();
        assert_eq!(events.len(), 2);
        assert!(events.contains(&("cleared", 10)) && events.contains(&("cleared", 11)), "{events:?}");
        assert!(slow.flags(&busy).is_empty());
    }
}
