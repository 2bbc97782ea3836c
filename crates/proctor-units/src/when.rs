//! Points in time as people type them (`--at "10 min ago"`, `--from 2024-05-01T12:00:00`, the
//! TUI's go-to-time prompt): parsed without a clock into a [`When`], resolved against "now" by
//! the caller. The span before "ago" is the one duration grammar ([`crate::duration`]). UTC
//! only; no time zones, no calendar words beyond "now" and "ago".

use std::time::Duration;

use crate::duration::parse_duration;

/// A time as written: relative to now, or absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// This long before now ("now" is zero).
    Ago(Duration),
    /// Nanoseconds since the Unix epoch.
    UnixNs(u64),
}

impl When {
    pub fn resolve(self, now_unix_ns: u64) -> u64 {
        match self {
            When::Ago(ago) => now_unix_ns.saturating_sub(ago.as_nanos() as u64),
            When::UnixNs(ns) => ns,
        }
    }
}

/// `now`, `10 min ago`, `2h ago`, `90s ago`, `1.5 days ago`, `@1700000000` (Unix seconds),
/// `2024-05-01T12:00:00` or `2024-05-01 12:00[:00]` (UTC), `2024-05-01` (midnight UTC).
pub fn parse_when(text: &str) -> Result<When, String> {
    let text = text.trim();
    if text == "now" {
        return Ok(When::Ago(Duration::ZERO));
    }
    if let Some(secs) = text.strip_prefix('@') {
        let secs: f64 = secs.parse().map_err(|_| format!("not a Unix time: {text:?}"))?;
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("not a Unix time: {text:?}"));
        }
        return Ok(When::UnixNs((secs * 1e9) as u64));
    }
    if let Some(ago) = text.strip_suffix("ago") {
        return parse_duration(ago.trim()).map(When::Ago).map_err(|e| format!("not a time: {text:?}: {e}"));
    }
    parse_utc(text).map(When::UnixNs).ok_or_else(|| {
        format!("not a time: {text:?} (try \"10 min ago\", \"2024-05-01T12:00:00\" in UTC, or \"@UNIX_SECONDS\")")
    })
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
        let time = time.strip_suffix('Z').unwrap_or(time);
        let mut t = time.split(':');
        let hour: u64 = t.next()?.parse().ok()?;
        let minute: u64 = t.next()?.parse().ok()?;
        let second: u64 = t.next().map_or(Some(0), |s| s.parse().ok())?;
        if t.next().is_some() || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        seconds_of_day = hour * 3600 + minute * 60 + second;
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
        for bad in ["", "yesterday", "10 fortnights ago", "2023-13-01", "2023-11-14T25:00", "@-5"] {
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
    }
}
