//! Which probe records a report covers: the filters `proctor probe analyze` and `proctor dump
//! probe` share (vlogdump's, for requests), the one-line listing of the records that matched,
//! and the report (text, JSON, plot) over them. Every filter is parsed by clap before anything is read, so a bad one is an error
//! (exit 2) that costs nothing.
//!
//! Filters of one kind given more than once are alternatives (`--status 5xx --status 404`:
//! either); filters of different kinds must all hold (`--status 5xx --url /api`: both).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use proctor_probe::plot;
use proctor_probe::report::{self, ReportConfig};

use proctor_probe::record::PHASE_NAMES;
use proctor_probe::report::Selection;
use proctor_units::units::duration_ns;

use crate::output::Format;
use proctor_probe::server_timing;
use proctor_probe::ws::WsSummary;

use proctor_probe::{ErrorClass, RequestRecord};
use proctor_vocab::{duration_arg, format_utc};
use regex::Regex;

/// The filter flags, flattened into each command's arguments.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only requests whose total took at least this long (e.g. 250ms).
    #[arg(long, value_parser = duration_arg, value_name = "D")]
    pub slow: Option<Duration>,
    /// Only requests with this status: 404, or a class such as 5xx; `none` for requests that
    /// got no response. Repeat for either.
    #[arg(long = "status", value_parser = parse_status, value_name = "CODE|Nxx|none")]
    pub statuses: Vec<StatusFilter>,
    /// Only requests whose URL matches this regular expression (unanchored; records written
    /// before URLs were recorded have none and never match). Repeat for either.
    #[arg(long = "url", value_parser = parse_url, value_name = "REGEX")]
    pub urls: Vec<Regex>,
    /// Only requests that failed with this error class (dns, refused, unreachable, timeout,
    /// tls, protocol, io, http_4xx, http_5xx) or `any`. Repeat for either.
    #[arg(long = "error", value_parser = parse_error, value_name = "CLASS")]
    pub errors: Vec<ErrorFilter>,
    /// Only requests whose phase took more (`wait>100ms`) or less (`connect<1ms`) than a
    /// duration: queue, dns, connect, tls, write, wait, transfer, or a server substep as
    /// `server:NAME` (its Server-Timing name). A request without that phase does not match.
    /// Repeat for either.
    #[arg(long = "phase", value_parser = parse_phase, value_name = "PHASE>D")]
    pub phases: Vec<PhaseFilter>,
    /// Print the matching requests, one per line (time, URL, status, total, phases), instead
    /// of the report.
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Exact(u16),
    /// The hundreds digit: `5xx` is 5.
    Class(u16),
    /// No response arrived.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFilter {
    Class(ErrorClass),
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseFilter {
    /// A phase name, or `server:NAME`.
    pub name: String,
    pub above: bool,
    pub ns: u64,
    text: String,
}

fn parse_status(text: &str) -> Result<StatusFilter, String> {
    let lower = text.trim().to_ascii_lowercase();
    if lower == "none" {
        return Ok(StatusFilter::None);
    }
    let bytes = lower.as_bytes();
    if bytes.len() == 3 && (b'1'..=b'5').contains(&bytes[0]) {
        if &bytes[1..] == b"xx" {
            return Ok(StatusFilter::Class(u16::from(bytes[0] - b'0')));
        }
        if let Ok(code) = lower.parse::<u16>() {
            return Ok(StatusFilter::Exact(code));
        }
    }
    Err(format!("not a status: {text:?} (try 404, 5xx or none)"))
}

fn parse_url(text: &str) -> Result<Regex, String> {
    // The regex crate matches in linear time and caps a compiled program's size.
    Regex::new(text).map_err(|err| format!("not a regular expression: {err}"))
}

fn parse_error(text: &str) -> Result<ErrorFilter, String> {
    if text == "any" {
        return Ok(ErrorFilter::Any);
    }
    ErrorClass::ALL.iter().find(|class| class.name() == text).map(|&class| ErrorFilter::Class(class)).ok_or_else(|| {
        let names: Vec<&str> = ErrorClass::ALL.iter().map(|class| class.name()).collect();
        format!("no error class {text:?} (one of {}, or any)", names.join(", "))
    })
}

fn parse_phase(text: &str) -> Result<PhaseFilter, String> {
    let at = text.find(['>', '<']).ok_or_else(|| format!("not a phase condition: {text:?} (try wait>100ms)"))?;
    let (name, rest) = text.split_at(at);
    let name = name.trim();
    let known = PHASE_NAMES.contains(&name)
        || name
            .strip_prefix(server_timing::PREFIX)
            .is_some_and(|step| !step.is_empty() && step.len() <= server_timing::MAX_NAME_BYTES);
    if !known {
        return Err(format!(
            "no phase {name:?} in {text:?} (one of {}, or server:NAME for a Server-Timing substep)",
            PHASE_NAMES.join(", ")
        ));
    }
    let duration = duration_arg(&rest[1..]).map_err(|err| format!("{text:?}: {err}"))?;
    Ok(PhaseFilter {
        name: name.to_string(),
        above: rest.starts_with('>'),
        ns: u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX),
        text: text.to_string(),
    })
}

