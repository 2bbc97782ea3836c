//! pgtop's slow threshold as alert rules: `top --slow cpu>80%,rss>2GiB,state=D>5s` is sugar for
//! one rule per part (`process.cpu_percent > 80%`, …, `for:` the part's hold time), compiled and
//! evaluated by this crate like any rules file, so a process past a `--slow` rule is what the
//! alerts engine calls firing, and `--slow-log` is its JSON-lines log.

use crate::rules::RuleSet;

/// The rules of one `--slow` spec, in its order.
#[derive(Debug)]
pub struct SlowRules {
    pub set: RuleSet,
    /// Each rule's part as typed (`rss>2GiB`), by the rule's position; also its `slow` label.
    pub texts: Vec<String>,
}

/// Parses `cpu>80%,rss>2GiB,state=D>5s`: comma-separated `FIELD OP VALUE[>HOLD]`, FIELD an alias
/// of the one table (`proctor_vocab::fields::ALIASES`) or any public process field name, OP one
/// of `> >= < <= = !=`, VALUE in the one quantity grammar (`80%`, `2G`, `1.5s`; a bare number is
/// in the field's unit), HOLD a duration the condition must last (the rule's `for:`).
pub fn parse(spec: &str) -> Result<SlowRules, String> {
    let parts: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let mut yaml = String::from("groups:\n  - name: slow\n    rules:\n");
    let mut names: Vec<String> = Vec::new();
    for part in &parts {
        let (expr, hold) = rule_of(part)?;
        let mut name = name_of(part);
        if names.contains(&name) {
            name = format!("{name}-{}", names.len() + 1);
        }
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        yaml.push_str(&format!(
            "      - alert: {}\n        expr: {}\n        for: {}ms\n        labels:\n          slow: {}\n",
            q(&name),
            q(&expr),
            hold.as_millis(),
            q(part)
        ));
        names.push(name);
    }
    let set = crate::rules::parse(&yaml).map_err(|diags| {
        let first = diags.first().map_or_else(String::new, |d| d.message.clone());
        format!("'{spec}': {first}")
    })?;
    Ok(SlowRules { set, texts: parts.iter().map(|p| p.to_string()).collect() })
}

/// A part's rule name: its text in the letters a rule name may use (`rss>2GiB` → `rss_gt_2GiB`).
fn name_of(part: &str) -> String {
    let mut out = String::new();
    let mut rest = part;
    // The first comparison is the rule's; a later '>' starts the hold time.
    let mut compared = false;
    while let Some(c) = rest.chars().next() {
        let (word, len) = match rest {
            r if r.starts_with(">=") => ("_ge_", 2),
            r if r.starts_with("<=") => ("_le_", 2),
            r if r.starts_with("!=") => ("_ne_", 2),
            r if r.starts_with('>') => (if compared { "_for_" } else { "_gt_" }, 1),
            r if r.starts_with('<') => ("_lt_", 1),
            r if r.starts_with('=') => ("_eq_", 1),
            r if r.starts_with('%') => ("pct", 1),
            r if r.starts_with('/') => ("_per_", 1),
            _ => ("", c.len_utf8()),
        };
        if word.is_empty() {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                out.push(c);
            } else if !c.is_whitespace() {
                out.push('_');
            }
        } else {
            compared |= word != "pct" && word != "_per_";
            out.push_str(word);
        }
        rest = &rest[len..];
    }
    out
}

