//! process-exporter's grouping rules, read from the same YAML file people already have:
//!
//! ```yaml
//! process_names:
//!   - name: "{{.Comm}}"          # optional; default "{{.ExeBase}}"
//!     comm: [bash, sh]           # any of: the kernel's 15-byte name, exactly
//!     exe: [/usr/bin/python3]    # any of: argv[0]; without a slash, argv[0]'s basename
//!     cmdline: ['-m\s+(?P<Mod>\S+)']  # all of: regexes over the arguments joined by spaces
//! ```
//!
//! A rule matches when every selector it has matches; the first matching rule names the
//! process. Templates take `{{.Comm}}`, `{{.ExeBase}}`, `{{.ExeFull}}`, `{{.Username}}` and
//! `{{.Matches.NAME}}` (a named capture of a cmdline regex). Per-process fields (`.PID`,
//! `.StartTime`) are refused: one group per process is what grouping exists to avoid.
//! Every mistake is reported with its line and column, all of them at once; so is a file past
//! one of [`crate::limits`].

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;

use crate::limits::{RegexBudget, MAX_RULES};
use crate::yaml::{load, Node, Pos};

/// A mistake in a rules file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.col, self.message)
    }
}

fn diag(pos: Pos, message: impl Into<String>) -> Diagnostic {
    Diagnostic { line: pos.line, col: pos.col, message: message.into() }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Comm,
    ExeBase,
    ExeFull,
    Username,
    Match(String),
}

/// A group name template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

/// The fields a template may name.
pub const TEMPLATE_FIELDS: &str = ".Comm, .ExeBase, .ExeFull, .Username, .Matches.NAME";

impl Template {
    /// Parses `{{.Comm}}-{{.Matches.Mod}}`; the error says what is wrong and where in the text.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("'{{{{' at character {} is never closed", text.len() - rest.len() + open + 1))?;
            let field = after[..close].trim();
            pieces.push(match field {
                ".Comm" => Piece::Comm,
                ".ExeBase" => Piece::ExeBase,
                ".ExeFull" => Piece::ExeFull,
                ".Username" => Piece::Username,
                ".PID" | ".StartTime" => {
                    return Err(format!(
                        "{{{{{field}}}}} would name one group per process; groups exist to avoid that (use {TEMPLATE_FIELDS})"
                    ))
                }
                ".Matches" => return Err("{{.Matches}} alone prints a Go map; name the capture: {{.Matches.NAME}}".to_string()),
                f if f.starts_with(".Matches.") && f.len() > ".Matches.".len() => Piece::Match(f[".Matches.".len()..].to_string()),
                f => return Err(format!("unknown template field '{f}' (known: {TEMPLATE_FIELDS})")),
            });
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            if rest.contains("}}") {
                return Err("'}}' without an opening '{{'".into());
            }
            pieces.push(Piece::Text(rest.to_string()));
        }
        Ok(Template(pieces))
    }

    fn captures(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|p| match p {
            Piece::Match(name) => Some(name.as_str()),
            _ => None,
        })
    }

    fn render(&self, p: &Proc, matches: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Comm => out.push_str(p.comm),
                Piece::ExeBase => out.push_str(exe_base(p)),
                Piece::ExeFull => out.push_str(p.cmdline.and_then(|c| c.first()).map_or("", String::as_str)),
                Piece::Username => match (p.username, p.uid) {
                    (Some(name), _) => out.push_str(name),
                    (None, Some(uid)) => out.push_str(&uid.to_string()),
                    (None, None) => {}
                },
                Piece::Match(name) => out.push_str(matches.get(name).map_or("", String::as_str)),
            }
        }
        out
    }
}

fn exe_base<'a>(p: &Proc<'a>) -> &'a str {
    match p.cmdline.and_then(|c| c.first()) {
        Some(argv0) if !argv0.is_empty() => argv0.rsplit('/').next().unwrap_or(argv0),
        // Kernel threads and zombies have no argv: process-exporter falls back to comm.
        _ => p.comm,
    }
}

/// One rule of `process_names`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: Template,
    pub comm: Vec<String>,
    pub exe: Vec<String>,
    pub cmdline: Vec<Regex>,
    /// Where the rule starts in its file.
    pub line: usize,
}

/// What a rule needs to know of a process.
#[derive(Debug, Clone, Copy)]
pub struct Proc<'a> {
    pub pid: u32,
    pub ppid: u32,
    pub comm: &'a str,
    /// `None` until the command line was read.
    pub cmdline: Option<&'a [String]>,
    pub uid: Option<u32>,
    pub username: Option<&'a str>,
}

