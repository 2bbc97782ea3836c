//! Annotation templates: `{{ $value }}` (the value, in its series' unit), `{{ $labels.NAME }}`
//! (an instance's label: pid, name, start, group…) and literal text. Prometheus's template
//! language is larger; these two are what alert summaries use.

use std::collections::BTreeMap;

/// Why a template cannot be rendered, said when the rules file is read.
pub fn check(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err("a `{{` without its `}}`".to_string());
        };
        let inner = after[..close].trim();
        if inner != "$value" && inner.strip_prefix("$labels.").is_none_or(str::is_empty) {
            return Err(format!("`{{{{ {inner} }}}}`: only {{{{ $value }}}} and {{{{ $labels.NAME }}}} are known"));
        }
        rest = &after[close + 2..];
    }
    Ok(())
}

/// Renders a checked template; an unknown label renders as empty text.
pub fn render(template: &str, value: &str, labels: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = after[..close].trim();
        if inner == "$value" {
            out.push_str(value);
        } else if let Some(label) = inner.strip_prefix("$labels.") {
            out.push_str(labels.get(label).map_or("", String::as_str));
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_labels_are_filled_in() {
        let labels = BTreeMap::from([("name".to_string(), "gunicorn".to_string())]);
        assert_eq!(render("{{$labels.name}} uses {{ $value }}", "2.1 GiB", &labels), "gunicorn uses 2.1 GiB");
        assert!(check("{{ $value }} of {{ $labels.pid }}").is_ok());
        assert!(check("{{ humanize $value }}").expect_err("an error").contains("only"));
        assert!(check("{{ $value").is_err());
    }
}