/// `FIELD OP VALUE[>HOLD]` as an alert expression and its hold time.
fn rule_of(text: &str) -> Result<(String, std::time::Duration), String> {
    let at = text
        .find(['>', '<', '=', '!'])
        .ok_or_else(|| format!("'{text}': expected FIELD>VALUE (or >=, <, <=, =, !=), e.g. cpu>80%"))?;
    let name = text[..at].trim();
    let rest = &text[at..];
    let (op, rest) = [(">=", ">="), ("<=", "<="), ("!=", "!="), (">", ">"), ("<", "<"), ("=", "==")]
        .iter()
        .find_map(|(typed, op)| rest.strip_prefix(typed).map(|r| (*op, r)))
        .ok_or_else(|| format!("'{text}': no comparison after '{name}'"))?;
    let field = proctor_vocab::fields::process_field(name).ok_or_else(|| {
        format!(
            "'{text}': unknown field '{name}' (use {} or a field of `proctor dump process --fields list`)",
            proctor_vocab::fields::ALIASES.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ")
        )
    })?;
    // `VALUE>HOLD`: the last '>' followed by a duration is the hold time.
    let (value, hold) = match rest.rfind('>') {
        Some(i) => {
            let hold = proctor_vocab::parse_duration(rest[i + 1..].trim())
                .map_err(|e| format!("'{text}': the hold time after '>' {e}"))?;
            (rest[..i].trim(), hold)
        }
        None => (rest.trim(), std::time::Duration::ZERO),
    };
    if value.is_empty() {
        return Err(format!("'{text}': no value to compare with"));
    }
    let literal = if field.unit.is_numeric() {
        let q = proctor_vocab::quantity::parse_quantity(value).map_err(|e| format!("'{text}': '{value}': {e}"))?;
        if !q.dim.fits(field.unit) {
            return Err(format!(
                "'{text}': '{value}' is {}, which does not fit a {} field",
                q.dim.name(),
                field.unit.as_str()
            ));
        }
        // In the field's base unit, with that unit written out, so the rule means what was typed.
        let suffix = match q.dim {
            proctor_vocab::quantity::Dim::None => match field.unit {
                proctor_vocab::units::Unit::Percent => "%",
                proctor_vocab::units::Unit::Seconds => "s",
                _ => "",
            },
            proctor_vocab::quantity::Dim::Percent => "%",
            proctor_vocab::quantity::Dim::Seconds => "s",
            proctor_vocab::quantity::Dim::Bytes => "B",
            proctor_vocab::quantity::Dim::BytesPerSec => "B/s",
            proctor_vocab::quantity::Dim::PerSec => "/s",
        };
        format!("{:?}{suffix}", q.value)
    } else {
        if !matches!(op, "==" | "!=") {
            return Err(format!("'{text}': {} is text: compare it with = or !=", field.name));
        }
        serde_json::to_string(value).unwrap_or_default()
    };
    Ok((format!("process.{} {op} {literal}", field.name), hold))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_is_three_alert_rules() {
        let rules = parse("cpu>80%,rss>2GiB,state=D>5s").expect("parses");
        let r = &rules.set.rules;
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].expr_text, "process.cpu_percent > 80.0%");
        assert_eq!(r[1].expr_text, format!("process.rss_bytes > {:?}B", 2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!((r[2].expr_text.as_str(), r[2].for_secs), ("process.state == \"D\"", 5.0));
        assert_eq!(
            r.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["cpu_gt_80pct", "rss_gt_2GiB", "state_eq_D_for_5s"]
        );
        assert_eq!(r[1].labels.get("slow").map(String::as_str), Some("rss>2GiB"));
        assert_eq!(rules.texts, ["cpu>80%", "rss>2GiB", "state=D>5s"]);
        assert_eq!(parse("cpu_percent>5%>10s").expect("parses").set.rules[0].name, "cpu_percent_gt_5pct_for_10s");
        let time = parse("time>=1m").expect("parses");
        assert_eq!(time.set.rules[0].expr_text, "process.cpu_seconds_total >= 60.0s");
        let bare = parse("cpu>80,rss>1000").expect("bare numbers are in the field's unit");
        assert_eq!(bare.set.rules[0].expr_text, "process.cpu_percent > 80.0%");
        assert_eq!(bare.set.rules[1].expr_text, "process.rss_bytes > 1000.0");
    }

    #[test]
    fn the_same_part_twice_is_two_rules() {
        let rules = parse("cpu>80%,cpu>80%").expect("parses");
        assert_eq!(rules.set.rules.len(), 2);
        assert_ne!(rules.set.rules[0].name, rules.set.rules[1].name);
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
}
