//! Points in time as people type them (`--at "10 min ago"`, `--from 18:47:15`, `--from
//! "yesterday 14:00"`, the TUI's go-to-time prompt): parsed without a clock into a [`When`],
//! resolved against "now" by the caller. The span before "ago" is the duration grammar
//! ([`crate::duration`]). All in UTC, as proctor writes times (`format_utc`); no time zones.

use std::time::Duration;

use crate::duration::parse_duration;

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// A time as written: relative to now, absolute, or a time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// This long before now ("now" is zero).
    Ago(Duration),
    /// Nanoseconds since the Unix epoch.
    UnixNs(u64),
    /// A time of day (seconds after midnight UTC) with no date: its latest occurrence that is
    /// not after now (`18:47:15` typed at 09:00 is yesterday's).
    TimeOfDay(u32),
    /// A time of day on a day counted back from today (UTC): `today 09:00` is 0 days back,
    /// `yesterday 14:00` is 1.
    DayAt { days_back: u32, secs: u32 },
}

impl When {
    pub fn resolve(self, now_unix_ns: u64) -> u64 {
        let midnight = now_unix_ns - now_unix_ns % DAY_NS;
        match self {
            When::Ago(ago) => now_unix_ns.saturating_sub(ago.as_nanos() as u64),
            When::UnixNs(ns) => ns,
            When::TimeOfDay(secs) => {
                let today = midnight + u64::from(secs) * 1_000_000_000;
                if today > now_unix_ns {
                    today.saturating_sub(DAY_NS)
                } else {
                    today
                }
            }
            When::DayAt { days_back, secs } => {
                midnight.saturating_sub(u64::from(days_back) * DAY_NS) + u64::from(secs) * 1_000_000_000
            }
        }
    }
}

/// Unix seconds typed bare are accepted from this one on (2001-09-09): a smaller bare number is
/// more likely a span typed without its unit, and is refused with a hint.
const BARE_UNIX_FROM: f64 = 1e9;

/// `now`; `10 min ago`, `2h ago`, `1.5 days ago`; `18:47[:15]` (the latest such time, UTC);
/// `today 09:00`, `yesterday 14:00[:00]`; `2026-11-23T18:47[:15]`, `2026-11-23 18:47`,
/// `2026-11-23` (midnight), all UTC, a trailing `Z` allowed; Unix seconds, bare
/// (`1700000000`, from 1e9 up) or after `@` (`@1700000000`, any).
pub fn parse_when(text: &str) -> Result<When, String> {
    let text = text.trim();
    let hint = || {
        format!(
            "not a time: {text:?} (try \"10 min ago\", \"18:47:15\", \"yesterday 14:00\", \"2026-11-23T18:47\" in UTC, or Unix seconds)"
        )
    };
    if text == "now" {
        return Ok(When::Ago(Duration::ZERO));
    }
    if let Some(secs) = text.strip_prefix('@') {
        return unix_seconds(secs).ok_or_else(|| format!("not a Unix time: {text:?}"));
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !text.is_empty() {
        return match text.parse::<f64>() {
            Ok(secs) if secs >= BARE_UNIX_FROM => unix_seconds(text).ok_or_else(hint),
            _ => Err(format!(
                "not a time: {text:?}: a bare number is Unix seconds (from {BARE_UNIX_FROM:e}); for a span back write \"{text}s ago\""
            )),
        };
    }
    if let Some(ago) = text.strip_suffix("ago") {
        return parse_duration(ago.trim()).map(When::Ago).map_err(|e| format!("not a time: {text:?}: {e}"));
    }
    for (word, days_back) in [("today", 0), ("yesterday", 1)] {
        if let Some(rest) = text.strip_prefix(word) {
            return match rest.strip_prefix(' ').and_then(|t| time_of_day(t.trim())) {
                Some(secs) => Ok(When::DayAt { days_back, secs }),
                None => Err(format!("not a time: {text:?}: give the time of day too, {word} 14:00 (UTC)")),
            };
        }
    }
    if !text.contains('-') {
        return time_of_day(text).map(When::TimeOfDay).ok_or_else(hint);
    }
    parse_utc(text).map(When::UnixNs).ok_or_else(hint)
}

fn unix_seconds(text: &str) -> Option<When> {
    let secs: f64 = text.parse().ok()?;
    (0.0..1.8e10).contains(&secs).then_some(When::UnixNs((secs * 1e9) as u64))
}

/// `HH:MM` or `HH:MM:SS` (a trailing `Z` allowed) as seconds after midnight.
fn time_of_day(text: &str) -> Option<u32> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    let mut t = text.split(':');
    let hour: u32 = t.next()?.parse().ok()?;
    let minute: u32 = t.next()?.parse().ok()?;
    let second: u32 = t.next().map_or(Some(0), |s| s.parse().ok())?;
    if t.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(hour * 3600 + minute * 60 + second)
}