/// A phase's time in a record, by report name (`wait`, `server:db`).
pub fn phase_ns(record: &RequestRecord, name: &str) -> Option<u64> {
    if let Some(step) = name.strip_prefix(server_timing::PREFIX) {
        return record.substep_ns(step);
    }
    let index = PHASE_NAMES.iter().position(|phase| *phase == name)?;
    record.phases.values().get(index).copied().flatten()
}

/// The filters of a command, with its time range.
#[derive(Debug, Clone)]
pub struct Filters {
    pub args: FilterArgs,
    /// Sent at or after / at or before, Unix ns.
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// `--from`/`--to` as given, for the report.
    pub range_text: Vec<String>,
}

impl Filters {
    /// Whether any filter was given (a report then says how many of how many matched).
    pub fn any(&self) -> bool {
        let args = &self.args;
        args.slow.is_some()
            || !args.statuses.is_empty()
            || !args.urls.is_empty()
            || !args.errors.is_empty()
            || !args.phases.is_empty()
            || self.from.is_some()
            || self.to.is_some()
    }

    pub fn keeps(&self, record: &RequestRecord) -> bool {
        let args = &self.args;
        let either = |empty: bool, one: &dyn Fn() -> bool| empty || one();
        self.from.is_none_or(|from| record.sent_unix_ns >= from)
            && self.to.is_none_or(|to| record.sent_unix_ns <= to)
            && args.slow.is_none_or(|slow| u128::from(record.total_ns) >= slow.as_nanos())
            && either(args.statuses.is_empty(), &|| {
                args.statuses.iter().any(|status| match (*status, record.status) {
                    (StatusFilter::None, status) => status.is_none(),
                    (StatusFilter::Exact(code), Some(status)) => status == code,
                    (StatusFilter::Class(class), Some(status)) => status / 100 == class,
                    (_, None) => false,
                })
            })
            && either(args.urls.is_empty(), &|| {
                record.url.as_deref().is_some_and(|url| args.urls.iter().any(|regex| regex.is_match(url)))
            })
            && either(args.errors.is_empty(), &|| {
                args.errors.iter().any(|error| match error {
                    ErrorFilter::Any => record.error.is_some(),
                    ErrorFilter::Class(class) => record.error == Some(*class),
                })
            })
            && either(args.phases.is_empty(), &|| {
                args.phases.iter().any(|phase| {
                    phase_ns(record, &phase.name)
                        .is_some_and(|ns| if phase.above { ns > phase.ns } else { ns < phase.ns })
                })
            })
    }

    /// The filters as given, for "matched N of M (…)".
    pub fn describe(&self) -> Vec<String> {
        let args = &self.args;
        let mut out = Vec::new();
        if let Some(slow) = args.slow {
            out.push(format!("--slow {}", proctor_vocab::format_duration(slow)));
        }
        for status in &args.statuses {
            out.push(match status {
                StatusFilter::Exact(code) => format!("--status {code}"),
                StatusFilter::Class(class) => format!("--status {class}xx"),
                StatusFilter::None => "--status none".to_string(),
            });
        }
        out.extend(args.urls.iter().map(|regex| format!("--url {}", regex.as_str())));
        for error in &args.errors {
            out.push(match error {
                ErrorFilter::Any => "--error any".to_string(),
                ErrorFilter::Class(class) => format!("--error {}", class.name()),
            });
        }
        out.extend(args.phases.iter().map(|phase| format!("--phase {}", phase.text)));
        out.extend(self.range_text.iter().cloned());
        out
    }

    /// Keeps the matching records; the selection to put in the report when any filter was
    /// given.
    pub fn apply(&self, records: Vec<RequestRecord>) -> (Vec<RequestRecord>, Option<Selection>) {
        if !self.any() {
            return (records, None);
        }
        let of = records.len() as u64;
        let kept: Vec<RequestRecord> = records.into_iter().filter(|record| self.keeps(record)).collect();
        let selection = Selection { matched: kept.len() as u64, of, filters: self.describe() };
        (kept, Some(selection))
    }
}

/// `2023-11-14T22:13:20.123Z` (milliseconds).
pub fn time_ms(unix_ns: u64) -> String {
    let seconds = format_utc(unix_ns);
    format!("{}.{:03}Z", seconds.trim_end_matches('Z'), unix_ns % 1_000_000_000 / 1_000_000)
}

/// One request in a line: time, URL, status (or error class), total, then each phase and
/// substep that happened (`wait 8.01 ms server:db 2.50 ms`).
pub fn list_line(record: &RequestRecord) -> String {
    let status = match (record.status, record.error) {
        (Some(status), _) => status.to_string(),
        (None, Some(class)) => class.name().to_string(),
        (None, None) => "-".to_string(),
    };
    let mut line = format!(
        "{}  {}  {}  {}",
        time_ms(record.sent_unix_ns),
        record.url.as_deref().unwrap_or("-"),
        status,
        duration_ns(record.total_ns as f64)
    );
    let mut separator = "  ";
    for (name, value) in PHASE_NAMES.iter().zip(record.phases.values()) {
        if let Some(ns) = value {
            let _ = write!(line, "{separator}{name} {}", duration_ns(ns as f64));
            separator = " ";
        }
    }
    for step in &record.server_timing {
        if let Some(ns) = step.dur_ns {
            let _ = write!(line, "{separator}{}{} {}", server_timing::PREFIX, step.name, duration_ns(ns as f64));
            separator = " ";
        }
    }
    line
}

