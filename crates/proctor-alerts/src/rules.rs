//! The rules file: laid out as Prometheus alerting rules (`groups:` → `rules:` with `alert`,
//! `expr`, `for`, `keep_firing_for`, `labels`, `annotations`), plus `clear` (a recovery
//! expression), a `receivers:` section and a `notify:` section. Every mistake is reported with
//! its line and column; an expression's mistake points inside the expression where it can. A
//! file past one of `proctor_groups::limits` (rules, nesting, what its regexes compile to) is
//! refused the same way, naming the limit.

use std::collections::BTreeMap;

use proctor_groups::limits::MAX_RULES;
use proctor_groups::yaml::{self, Node, Pos};
/// A mistake in a rules file: the same line-and-column diagnostic groups' rules files give.
pub use proctor_groups::Diagnostic;

use crate::eval::{CompileError, Plan, Program};
use crate::expr::{self, parse_duration};

fn diag(pos: Pos, message: impl Into<String>) -> Diagnostic {
    Diagnostic { line: pos.line, col: pos.col, message: message.into() }
}

/// One alerting rule.
#[derive(Debug)]
pub struct Rule {
    pub group: String,
    pub name: String,
    pub expr_text: String,
    pub expr: Program,
    pub clear_text: Option<String>,
    pub clear: Option<Program>,
    pub for_secs: f64,
    pub keep_firing_for_secs: f64,
    pub repeat_interval_secs: Option<f64>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub line: usize,
}

impl Rule {
    pub fn severity(&self) -> &str {
        self.labels.get("severity").map_or("none", String::as_str)
    }
}

/// Where notifications go.
#[derive(Debug, Clone, PartialEq)]
pub enum Receiver {
    Webhook(String),
    Slack(String),
    Alertmanager(String),
    Exec { argv: Vec<String>, timeout_secs: f64 },
}

impl Receiver {
    pub fn kind(&self) -> &'static str {
        match self {
            Receiver::Webhook(_) => "webhook",
            Receiver::Slack(_) => "slack",
            Receiver::Alertmanager(_) => "alertmanager",
            Receiver::Exec { .. } => "exec",
        }
    }

    pub fn target(&self) -> String {
        match self {
            Receiver::Webhook(u) | Receiver::Slack(u) | Receiver::Alertmanager(u) => u.clone(),
            Receiver::Exec { argv, .. } => argv.join(" "),
        }
    }
}

/// How notifications are limited.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifySettings {
    /// A firing alert is told again after this long (webhook, Slack, exec).
    pub repeat_interval_secs: f64,
    /// At most this many notifications per `rate_window_secs` over all rules; the rest are
    /// coalesced into the next one that may go.
    pub rate_limit: u32,
    pub rate_window_secs: f64,
    /// A rule instance that changes state more than `flap_changes` times within
    /// `flap_window_secs` is held (not told) until it has been steady that long.
    pub flap_changes: u32,
    pub flap_window_secs: f64,
    /// Per-process and per-group rules fire for at most this many instances each.
    pub max_instances: usize,
    /// Alertmanager is sent the firing alerts again this often.
    pub resend_secs: f64,
}

impl Default for NotifySettings {
    fn default() -> Self {
        NotifySettings {
            repeat_interval_secs: 4.0 * 3600.0,
            rate_limit: 10,
            rate_window_secs: 60.0,
            flap_changes: 6,
            flap_window_secs: 600.0,
            max_instances: 50,
            resend_secs: 60.0,
        }
    }
}

/// A whole rules file, compiled.
#[derive(Debug)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub plan: Plan,
    pub receivers: Vec<Receiver>,
    pub notify: NotifySettings,
}