impl Rule {
    /// The group name when this rule matches `p`.
    fn name_of(&self, p: &Proc) -> Option<String> {
        if !self.comm.is_empty() && !self.comm.iter().any(|c| c == p.comm) {
            return None;
        }
        if !self.exe.is_empty() {
            let argv0 = p.cmdline?.first()?;
            let base = argv0.rsplit('/').next().unwrap_or(argv0);
            let hit = self.exe.iter().any(|e| if e.contains('/') { e == argv0 } else { e == base });
            if !hit {
                return None;
            }
        }
        let mut matches = BTreeMap::new();
        if !self.cmdline.is_empty() {
            let joined = p.cmdline?.join(" ");
            for re in &self.cmdline {
                let caps = re.captures(&joined)?;
                for name in re.capture_names().flatten() {
                    if let Some(m) = caps.name(name) {
                        matches.insert(name.to_string(), m.as_str().to_string());
                    }
                }
            }
        }
        Some(self.name.render(p, &matches))
    }
}

/// A rules file.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub rules: Vec<Rule>,
}

impl Rules {
    /// Parses a process-exporter config; every mistake is returned, each with its position.
    pub fn parse(text: &str) -> Result<Rules, Vec<Diagnostic>> {
        let root = match load(text) {
            Ok(Some(root)) => root,
            Ok(None) => return Err(vec![diag(Pos { line: 1, col: 1 }, "the file is empty: expected process_names:")]),
            Err((pos, why)) => return Err(vec![diag(pos, why)]),
        };
        let mut errors = Vec::new();
        let Node::Map(top, _) = &root else {
            return Err(vec![diag(
                root.pos(),
                format!("expected a mapping with process_names:, found {}", root.kind()),
            )]);
        };
        let mut rules = Vec::new();
        let mut budget = RegexBudget::default();
        let mut seen = false;
        for (key, kpos, value) in top {
            if key != "process_names" {
                errors.push(diag(*kpos, format!("unknown key '{key}' (the file holds process_names:)")));
                continue;
            }
            seen = true;
            let Node::Seq(items, _) = value else {
                errors
                    .push(diag(value.pos(), format!("process_names must be a list of rules, found {}", value.kind())));
                continue;
            };
            if let Some(extra) = items.get(MAX_RULES) {
                errors.push(diag(
                    extra.pos(),
                    format!("rule {} of {}: a file holds at most {MAX_RULES} rules", MAX_RULES + 1, items.len()),
                ));
            }
            for item in items.iter().take(MAX_RULES) {
                if let Some(rule) = parse_rule(item, &mut budget, &mut errors) {
                    rules.push(rule);
                }
            }
        }
        if !seen && errors.is_empty() {
            errors.push(diag(root.pos(), "no process_names: in this file"));
        }
        if errors.is_empty() {
            Ok(Rules { rules })
        } else {
            Err(errors)
        }
    }

    /// The name of the first rule matching `p`, if any.
    pub fn name_of(&self, p: &Proc) -> Option<String> {
        self.rules.iter().find_map(|r| r.name_of(p))
    }

    /// Every process's group: its own first matching rule, else the group of its nearest
    /// ancestor that has one (children follow their group), else none. Parent loops in
    /// hostile data end.
    pub fn assign(&self, procs: &[Proc]) -> BTreeMap<u32, String> {
        let own: BTreeMap<u32, String> = procs.iter().filter_map(|p| self.name_of(p).map(|n| (p.pid, n))).collect();
        follow_parents(procs, &own)
    }
}

/// Each process's name from `own` (the processes a rule took), else its nearest ancestor's in
/// `own`; the walk up ends at a loop or at most 4096 steps.
pub fn follow_parents(procs: &[Proc], own: &BTreeMap<u32, String>) -> BTreeMap<u32, String> {
    let parent: BTreeMap<u32, u32> = procs.iter().map(|p| (p.pid, p.ppid)).collect();
    let mut out = BTreeMap::new();
    for p in procs {
        let mut at = p.pid;
        for _ in 0..=procs.len().min(4096) {
            if let Some(name) = own.get(&at) {
                out.insert(p.pid, name.clone());
                break;
            }
            match parent.get(&at) {
                Some(&pp) if pp != 0 && pp != at => at = pp,
                _ => break,
            }
        }
    }
    out
}

fn strings(node: &Node, what: &str, errors: &mut Vec<Diagnostic>) -> Vec<(String, Pos)> {
    match node {
        Node::Seq(items, _) => items
            .iter()
            .filter_map(|i| match i {
                Node::Scalar(s, p) => Some((s.clone(), *p)),
                other => {
                    errors
                        .push(diag(other.pos(), format!("each {what} entry must be a string, found {}", other.kind())));
                    None
                }
            })
            .collect(),
        // One string where a list was meant: process-exporter refuses it, and so does this.
        other => {
            errors.push(diag(other.pos(), format!("{what} must be a list of strings, found {}", other.kind())));
            Vec::new()
        }
    }
}