/// The report (or, with `--list`, the lines) over the records `filters` keep, saying how many
/// of how many matched; shared with `proctor dump probe`.
pub fn report_filtered(
    records: Vec<RequestRecord>,
    filters: &Filters,
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
) -> anyhow::Result<()> {
    let (records, selection) = filters.apply(records);
    if filters.args.list {
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        for record in &records {
            match format {
                Format::Text => writeln!(stdout, "{}", list_line(record))?,
                Format::Json => {
                    serde_json::to_writer(&mut stdout, record)?;
                    stdout.write_all(b"\n")?;
                }
            }
        }
        stdout.flush()?;
        if let Some(selection) = &selection {
            eprintln!(
                "proctor: matched {} of {} requests ({})",
                selection.matched,
                selection.of,
                selection.filters.join(" ")
            );
        }
        return Ok(());
    }
    print_report(&records, title, format, plot_path, selection, None, None)?;
    Ok(())
}

pub fn print_report(
    records: &[RequestRecord],
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
    selection: Option<report::Selection>,
    websocket: Option<&WsSummary>,
    energy: Option<(&serde_json::Value, &str)>,
) -> anyhow::Result<report::Report> {
    let mut report = report::build(records, &ReportConfig::default());
    report.selection = selection;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    match format {
        Format::Text => {
            stdout.write_all(report::render_text(&report, title).as_bytes())?;
            if let Some(summary) = websocket {
                stdout.write_all(websocket_text(summary).as_bytes())?;
            }
            if let Some((_, text)) = energy {
                stdout.write_all(text.as_bytes())?;
            }
        }
        Format::Json => {
            let mut value = serde_json::to_value(&report)?;
            if let (Some(summary), Some(object)) = (websocket, value.as_object_mut()) {
                object.insert("websocket".into(), serde_json::to_value(summary)?);
            }
            if let (Some((energy, _)), Some(object)) = (energy, value.as_object_mut()) {
                object.insert("energy".into(), energy.clone());
            }
            serde_json::to_writer_pretty(&mut stdout, &value)?;
            stdout.write_all(b"\n")?;
        }
    }
    stdout.flush()?;
    if let Some(path) = plot_path {
        let bytes = match plot::Format::from_path(path)? {
            plot::Format::Png => plot::png(records, &report, title),
            plot::Format::Svg => plot::svg(records, &report, title).into_bytes(),
        };
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("proctor: plot written to {}", path.display());
    }
    Ok(report)
}

/// "websocket: 1 connection; 0 pings, 0 closes; 2 echoes matched no message sent"
pub(crate) fn websocket_text(summary: &WsSummary) -> String {
    let mut text = format!(
        "\nwebsocket: {} opened; {} answered, {} from the server",
        plural(summary.connections, "connection", "connections"),
        plural(summary.pings, "ping", "pings"),
        plural(summary.closes, "close", "closes"),
    );
    if summary.unmatched > 0 {
        text.push_str(&format!(
            "; {} matched no message sent (greetings, or echoes after their timeout)",
            plural(summary.unmatched, "echo", "echoes")
        ));
    }
    if summary.other > 0 {
        text.push_str(&format!(
            "; {} that were not stdout",
            plural(summary.other, "terminal message", "terminal messages")
        ));
    }
    if let Some(last) = &summary.last_close {
        text.push_str(&format!("\n  last connection loss: {last}"));
    }
    text.push('\n');
    text
}

/// "1 send", "3 sends".
pub(crate) fn plural(count: u64, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_or_say_what_is_wrong() {
        assert_eq!(parse_status("5xx"), Ok(StatusFilter::Class(5)));
        assert_eq!(parse_status("404"), Ok(StatusFilter::Exact(404)));
        assert_eq!(parse_status("NONE"), Ok(StatusFilter::None));
        for bad in ["6xx", "40", "4x4", "2000", "", "abc"] {
            assert!(parse_status(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_error("http_5xx"), Ok(ErrorFilter::Class(ErrorClass::Http5xx)));
        assert!(parse_error("boom").is_err_and(|err| err.contains("refused")));
        let phase = parse_phase("server:db>50ms").expect("valid");
        assert_eq!((phase.name.as_str(), phase.above, phase.ns), ("server:db", true, 50_000_000));
        assert!(!parse_phase("connect<1ms").expect("valid").above);
        for bad in ["wait", "bogus>1ms", "server:>1ms", "wait>soon", ">5ms"] {
            assert!(parse_phase(bad).is_err(), "{bad}");
        }
        assert!(parse_url("(").is_err());
        assert_eq!(time_ms(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123Z");
    }
}