/// Reads and compiles a rules file; every mistake, not just the first.
pub fn parse(text: &str) -> Result<RuleSet, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let root = match yaml::load(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Err(vec![diag(Pos { line: 1, col: 1 }, "the file is empty: expected `groups:`")]),
        Err((pos, why)) => return Err(vec![diag(pos, why)]),
    };
    let Node::Map(top, _) = &root else {
        return Err(vec![diag(root.pos(), format!("expected a mapping with `groups:`, found {}", root.kind()))]);
    };
    let mut set =
        RuleSet { rules: Vec::new(), plan: Plan::default(), receivers: Vec::new(), notify: NotifySettings::default() };
    let mut saw_groups = false;
    for (key, pos, value) in top {
        match key.as_str() {
            "groups" => {
                saw_groups = true;
                groups(text, value, &mut set, &mut diags);
            }
            "receivers" => receivers(value, &mut set.receivers, &mut diags),
            "notify" => notify(value, &mut set.notify, &mut diags),
            other => diags.push(diag(*pos, format!("unknown key `{other}`: expected groups, receivers or notify"))),
        }
    }
    if !saw_groups {
        diags.push(diag(root.pos(), "no `groups:`: a rules file lists its rules under groups → rules"));
    }
    let mut seen = BTreeMap::new();
    for r in &set.rules {
        if let Some(line) = seen.insert(r.name.clone(), r.line) {
            diags.push(Diagnostic {
                line: r.line,
                col: 1,
                message: format!("alert `{}` is also defined on line {line}: names must be unique", r.name),
            });
        }
    }
    if diags.is_empty() {
        Ok(set)
    } else {
        diags.sort_by_key(|d| (d.line, d.col));
        Err(diags)
    }
}

fn scalar<'a>(node: &'a Node, what: &str, diags: &mut Vec<Diagnostic>) -> Option<&'a str> {
    match node {
        Node::Scalar(s, _) => Some(s),
        other => {
            diags.push(diag(other.pos(), format!("{what}: expected a string, found {}", other.kind())));
            None
        }
    }
}

fn duration(node: &Node, what: &str, diags: &mut Vec<Diagnostic>) -> Option<f64> {
    let text = scalar(node, what, diags)?;
    match parse_duration(text) {
        Ok(v) => Some(v),
        Err(e) => {
            diags.push(diag(node.pos(), format!("{what}: {e}")));
            None
        }
    }
}

fn string_map(node: &Node, what: &str, diags: &mut Vec<Diagnostic>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Node::Map(entries, _) = node else {
        diags.push(diag(node.pos(), format!("{what}: expected a mapping of names to strings, found {}", node.kind())));
        return out;
    };
    for (k, _, v) in entries {
        if let Some(s) = scalar(v, &format!("{what}.{k}"), diags) {
            out.insert(k.clone(), s.to_string());
        }
    }
    out
}

fn groups(text: &str, node: &Node, set: &mut RuleSet, diags: &mut Vec<Diagnostic>) {
    let Node::Seq(items, _) = node else {
        diags.push(diag(node.pos(), format!("groups: expected a list, found {}", node.kind())));
        return;
    };
    let mut counted = 0;
    for item in items {
        let Node::Map(entries, gpos) = item else {
            diags.push(diag(
                item.pos(),
                format!("a group: expected a mapping with name and rules, found {}", item.kind()),
            ));
            continue;
        };
        let mut name = None;
        let mut rules = None;
        for (k, pos, v) in entries {
            match k.as_str() {
                "name" => name = scalar(v, "name", diags).map(str::to_string),
                "rules" => rules = Some(v),
                "interval" | "limit" | "query_offset" | "labels" => diags.push(diag(
                    *pos,
                    format!(
                        "`{k}` is Prometheus's and not used here: rules are evaluated on every sample of the agent"
                    ),
                )),
                other => diags.push(diag(*pos, format!("unknown key `{other}` in a group: expected name and rules"))),
            }
        }
        let Some(name) = name else {
            diags.push(diag(*gpos, "a group without `name`"));
            continue;
        };
        let Some(Node::Seq(list, _)) = rules else {
            diags.push(diag(rules.map_or(*gpos, Node::pos), format!("group `{name}`: expected `rules:` with a list")));
            continue;
        };
        for r in list {
            counted += 1;
            if counted > MAX_RULES {
                // Nothing past the limit is compiled: that is the cost the limit bounds.
                diags.push(diag(r.pos(), format!("rule {counted}: a file holds at most {MAX_RULES} rules")));
                return;
            }
            if let Some(rule) = rule(text, &name, r, set, diags) {
                set.rules.push(rule);
            }
        }
    }
}

