//! Units and how values in them are written for people. The CLI's text output and the TUI
//! format through here; the dashboard gets the same unit names through [`crate::js`] and formats
//! with its own functions of the same rules (`web/static/js/format.js`).
//!
//! Rules: unknown is `-` (never a made-up 0); bytes in binary units with three significant
//! digits (`1.5 GiB`, `12 MiB`, `900 KiB`); percentages with one decimal below 10 and none
//! above (`3.4`, `57`); durations in the largest unit that keeps them readable.

use serde::Serialize;

/// What a field's number means. The name (`as_str`) is what the public field table and the
/// dashboard use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A count of things (processes, threads, pids, uids).
    Count,
    /// A plain number (a load average).
    Number,
    Bytes,
    BytesPerSec,
    /// Things per second (faults, context switches).
    PerSec,
    /// 0–100 of something the field names; CPU percent of one CPU can exceed 100.
    Percent,
    Seconds,
    /// CPUs' worth of time (1.5 = one and a half CPUs busy).
    Cpus,
    /// Power.
    Watts,
    UnixSeconds,
    UnixMillis,
    /// Free text (names, states, paths).
    Text,
    /// A list of text (a command line's arguments).
    TextList,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::Number => "number",
            Unit::Bytes => "bytes",
            Unit::BytesPerSec => "bytes/s",
            Unit::PerSec => "/s",
            Unit::Percent => "%",
            Unit::Seconds => "s",
            Unit::Cpus => "cpus",
            Unit::Watts => "W",
            Unit::UnixSeconds => "unix_s",
            Unit::UnixMillis => "unix_ms",
            Unit::Text => "text",
            Unit::TextList => "text[]",
        }
    }

    /// Sortable and comparable as a number.
    pub fn is_numeric(self) -> bool {
        !matches!(self, Unit::Text | Unit::TextList)
    }

    /// What a value in this unit is multiplied by on `/metrics`, whose families are in base
    /// units: a percent is a `_ratio` (0–1), a millisecond timestamp seconds.
    pub fn prometheus_scale(self) -> f64 {
        match self {
            Unit::Percent => 0.01,
            Unit::UnixMillis => 0.001,
            _ => 1.0,
        }
    }

    /// `value` written for people in this unit.
    pub fn format(self, value: Option<f64>) -> String {
        let Some(v) = value.filter(|v| v.is_finite()) else { return DASH.to_string() };
        match self {
            Unit::Bytes => bytes(v.max(0.0) as u64),
            Unit::BytesPerSec => format!("{}/s", bytes(v.max(0.0) as u64)),
            Unit::PerSec => format!("{}/s", number(v)),
            Unit::Percent => percent(v),
            Unit::Seconds => seconds(v),
            Unit::Cpus => format!("{} CPU", number(v)),
            Unit::Watts => format!("{} W", number(v)),
            Unit::Count | Unit::UnixSeconds | Unit::UnixMillis => format!("{v:.0}"),
            Unit::Number | Unit::Text | Unit::TextList => number(v),
        }
    }
}

/// What an unknown value is written as.
pub const DASH: &str = "-";

/// `1.5 GiB`, `12 MiB`, `900 KiB`, `12 B`.
pub fn bytes(value: u64) -> String {
    binary(value as f64, 1)
}

/// `value` bytes scaled to the largest binary unit that keeps it at least 1 (B to TiB), and that
/// unit: every byte formatter here and in the plots scales through it.
pub fn binary_scaled(value: f64) -> (f64, &'static str) {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut v, mut unit) = (value, 0);
    while v.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    (v, UNITS[unit])
}

/// Bytes in binary units: whole bytes below 1 KiB and whole units from 100 up, `decimals`
/// between (`bytes` writes one, `1.5 GiB`; `share` two, `1.31 GiB`).
pub fn binary(value: f64, decimals: usize) -> String {
    match binary_scaled(value) {
        (v, unit) if unit == "B" || v.abs() >= 100.0 => format!("{v:.0} {unit}"),
        (v, unit) => format!("{v:.decimals$} {unit}"),
    }
}

/// `850 ns`, `12.3 µs`, `22.1 ms`, `1.80 s`: a measured duration to three significant digits
/// (whole nanoseconds below a microsecond), as the probe, strace and report plots write one.
pub fn duration_ns(ns: f64) -> String {
    let (value, unit) = match ns {
        ns if ns >= 1e9 => (ns / 1e9, "s"),
        ns if ns >= 1e6 => (ns / 1e6, "ms"),
        ns if ns >= 1e3 => (ns / 1e3, "µs"),
        ns => (ns, "ns"),
    };
    if value >= 100.0 || unit == "ns" {
        format!("{value:.0} {unit}")
    } else if value >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// [`duration_ns`] of a duration in seconds.
pub fn duration_secs(secs: f64) -> String {
    duration_ns(secs * 1e9)
}

pub fn opt_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| DASH.to_string(), bytes)
}