fn parse_rule(item: &Node, budget: &mut RegexBudget, errors: &mut Vec<Diagnostic>) -> Option<Rule> {
    let Node::Map(entries, pos) = item else {
        errors.push(diag(
            item.pos(),
            format!("each rule must be a mapping (name, comm, exe, cmdline), found {}", item.kind()),
        ));
        return None;
    };
    let before = errors.len();
    let mut name = None;
    let (mut comm, mut exe, mut cmdline) = (Vec::new(), Vec::new(), Vec::new());
    let mut selectors = 0;
    for (key, kpos, value) in entries {
        match key.as_str() {
            "name" => match value {
                Node::Scalar(text, p) => match Template::parse(text) {
                    Ok(t) => name = Some((t, *p)),
                    Err(why) => errors.push(diag(*p, format!("name template: {why}"))),
                },
                other => errors.push(diag(other.pos(), format!("name must be a string, found {}", other.kind()))),
            },
            "comm" => {
                selectors += 1;
                comm = strings(value, "comm", errors).into_iter().map(|(s, _)| s).collect();
            }
            "exe" => {
                selectors += 1;
                exe = strings(value, "exe", errors).into_iter().map(|(s, _)| s).collect();
            }
            "cmdline" => {
                selectors += 1;
                for (text, p) in strings(value, "cmdline", errors) {
                    match budget.compile(&text) {
                        Ok(re) => cmdline.push(re),
                        Err(why) => errors.push(diag(p, format!("cmdline regex '{text}': {why}"))),
                    }
                }
            }
            other => {
                errors.push(diag(*kpos, format!("unknown key '{other}' in a rule (known: name, comm, exe, cmdline)")))
            }
        }
    }
    if selectors == 0 {
        errors.push(diag(*pos, "a rule needs at least one of comm, exe or cmdline"));
    }
    let (name, name_pos) = name.unwrap_or((Template(vec![Piece::ExeBase]), *pos));
    let captures: Vec<&str> = cmdline.iter().flat_map(|re| re.capture_names().flatten()).collect();
    for wanted in name.captures() {
        if !captures.contains(&wanted) {
            errors.push(diag(
                name_pos,
                format!(
                    "{{{{.Matches.{wanted}}}}} names no capture of this rule's cmdline regexes (write (?P<{wanted}>…))"
                ),
            ));
        }
    }
    (errors.len() == before).then_some(Rule { name, comm, exe, cmdline, line: pos.line })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc<'a>(pid: u32, ppid: u32, comm: &'a str, cmdline: &'a [String]) -> Proc<'a> {
        Proc { pid, ppid, comm, cmdline: Some(cmdline), uid: Some(1000), username: Some("alice") }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    const FILE: &str = r#"
process_names:
  - name: "{{.Comm}}"
    comm:
    - bash
  - exe:
    - /usr/bin/postgres
  - name: "py:{{.Matches.Mod}}"
    exe: [python3]
    cmdline:
    - '-m\s+(?P<Mod>\S+)'
  - name: "{{.Username}}-{{.ExeBase}}"
    cmdline: ['.+']
"#;

    #[test]
    fn process_exporter_rules_name_processes_with_the_first_rule_that_matches() {
        let rules = Rules::parse(FILE).expect("parses");
        assert_eq!(rules.rules.len(), 4);
        let bash = args(&["-bash"]);
        let pg = args(&["/usr/bin/postgres", "-D", "/data"]);
        let pg_elsewhere = args(&["/opt/postgres", "-D", "/data"]);
        let py = args(&["/usr/bin/python3", "-m", "http.server", "8000"]);
        let other = args(&["/bin/sleep", "60"]);
        assert_eq!(rules.name_of(&proc(1, 0, "bash", &bash)).as_deref(), Some("bash"));
        assert_eq!(rules.name_of(&proc(2, 0, "postgres", &pg)).as_deref(), Some("postgres"), "default name: ExeBase");
        assert_eq!(rules.name_of(&proc(3, 0, "postgres", &pg_elsewhere)).as_deref(), Some("alice-postgres"));
        assert_eq!(rules.name_of(&proc(4, 0, "python3", &py)).as_deref(), Some("py:http.server"));
        assert_eq!(rules.name_of(&proc(5, 0, "sleep", &other)).as_deref(), Some("alice-sleep"));
        let unread = Proc { cmdline: None, ..proc(6, 0, "sleep", &other) };
        assert_eq!(rules.name_of(&unread), None, "exe and cmdline need the command line");
    }

    #[test]
    fn children_follow_their_group_unless_they_match_a_rule_of_their_own() {
        let rules = Rules::parse(
            "process_names:\n  - name: wrapper\n    comm: [wrapper.sh]\n  - name: db\n    comm: [postgres]\n",
        )
        .expect("parses");
        let a = args(&["x"]);
        let procs = [
            proc(10, 1, "wrapper.sh", &a),
            proc(11, 10, "sleep", &a),
            proc(12, 11, "awk", &a),
            proc(13, 10, "postgres", &a),
            proc(14, 13, "sleep", &a),
            proc(20, 1, "cron", &a),
            // A parent loop in hostile data ends.
            proc(30, 31, "x", &a),
            proc(31, 30, "y", &a),
        ];
        let g = rules.assign(&procs);
        assert_eq!(g.get(&11).map(String::as_str), Some("wrapper"));
        assert_eq!(g.get(&12).map(String::as_str), Some("wrapper"));
        assert_eq!(g.get(&13).map(String::as_str), Some("db"));
        assert_eq!(g.get(&14).map(String::as_str), Some("db"));
        assert_eq!(g.get(&20), None);
        assert_eq!(g.get(&30), None);
    }

    #[test]
    fn every_mistake_is_reported_with_its_line_and_column() {
        let text = "process_names:\n  - name: \"{{.Pid}}\"\n    comm: [a]\n  - name: x\n    cmdline: ['(unclosed']\n  - name: \"{{.Matches.Nope}}\"\n    cmdline: ['a(?P<Yes>b)']\n  - name: y\n    commm: [z]\n  - name: \"{{.PID}}\"\n    comm: bash\n";
        let errors = Rules::parse(text).expect_err("bad rules");
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let has = |line: usize, says: &str| errors.iter().any(|e| e.line == line && e.message.contains(says));
        assert!(has(2, "unknown template field '.Pid'"), "{shown:#?}");
        assert!(has(5, "cmdline regex '(unclosed'"), "{shown:#?}");
        assert!(errors.iter().any(|e| e.line == 5 && e.col == 15), "the regex's own column: {shown:#?}");
        assert!(has(6, ".Matches.Nope"), "{shown:#?}");
        assert!(has(9, "unknown key 'commm'"), "{shown:#?}");
        assert!(has(8, "needs at least one of comm, exe or cmdline"), "{shown:#?}");
        assert!(has(10, "one group per process"), "{shown:#?}");
        assert!(has(11, "comm must be a list of strings"), "{shown:#?}");
        assert_eq!(errors.len(), 7, "{shown:#?}");
        let yaml = Rules::parse("process_names:\n  - name: [x\n").expect_err("not yaml");
        assert!(yaml[0].message.starts_with("not YAML"), "{yaml:?}");
        assert!(Rules::parse("").is_err() && Rules::parse("other: 1\n").is_err());
    }

    /// Issue 33: 50 rules of `\w{100}\w{100}` in a 2.5 KB file took 12 s and 606 MB to load.
    #[test]
    fn costly_regexes_and_too_many_rules_are_refused_naming_the_rule_and_the_limit() {
        let heavy: String =
            (0..50).map(|i| format!("  - name: r{i}\n    cmdline: ['\\w{{100}}\\w{{100}}']\n")).collect();
        let errors = Rules::parse(&format!("process_names:\n{heavy}")).expect_err("over the limit");
        assert_eq!(errors.len(), 50, "{errors:#?}");
        assert_eq!((errors[0].line, errors[0].col), (3, 15), "{errors:#?}");
        assert!(errors[0].message.contains("more than 1 MiB (the limit for one regex)"), "{errors:#?}");
        // Under the limit for one, over the file's: the first past it is named.
        let mid: String = (0..30).map(|i| format!("  - cmdline: ['{i}\\w{{40}}']\n")).collect();
        let errors = Rules::parse(&format!("process_names:\n{mid}")).expect_err("over the file's limit");
        assert!(errors[0].message.contains("more than 16 MiB together"), "{errors:#?}");
        assert!((18..30).contains(&errors[0].line), "{errors:#?}");
        let many: String = (0..2_001).map(|i| format!("  - comm: [c{i}]\n")).collect();
        let errors = Rules::parse(&format!("process_names:\n{many}")).expect_err("too many");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!(errors[0].line, 2_002, "the 2,001st rule");
        assert!(errors[0].message.contains("at most 2000 rules"), "{errors:#?}");
        let most: String = (0..2_000).map(|i| format!("  - comm: [c{i}]\n")).collect();
        assert_eq!(Rules::parse(&format!("process_names:\n{most}")).expect("2,000 rules").rules.len(), 2_000);
    }

    #[test]
    fn templates_parse_and_refuse_what_they_cannot_render() {
        assert!(Template::parse("{{ .Comm }}:{{.ExeFull}}").is_ok());
        assert!(Template::parse("{{.Matches}}").expect_err("map").contains("name the capture"));
        assert!(Template::parse("{{.Comm").expect_err("open").contains("never closed"));
        assert!(Template::parse("x}}").is_err());
        assert!(Template::parse("{{.StartTime}}").expect_err("per pid").contains("one group per process"));
    }
}
