//! The Prometheus exposition formats: metric families (a name in base units, a type, samples)
//! and their rendering as the text format 0.0.4, or OpenMetrics 1.0 (`# UNIT` from the name's
//! unit suffix: `_seconds`, `_bytes`, `_ratio`). Every `/metrics` family — the agent's, the
//! groups', statsd's — is one of these; nothing else writes exposition text.

use std::fmt::Write as _;

pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family. For counters `name` has no `_total`; the renderer adds it to samples
/// (and, in the 0.0.4 format, to the HELP and TYPE lines, as Prometheus's own clients do).
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Appended to the family name: `""`, `"_bucket"`, `"_sum"`, `"_count"`.
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl Family {
    pub fn new(name: impl Into<String>, kind: Kind, help: &'static str) -> Self {
        Self { name: name.into(), help, kind, samples: Vec::new() }
    }

    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push(Sample { suffix: "", labels, value });
    }

    /// The family with one unlabelled sample of `value`, or none when it is unknown.
    pub fn with(mut self, value: Option<f64>) -> Self {
        if let Some(v) = value {
            self.push(Vec::new(), v);
        }
        self
    }
}

/// Escapes a label value: backslash, double quote and line feed, as both formats require.
pub fn escape_label(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Renders families in the 0.0.4 text format, or OpenMetrics (`# EOF`-terminated).
pub fn render(families: &[Family], openmetrics: bool) -> String {
    let mut out = render_families(families, openmetrics);
    if openmetrics {
        out.push_str(EOF);
    }
    out
}

/// OpenMetrics' last line.
pub const EOF: &str = "# EOF\n";

/// The families alone, without OpenMetrics' `# EOF`, so parts rendered apart can be joined.
pub fn render_families(families: &[Family], openmetrics: bool) -> String {
    let mut out = String::with_capacity(families.len() * 160);
    for f in families {
        let type_name = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let header_name =
            if f.kind == Kind::Counter && !openmetrics { format!("{}_total", f.name) } else { f.name.clone() };
        out.push_str("# HELP ");
        out.push_str(&header_name);
        out.push(' ');
        escape_help(f.help, &mut out);
        out.push('\n');
        let _ = writeln!(out, "# TYPE {header_name} {type_name}");
        if openmetrics {
            if let Some(unit) = ["seconds", "bytes", "ratio"].iter().find(|u| f.name.ends_with(&format!("_{u}"))) {
                let _ = writeln!(out, "# UNIT {} {unit}", f.name);
            }
        }
        for s in &f.samples {
            out.push_str(&f.name);
            if f.kind == Kind::Counter {
                out.push_str("_total");
            }
            out.push_str(s.suffix);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape_label(v, &mut out);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(&mut out, s.value);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label("a\\b\"c\nd<img src=x>", &mut out);
        assert_eq!(out, "a\\\\b\\\"c\\nd<img src=x>");
    }

    #[test]
    fn counters_get_total_and_openmetrics_ends_with_eof() {
        let mut f = Family::new("proctor_x_seconds", Kind::Counter, "help \\ with\nnewline");
        f.push(vec![("a", "1".into())], 1.5);
        let text = render(std::slice::from_ref(&f), false);
        assert!(text.contains("# HELP proctor_x_seconds_total help \\\\ with\\nnewline\n"), "{text}");
        assert!(text.contains("# TYPE proctor_x_seconds_total counter\n"), "{text}");
        assert!(text.contains("proctor_x_seconds_total{a=\"1\"} 1.5\n"), "{text}");
        assert!(!text.contains("# EOF"));
        let om = render(&[f], true);
        assert!(om.contains("# TYPE proctor_x_seconds counter\n"), "{om}");
        assert!(om.contains("# UNIT proctor_x_seconds seconds\n"), "{om}");
        assert!(om.ends_with("# EOF\n"), "{om}");
    }

    #[test]
    fn values_render_like_prometheus() {
        let mut s = String::new();
        for v in [3.0, 0.25, f64::NAN, f64::INFINITY, 1e20] {
            write_value(&mut s, v);
            s.push(' ');
        }
        assert_eq!(s, "3 0.25 NaN +Inf 100000000000000000000 ");
    }
}