/// One decimal below 10, none from 10 up: `0.3`, `9.9`, `57`, `200`.
pub fn percent(v: f64) -> String {
    if v.abs() < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A percentage with one decimal, as the process tables show CPU (`0.0`, `12.3`).
pub fn opt_pct(value: Option<f64>) -> String {
    value.map_or_else(|| DASH.to_string(), |v| format!("{v:.1}"))
}

/// At most two decimals, no trailing zeros.
fn number(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `850 µs`, `12.3 ms`, `4.2 s`, `3 min 20 s`, `2 h 5 min`, `3 d 4 h`.
pub fn seconds(secs: f64) -> String {
    if secs == 0.0 {
        return "0 s".to_string();
    }
    match secs {
        s if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        s if s < 1.0 => format!("{:.1} ms", s * 1e3),
        s if s < 60.0 => format!("{s:.1} s"),
        s if s < 3600.0 => format!("{} min {} s", (s / 60.0) as u64, (s % 60.0) as u64),
        s if s < 86_400.0 => format!("{} h {} min", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64),
        s => format!("{} d {} h", (s / 86_400.0) as u64, ((s % 86_400.0) / 3600.0) as u64),
    }
}

/// CPU time as htop's TIME+ column writes it: minutes, seconds and hundredths below an hour
/// (`0:00.42`, `1:25.00`, `59:59.99`), then hours (`1h25:03`, `99h59:59`), then days and hours
/// (`4d07h`). Negative or unknown is `-`.
pub fn cpu_time(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return DASH.to_string();
    }
    let hundredths = (secs * 100.0) as u64;
    let total = hundredths / 100;
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    if hours == 0 {
        format!("{}:{seconds:02}.{:02}", total / 60, hundredths % 100)
    } else if hours < 100 {
        format!("{hours}h{minutes:02}:{seconds:02}")
    } else {
        format!("{}d{:02}h", hours / 24, hours % 24)
    }
}

/// Replaces control characters (C0, DEL, C1: escape sequences) and the bidirectional
/// overrides and isolates (which reorder what follows them on screen) with `?`, so a hostile
/// process name can neither drive the terminal nor disguise itself.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() || is_bidi_control(c) { '?' } else { c }).collect()
}

/// [`printable`] line by line: the line breaks stay, every other control character is `?`.
pub fn printable_lines(text: &str) -> String {
    text.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(2 * 1024 * 1024 * 1024), "2.0 GiB");
        assert_eq!(bytes(900 * 1024), "900 KiB");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(binary(1.31 * 1024.0 * 1024.0 * 1024.0, 2), "1.31 GiB");
        assert_eq!(binary(48.0 * 1024.0 * 1024.0, 2), "48.00 MiB");
        assert_eq!(binary(150.0 * 1024.0, 2), "150 KiB");
        assert_eq!(binary(-1536.0, 1), "-1.5 KiB");
        assert_eq!(binary_scaled(3.0 * 1024f64.powi(5)), (3072.0, "TiB"));
    }

    #[test]
    fn durations_have_three_significant_digits() {
        for (ns, text) in [
            (5.0, "5 ns"),
            (850.0, "850 ns"),
            (12_345.0, "12.3 µs"),
            (22_100_000.0, "22.1 ms"),
            (4_000_000.0, "4.00 ms"),
            (1.8e9, "1.80 s"),
            (250e9, "250 s"),
        ] {
            assert_eq!(duration_ns(ns), text, "{ns}");
        }
        assert_eq!(duration_secs(0.25), "250 ms");
    }

    #[test]
    fn cpu_time_as_htop_writes_it() {
        for (secs, text) in [
            (0.0, "0:00.00"),
            (0.42, "0:00.42"),
            (85.0, "1:25.00"),
            (3599.99, "59:59.99"),
            (5103.0, "1h25:03"),
            (359_999.0, "99h59:59"),
            (370_800.0, "4d07h"),
        ] {
            assert_eq!(cpu_time(secs), text, "{secs}");
        }
        assert_eq!(cpu_time(f64::NAN), "-");
    }

    #[test]
    fn every_unit_writes_unknown_as_a_dash_and_known_values_readably() {
        for unit in [Unit::Count, Unit::Bytes, Unit::BytesPerSec, Unit::Percent, Unit::Seconds, Unit::Cpus] {
            assert_eq!(unit.format(None), "-");
            assert_eq!(unit.format(Some(f64::NAN)), "-");
        }
        assert_eq!(Unit::Percent.format(Some(3.44)), "3.4");
        assert_eq!(Unit::Percent.format(Some(57.4)), "57");
        assert_eq!(Unit::BytesPerSec.format(Some(1536.0)), "1.5 KiB/s");
        assert_eq!(Unit::Seconds.format(Some(0.0123)), "12.3 ms");
        assert_eq!(Unit::Seconds.format(Some(200.0)), "3 min 20 s");
        assert_eq!(Unit::Cpus.format(Some(1.5)), "1.5 CPU");
        assert_eq!(printable("a\u{1b}[2Jb"), "a?[2Jb");
        assert_eq!(printable("evil\u{202E}gpj.exe\u{9b}31m"), "evil?gpj.exe?31m");
    }
}