fn parse_utc(text: &str) -> Option<u64> {
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut d = date.split('-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut seconds_of_day = 0u64;
    if let Some(time) = time {
        seconds_of_day = u64::from(time_of_day(time)?);
    }
    let days = days_from_civil(year, month, day);
    let seconds = u64::try_from(days * 86_400).ok()? + seconds_of_day;
    seconds.checked_mul(1_000_000_000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2024-05-01T12:00:00Z` for a Unix time in nanoseconds.
pub fn format_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Inverse of days_from_civil (civil_from_days).
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: When) {
        assert_eq!(parse_when(text), Ok(expected), "{text}");
    }

    #[test]
    fn relative_and_absolute_times() {
        check("now", When::Ago(Duration::ZERO));
        check("10 min ago", When::Ago(Duration::from_secs(600)));
        check("10min ago", When::Ago(Duration::from_secs(600)));
        check("2h ago", When::Ago(Duration::from_secs(7200)));
        check("1.5 days ago", When::Ago(Duration::from_secs(129_600)));
        check("@1700000000", When::UnixNs(1_700_000_000_000_000_000));
        check("2023-11-14T22:13:20", When::UnixNs(1_700_000_000_000_000_000));
        check("2023-11-14 22:13:20Z", When::UnixNs(1_700_000_000_000_000_000));
        check("1970-01-01", When::UnixNs(0));
        check("2000-03-01", When::UnixNs(951_868_800_000_000_000));
        check("1700000000", When::UnixNs(1_700_000_000_000_000_000));
        check("2023-11-14T22:13", When::UnixNs(1_699_999_980_000_000_000));
        check("18:47:15", When::TimeOfDay(67_635));
        check("18:47", When::TimeOfDay(67_620));
        check("yesterday 14:00", When::DayAt { days_back: 1, secs: 50_400 });
        check("today 09:30:05", When::DayAt { days_back: 0, secs: 34_205 });
        check("1m30s ago", When::Ago(Duration::from_secs(90)));
        for bad in [
            "",
            "yesterday",
            "today",
            "10 fortnights ago",
            "2023-13-01",
            "2023-11-14T25:00",
            "@-5",
            "90",
            "25:00",
            "18:61",
        ] {
            assert!(parse_when(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting_inverts_parsing() {
        for ns in [0, 951_868_800_000_000_000, 1_700_000_000_000_000_000, 4_102_444_799_000_000_000] {
            let text = format_utc(ns);
            assert_eq!(parse_when(&text), Ok(When::UnixNs(ns)), "{text}");
        }
        assert_eq!(format_utc(1_700_000_000_000_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(When::Ago(Duration::from_secs(1)).resolve(5_000_000_000), 4_000_000_000);
        // 2023-11-14T22:13:20Z: 18:47:15 is earlier today, 23:00 was yesterday's.
        let now = 1_700_000_000_000_000_000;
        assert_eq!(format_utc(When::TimeOfDay(67_635).resolve(now)), "2023-11-14T18:47:15Z");
        assert_eq!(format_utc(When::TimeOfDay(82_800).resolve(now)), "2023-11-13T23:00:00Z");
        assert_eq!(format_utc(When::DayAt { days_back: 1, secs: 50_400 }.resolve(now)), "2023-11-13T14:00:00Z");
        assert!(parse_when("90").expect_err("a bare small number").contains("90s ago"));
    }
}