fn rule(text: &str, group: &str, node: &Node, set: &mut RuleSet, diags: &mut Vec<Diagnostic>) -> Option<Rule> {
    let Node::Map(entries, rpos) = node else {
        diags.push(diag(node.pos(), format!("a rule: expected a mapping with alert and expr, found {}", node.kind())));
        return None;
    };
    let before = diags.len();
    let mut name = None;
    let mut expr_node = None;
    let mut clear_node = None;
    let mut for_secs = None;
    let mut keep = 0.0;
    let mut repeat = None;
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    for (k, pos, v) in entries {
        match k.as_str() {
            "alert" => name = scalar(v, "alert", diags).map(str::to_string),
            "expr" => expr_node = Some(v),
            "clear" => clear_node = Some(v),
            "for" => for_secs = duration(v, "for", diags),
            "keep_firing_for" => keep = duration(v, "keep_firing_for", diags).unwrap_or(0.0),
            "repeat_interval" => repeat = duration(v, "repeat_interval", diags),
            "labels" => labels = string_map(v, "labels", diags),
            "annotations" => annotations = string_map(v, "annotations", diags),
            "record" => diags.push(diag(*pos, "recording rules are not supported: proctor's rules are alerts only")),
            other => diags.push(diag(
                *pos,
                format!("unknown key `{other}` in a rule: expected alert, expr, for, keep_firing_for, clear, repeat_interval, labels, annotations"),
            )),
        }
    }
    let Some(name) = name else {
        diags.push(diag(*rpos, "a rule without `alert:` (its name)"));
        return None;
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
        diags.push(diag(*rpos, format!("alert name {name:?}: use letters, digits, `_`, `-` and `.`")));
    }
    let Some(expr_node) = expr_node else {
        diags.push(diag(*rpos, format!("rule `{name}` has no `expr:`")));
        return None;
    };
    let (expr_text, expr, inline_for) = compile(text, expr_node, "expr", &mut set.plan, diags)?;
    if inline_for.is_some() && for_secs.is_some() {
        diags.push(diag(expr_node.pos(), format!("rule `{name}` says `for` twice: in its expr and as `for:`")));
    }
    let clear = match clear_node {
        Some(node) => {
            let (t, p, f) = compile(text, node, "clear", &mut set.plan, diags)?;
            if f.is_some() {
                diags.push(diag(node.pos(), "`clear` takes no `for`: it holds for the rule's `for`"));
            }
            if p.per_instance() != expr.per_instance() {
                diags.push(diag(
                    node.pos(),
                    "`clear` must be over the same instances as `expr` (both per process, both per group, or neither)",
                ));
            }
            Some((t, p))
        }
        None => None,
    };
    for (k, v) in &annotations {
        if let Err(e) = crate::template::check(v) {
            diags.push(diag(*rpos, format!("annotation `{k}`: {e}")));
        }
    }
    if diags.len() != before {
        return None;
    }
    Some(Rule {
        group: group.to_string(),
        name,
        expr_text,
        expr,
        clear_text: clear.as_ref().map(|c| c.0.clone()),
        clear: clear.map(|c| c.1),
        for_secs: for_secs.or(inline_for).unwrap_or(0.0),
        keep_firing_for_secs: keep,
        repeat_interval_secs: repeat,
        labels,
        annotations,
        line: rpos.line,
    })
}

/// Parses and compiles an expression scalar; its mistakes are pointed at inside the file.
fn compile(
    text: &str,
    node: &Node,
    what: &str,
    plan: &mut Plan,
    diags: &mut Vec<Diagnostic>,
) -> Option<(String, Program, Option<f64>)> {
    let source = scalar(node, what, diags)?;
    let at = |offset: usize, message: String| -> Diagnostic {
        let pos = node.pos();
        let line = text.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
        let first = line.chars().nth(pos.col.saturating_sub(1));
        let single = !source.contains('\n');
        let col_offset = source[..offset.min(source.len())].chars().count();
        match first {
            Some('"') | Some('\'') if single => Diagnostic { line: pos.line, col: pos.col + 1 + col_offset, message },
            Some(c) if single && c != '|' && c != '>' => {
                Diagnostic { line: pos.line, col: pos.col + col_offset, message }
            }
            _ => Diagnostic {
                line: pos.line,
                col: pos.col,
                message: format!("{message} (at character {} of {what})", col_offset + 1),
            },
        }
    };
    let parsed = match expr::parse(source) {
        Ok(p) => p,
        Err(e) => {
            diags.push(at(e.at, format!("{what}: {}", e.message)));
            return None;
        }
    };
    match plan.compile(&parsed.ast) {
        Ok(program) => Some((source.trim().to_string(), program, parsed.for_secs)),
        Err(CompileError { span, message }) => {
            diags.push(at(span.start, format!("{what}: {message}")));
            None
        }
    }
}

