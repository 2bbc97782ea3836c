//! Durations: every flag, query parameter, prompt and config value that is a span of time
//! (`--interval 250ms`, `--history 1d`, `?since=90s`, `--retain-age 7d`, a rule's `for: 1h30m`).
//!
//! The quantity grammar's durations ([`crate::quantity`]): a number (decimals allowed) and a
//! unit, with or without a space between: `ns`, `us`/`µs`, `ms`, `s`/`sec`/`second(s)`,
//! `m`/`min`/`minute(s)`, `h`/`hr`/`hour(s)`, `d`/`day(s)`, `w`/`week(s)`, `y`/`year(s)` (365
//! days); parts may follow each other (`1m30s`, `1h30m`). A bare `0` is zero; any other bare
//! number is refused, because people coming from statsd read it as milliseconds and people
//! coming from top as seconds (or tenths). Negative, infinite and not-a-number values are
//! refused. Parsing does no I/O and reads no clock.

use std::fmt;
use std::time::Duration;

use crate::quantity::{parse_quantity, Dim, ErrorKind};

/// Why a text is not a duration; its `Display` is the message a user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    /// A number without a unit (other than `0`).
    NoUnit(String),
    UnknownUnit {
        text: String,
        unit: String,
    },
    NotANumber(String),
    Negative(String),
    TooLarge(String),
    /// A quantity, but not a span of time (`2GiB`, `80%`).
    NotADuration {
        text: String,
        is: &'static str,
    },
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "an empty duration (try 250ms, 90s, 5m, 1h30m, 7d)"),
            DurationError::NoUnit(text) => {
                write!(f, "{text:?} has no unit: write {text}s for seconds or {text}ms for milliseconds")
            }
            DurationError::UnknownUnit { text, unit } => {
                write!(f, "{text:?}: unknown unit {unit:?} (use us, ms, s, m, h, d, w or y)")
            }
            DurationError::NotANumber(text) => {
                write!(f, "{text:?} is not a duration (try 250ms, 90s, 5m, 1h30m, 7d)")
            }
            DurationError::Negative(text) => write!(f, "{text:?}: a duration cannot be negative"),
            DurationError::TooLarge(text) => write!(f, "{text:?} is too long a duration"),
            DurationError::NotADuration { text, is } => write!(f, "{text:?} is {is}, not a duration"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration in the grammar above.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    let owned = || trimmed.to_string();
    let q = parse_quantity(trimmed).map_err(|e| match e.kind {
        ErrorKind::Empty => DurationError::Empty,
        ErrorKind::UnknownUnit(unit) => DurationError::UnknownUnit { text: owned(), unit },
        ErrorKind::Trailing(rest) => DurationError::UnknownUnit { text: owned(), unit: rest.trim().to_string() },
        ErrorKind::OutOfRange(_) => DurationError::TooLarge(owned()),
        _ => DurationError::NotANumber(owned()),
    })?;
    if q.value.is_sign_negative() && q.value != 0.0 {
        return Err(DurationError::Negative(owned()));
    }
    match q.dim {
        Dim::Seconds => {}
        Dim::None if q.value == 0.0 => return Ok(Duration::ZERO),
        Dim::None => {
            let number = trimmed.trim_end();
            return Err(DurationError::NoUnit(number.to_string()));
        }
        other => return Err(DurationError::NotADuration { text: owned(), is: other.name() }),
    }
    Duration::try_from_secs_f64(q.value.abs()).map_err(|_| DurationError::TooLarge(owned()))
}

/// For clap's `value_parser`: the same grammar, the error as text.
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// A duration the way proctor writes one back: the largest unit that keeps it whole, else
/// seconds with up to four decimals (`250ms`, `90s`, `5m`, `36h`, `7d`, `1500ms`, `1.0005s`).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_string();
    }
    for (unit, per) in
        [("d", 86_400_000_000_000u128), ("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000)]
    {
        if ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    if ns.is_multiple_of(1_000_000) {
        return format!("{}ms", ns / 1_000_000);
    }
    if ns < 1_000_000 && ns.is_multiple_of(1000) {
        return format!("{}us", ns / 1000);
    }
    let text = format!("{:.4}", d.as_secs_f64());
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<Duration, DurationError>) {
        assert_eq!(parse_duration(text), expected, "{text:?}");
    }

    #[test]
    fn every_unit_and_spelling() {
        check("250ms", Ok(Duration::from_millis(250)));
        check("90s", Ok(Duration::from_secs(90)));
        check("1.5s", Ok(Duration::from_millis(1500)));
        check("5m", Ok(Duration::from_secs(300)));
        check("10 min", Ok(Duration::from_secs(600)));
        check("2 hours", Ok(Duration::from_secs(7200)));
        check("1d", Ok(Duration::from_secs(86_400)));
        check("1.5 days", Ok(Duration::from_secs(129_600)));
        check("7d", Ok(Duration::from_secs(7 * 86_400)));
        check("36h", Ok(Duration::from_secs(36 * 3600)));
        check("20us", Ok(Duration::from_micros(20)));
        check("20µs", Ok(Duration::from_micros(20)));
        check("0", Ok(Duration::ZERO));
        check("0s", Ok(Duration::ZERO));
        check(" 1s ", Ok(Duration::from_secs(1)));
        check("1m30s", Ok(Duration::from_secs(90)));
        check("1h30m", Ok(Duration::from_secs(5400)));
        check("2w", Ok(Duration::from_secs(14 * 86_400)));
        check("1y", Ok(Duration::from_secs(365 * 86_400)));
        check("500ns", Ok(Duration::from_nanos(500)));
    }

    #[test]
    fn what_is_refused_says_why() {
        check("10", Err(DurationError::NoUnit("10".into())));
        check("", Err(DurationError::Empty));
        check("soon", Err(DurationError::NotANumber("soon".into())));
        check("-1s", Err(DurationError::Negative("-1s".into())));
        check("10x", Err(DurationError::UnknownUnit { text: "10x".into(), unit: "x".into() }));
        check("99999999999999999999999d", Err(DurationError::TooLarge("99999999999999999999999d".into())));
        check("2GiB", Err(DurationError::NotADuration { text: "2GiB".into(), is: "a size in bytes" }));
        check("1m30", Err(DurationError::UnknownUnit { text: "1m30".into(), unit: "30".into() }));
        assert!(parse_duration("NaNs").is_err());
        assert!(parse_duration("infs").is_err());
        assert!(parse_duration("10").err().map(|e| e.to_string()).unwrap_or_default().contains("10s"));
    }

    #[test]
    fn formatting_round_trips() {
        for text in ["250ms", "90s", "5m", "36h", "7d", "1500ms", "20us", "1.0005s"] {
            let d = parse_duration(text).expect(text);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