fn receivers(node: &Node, out: &mut Vec<Receiver>, diags: &mut Vec<Diagnostic>) {
    let Node::Seq(items, _) = node else {
        diags.push(diag(node.pos(), format!("receivers: expected a list, found {}", node.kind())));
        return;
    };
    for item in items {
        let Node::Map(entries, pos) = item else {
            diags.push(diag(
                item.pos(),
                "a receiver: expected `webhook: URL`, `slack: URL`, `alertmanager: URL` or `exec: [CMD, ARG…]`",
            ));
            continue;
        };
        let mut timeout = 10.0;
        let mut found = None;
        for (k, kpos, v) in entries {
            match k.as_str() {
                "webhook" | "slack" | "alertmanager" => {
                    if let Some(url) = scalar(v, k, diags) {
                        if let Err(e) = check_url(url) {
                            diags.push(diag(v.pos(), format!("{k}: {e}")));
                        }
                        found = Some(match k.as_str() {
                            "webhook" => Receiver::Webhook(url.to_string()),
                            "slack" => Receiver::Slack(url.to_string()),
                            _ => Receiver::Alertmanager(url.to_string()),
                        });
                    }
                }
                "exec" => {
                    let argv: Vec<String> = match v {
                        Node::Seq(args, _) => {
                            args.iter().filter_map(|a| scalar(a, "exec", diags).map(str::to_string)).collect()
                        }
                        Node::Scalar(s, _) => s.split_whitespace().map(str::to_string).collect(),
                        other => {
                            diags.push(diag(other.pos(), "exec: expected a command and its arguments"));
                            Vec::new()
                        }
                    };
                    if argv.is_empty() {
                        diags.push(diag(v.pos(), "exec: an empty command"));
                    }
                    found = Some(Receiver::Exec { argv, timeout_secs: 10.0 });
                }
                "timeout" => timeout = duration(v, "timeout", diags).unwrap_or(10.0),
                other => diags.push(diag(*kpos, format!("unknown key `{other}` in a receiver"))),
            }
        }
        match found {
            Some(Receiver::Exec { argv, .. }) => out.push(Receiver::Exec { argv, timeout_secs: timeout }),
            Some(r) => out.push(r),
            None => diags.push(diag(*pos, "a receiver names none of webhook, slack, alertmanager, exec")),
        }
    }
}

/// A receiver URL proctor can send to: `http://` or `https://` with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    proctor_client::url::parse(url).map(|_| ()).map_err(|e| format!("{url:?}: {e}"))
}

/// `COUNT/DURATION`, both above zero.
fn count_per(node: &Node, what: &str, expected: &str, diags: &mut Vec<Diagnostic>) -> Option<(u32, f64)> {
    let s = scalar(node, what, diags)?;
    match s.split_once('/').map(|(a, b)| (a.trim().parse::<u32>(), parse_duration(b))) {
        Some((Ok(count), Ok(window))) if count > 0 && window > 0.0 => Some((count, window)),
        _ => {
            diags.push(diag(node.pos(), format!("{what}: {s:?}: expected {expected}")));
            None
        }
    }
}

fn notify(node: &Node, n: &mut NotifySettings, diags: &mut Vec<Diagnostic>) {
    let Node::Map(entries, _) = node else {
        diags.push(diag(node.pos(), format!("notify: expected a mapping, found {}", node.kind())));
        return;
    };
    for (k, pos, v) in entries {
        match k.as_str() {
            "repeat_interval" => n.repeat_interval_secs = duration(v, k, diags).unwrap_or(n.repeat_interval_secs),
            "resend" => n.resend_secs = duration(v, k, diags).unwrap_or(n.resend_secs).max(1.0),
            // `10/1m`: ten notifications a minute.
            "rate_limit" => {
                if let Some((count, window)) = count_per(v, k, "COUNT/DURATION such as 10/1m", diags) {
                    (n.rate_limit, n.rate_window_secs) = (count, window);
                }
            }
            // `6/10m`: more than six changes in ten minutes is flapping.
            "flapping" => {
                if let Some((count, window)) = count_per(v, k, "CHANGES/DURATION such as 6/10m", diags) {
                    (n.flap_changes, n.flap_window_secs) = (count, window);
                }
            }
            "max_instances" => match scalar(v, k, diags).map(str::parse::<usize>) {
                Some(Ok(m)) if (1..=10_000).contains(&m) => n.max_instances = m,
                Some(_) => diags.push(diag(v.pos(), "max_instances: a number from 1 to 10000")),
                None => {}
            },
            other => diags.push(diag(
                *pos,
                format!("unknown key `{other}` in notify: expected repeat_interval, resend, rate_limit, flapping, max_instances"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
groups:
  - name: host
    rules:
      - alert: HostCpuBusy
        expr: host.cpu.busy_percent > 90%
        for: 30s
        keep_firing_for: 1m
        clear: host.cpu.busy_percent < 70%
        labels:
          severity: warning
        annotations:
          summary: "CPU busy at {{ $value }}"
      - alert: GunicornFat
        expr: 'process{name="gunicorn"}.rss > 2GiB'
      - alert: StuckInD
        expr: process.state == "D" for 30s
receivers:
  - webhook: http://127.0.0.1:9/hook
  - exec: [/bin/true, --flag]
    timeout: 2s
notify:
  rate_limit: 5/1m
  flapping: 4/5m
"#;

    #[test]
    fn a_prometheus_shaped_file_compiles() {
        let set = parse(GOOD).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(set.rules.len(), 3);
        let cpu = &set.rules[0];
        assert_eq!((cpu.for_secs, cpu.keep_firing_for_secs, cpu.severity()), (30.0, 60.0, "warning"));
        assert!(cpu.clear.is_some());
        assert_eq!(set.rules[2].for_secs, 30.0);
        assert!(set.rules[1].expr.per_instance().is_some());
        assert_eq!(
            set.receivers[1],
            Receiver::Exec { argv: vec!["/bin/true".into(), "--flag".into()], timeout_secs: 2.0 }
        );
        assert_eq!((set.notify.rate_limit, set.notify.rate_window_secs), (5, 60.0));
        assert_eq!((set.notify.flap_changes, set.notify.flap_window_secs), (4, 300.0));
    }

    #[test]
    fn every_mistake_has_its_line_and_column_and_what_was_expected() {
        let text = r#"groups:
  - name: g
    rules:
      - alert: A
        expr: host.cpu.bsy_percent > 90%
      - alert: B
        expr: "host.memory.used_bytes > 90%"
      - alert: C
        expr: host.load.avg1 >
        for: 5 fortnights
      - alert: D
        expr: process{colour="red"}.rss > 1GiB
        sevrity: high
      - alert: A
        expr: statsd.timer{name="api"}.upper_90 > 250ms
"#;
        let diags = parse(text).expect_err("bad file");
        let said: Vec<String> = diags.iter().map(ToString::to_string).collect();
        let has = |line: usize, col: usize, words: &str| {
            assert!(
                diags.iter().any(|d| d.line == line && d.col == col && d.message.contains(words)),
                "no line {line} col {col} {words:?} in {said:#?}"
            );
        };
        has(5, 15, "closest known: host.cpu.busy_percent");
        has(7, 16, "compares a size in bytes with a percentage: write the literal in B, KiB, MiB or GiB");
        has(9, 31, "expected a value");
        has(10, 14, "unknown duration unit");
        has(12, 23, "not by `colour`");
        has(13, 9, "unknown key `sevrity`");
        has(15, 15, "statsd.timer takes one exact key");
    }

    #[test]
    fn statsd_series_take_a_key_and_a_statistic_in_their_units() {
        let ok = "groups:\n  - name: g\n    rules:\n      - alert: Slow\n        expr: statsd.timer{key=\"api.latency\"}.upper_90 > 250ms\n      - alert: Busy\n        expr: statsd.counter{key=\"jobs\"}.rate > 100/s and statsd.gauge{key=\"queue\"} > 10\n";
        let set = parse(ok).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(set.plan.statsd_refs().len(), 3);
        for (expr, says) in [
            ("statsd.timer{key=\"x\"}.upper_90 > 90%", "compares a duration with a percentage"),
            ("statsd.counter{key=\"x\"}.upper > 1", "count or rate"),
            ("statsd.timer{key=~\"x.*\"}.upper > 1ms", "one exact key"),
            ("statsd.histogram{key=\"x\"} > 1", "statsd series are"),
        ] {
            let text = format!("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: '{expr}'\n");
            let d = parse(&text).expect_err(expr);
            assert!(d[0].message.contains(says), "{expr}: {d:?}");
        }
    }

    #[test]
    fn a_file_that_is_not_rules_says_so() {
        assert!(parse("").is_err());
        let d = parse("groups: [\n").expect_err("not yaml");
        assert!(d[0].message.starts_with("not YAML"), "{d:?}");
        let d = parse("rules: []\n").expect_err("no groups");
        assert!(d.iter().any(|d| d.message.contains("unknown key `rules`")), "{d:?}");
    }

    /// Issue 33: a 39 KB file of costly `=~` regexes took 12 s and 594 MB, and 10,000 rules
    /// delayed serve's first answer by ~14 s.
    #[test]
    fn costly_regexes_and_too_many_rules_are_refused_naming_the_rule_and_the_limit() {
        let rule = |i: usize, re: &str| {
            format!("      - alert: R{i}\n        expr: count(process{{cmdline=~\"{re}\"}}) > 0\n")
        };
        let heavy: String = (0..200).map(|i| rule(i, &format!("{i}\\\\w{{40}}"))).collect();
        let d = parse(&format!("groups:\n  - name: g\n    rules:\n{heavy}")).expect_err("over the budget");
        assert!(d[0].message.contains("more than 16 MiB together"), "{d:?}");
        assert!(d[0].line > 4 + 2 * 16 && d[0].col > 20, "the rule's line, the regex's column: {d:?}");
        let d =
            parse(&format!("groups:\n  - name: g\n    rules:\n{}", rule(0, "\\\\w{100}\\\\w{100}"))).expect_err("big");
        assert!(d[0].message.contains("more than 1 MiB (the limit for one regex)"), "{d:?}");
        // Over two groups: the 2,001st rule is named, and nothing after it is compiled.
        let half: String = (0..1_000).map(|i| rule(i, "x")).collect();
        let other: String = (1_000..2_001).map(|i| rule(i, "x")).collect();
        let d = parse(&format!("groups:\n  - name: a\n    rules:\n{half}  - name: b\n    rules:\n{other}"))
            .expect_err("too many");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].line, 4 + 2 * 1_000 + 2 + 2 * 1_000, "{d:?}");
        assert!(d[0].message.contains("rule 2001: a file holds at most 2000 rules"), "{d:?}");
        let most: String = (0..2_000).map(|i| rule(i, "x")).collect();
        assert_eq!(parse(&format!("groups:\n  - name: a\n    rules:\n{most}")).expect("2,000").rules.len(), 2_000);
    }

    #[test]
    fn a_rules_file_past_one_mib_is_refused_unparsed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rules.yml");
        let mut text = GOOD.to_string();
        text.push_str(&"#".repeat((1 << 20) + 1 - text.len()));
        std::fs::write(&path, &text).expect("write");
        let why = crate::engine::load_rules(&path).expect_err("too big");
        assert!(why.contains("is over 1024 KiB"), "{why}");
        text.pop();
        std::fs::write(&path, &text).expect("write");
        crate::engine::load_rules(&path).expect("1 MiB is fine");
    }
}
