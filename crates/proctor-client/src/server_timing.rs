//! The `Server-Timing` response header (W3C Server Timing): the substeps a server reports for
//! one response, `db;dur=53.2, render;dur=12;desc="tmpl"`.
//!
//! Pure: header values in, [`Substep`]s out. Follows the specification's grammar: a header is
//! a comma-separated list of metrics (several headers combine as one list), a metric is a
//! token name followed by `;`-separated parameters, a parameter's value is a token or a quoted
//! string with `\` escapes. `dur` is in milliseconds (a float) and `desc` is text; of each
//! only the first occurrence counts, as the specification says, and other parameters are
//! ignored. A metric without a `dur` is kept as a name without a duration.
//!
//! What it does not do: it never fails. A malformed metric (no name, a stray character) is
//! skipped up to the next comma outside a quoted string, a `dur` that is not a finite,
//! non-negative number is dropped from its metric, and each is counted in [`Dropped`]; so are
//! metrics past [`MAX_SUBSTEPS`] in one response and names longer than [`MAX_NAME_BYTES`].
//! A `desc` is cut to [`MAX_DESC_BYTES`].

use serde::{Deserialize, Serialize};

/// One substep a server reported for one response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Substep {
    /// The metric's name as the server wrote it (`db`); reports call it `server:db`.
    pub name: String,
    /// `dur`, converted from milliseconds; `None` when the metric had none (or a bad one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
}

/// Substeps kept from one response; more are counted in [`Dropped::too_many`].
pub const MAX_SUBSTEPS: usize = 32;
/// Longer names are dropped (counted), not cut: a cut name could merge two substeps.
pub const MAX_NAME_BYTES: usize = 64;
/// Longer descriptions are cut at a character boundary.
pub const MAX_DESC_BYTES: usize = 128;

/// What was not kept, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// A metric that did not follow the grammar, skipped up to the next comma.
    pub malformed: u32,
    /// A `dur` that was not a finite, non-negative number (the metric's name is kept).
    pub bad_duration: u32,
    /// Metrics past [`MAX_SUBSTEPS`].
    pub too_many: u32,
    /// Metrics whose name is longer than [`MAX_NAME_BYTES`].
    pub long_name: u32,
}

impl Dropped {
    pub fn total(&self) -> u32 {
        self.malformed + self.bad_duration + self.too_many + self.long_name
    }
}

/// The name reports give a substep: `server:` and the metric's name, so that a server's metric
/// named like one of the client's phases (`wait`) stays apart from it.
pub fn report_name(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// The prefix of [`report_name`].
pub const PREFIX: &str = "server:";

/// Parses one `Server-Timing` header value, appending to `out` (call it once per header, in
/// order, with the same `out`, to combine several headers).
pub fn parse_into(value: &[u8], out: &mut Vec<Substep>, dropped: &mut Dropped) {
    let mut cursor = Cursor { bytes: value, at: 0 };
    loop {
        cursor.skip_while(|byte| is_ows(byte) || byte == b',');
        if cursor.done() {
            return;
        }
        match parse_metric(&mut cursor, dropped) {
            Some(metric) if metric.name.len() > MAX_NAME_BYTES => dropped.long_name += 1,
            Some(_) if out.len() >= MAX_SUBSTEPS => dropped.too_many += 1,
            Some(metric) => out.push(metric),
            None => {
                dropped.malformed += 1;
                cursor.skip_to_comma();
            }
        }
    }
}

/// Parses every value of `headers` into a new list (a convenience for tests and importers).
pub fn parse<'a>(headers: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Substep>, Dropped) {
    let mut out = Vec::new();
    let mut dropped = Dropped::default();
    for value in headers {
        parse_into(value, &mut out, &mut dropped);
    }
    (out, dropped)
}

/// `name *( OWS ";" OWS param )`, ending before a `,` or the end. `None`: malformed (the
/// cursor is then somewhere inside the metric).
fn parse_metric(cursor: &mut Cursor<'_>, dropped: &mut Dropped) -> Option<Substep> {
    let name = cursor.token()?;
    let mut metric = Substep { name: String::from_utf8_lossy(name).into_owned(), dur_ns: None, desc: None };
    let (mut seen_dur, mut seen_desc) = (false, false);
    loop {
        cursor.skip_while(is_ows);
        match cursor.peek() {
            None | Some(b',') => return Some(metric),
            Some(b';') => cursor.at += 1,
            Some(_) => return None,
        }
        cursor.skip_while(is_ows);
        let param = cursor.token()?;
        cursor.skip_while(is_ows);
        // A parameter without `=` has an empty value (the specification's parsing algorithm).
        let value: Vec<u8> = if cursor.peek() == Some(b'=') {
            cursor.at += 1;
            cursor.skip_while(is_ows);
            if cursor.peek() == Some(b'"') {
                cursor.quoted()?
            } else {
                cursor.token()?.to_vec()
            }
        } else {
            Vec::new()
        };
        if param.eq_ignore_ascii_case(b"dur") && !seen_dur {
            seen_dur = true;
            metric.dur_ns = milliseconds_to_ns(&value);
            if metric.dur_ns.is_none() {
                dropped.bad_duration += 1;
            }
        } else if param.eq_ignore_ascii_case(b"desc") && !seen_desc {
            seen_desc = true;
            let text = String::from_utf8_lossy(&value);
            metric.desc = Some(cut(&text, MAX_DESC_BYTES).to_string());
        }
    }
}

fn milliseconds_to_ns(value: &[u8]) -> Option<u64> {
    let ms: f64 = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
    if !ms.is_finite() || ms < 0.0 {
        return None;
    }
    // Beyond u64 nanoseconds (584 years) is not a duration a server measured.
    let ns = (ms * 1e6).round();
    (ns < u64::MAX as f64).then_some(ns as u64)
}

fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn is_ows(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

/// RFC 9110 `tchar`.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_while(&mut self, keep: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
    }

    /// One or more `tchar`s; `None` when there is none here.
    fn token(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        self.skip_while(is_tchar);
        (self.at > start).then(|| &self.bytes[start..self.at])
    }

    /// A quoted string starting at `"`, unescaped; `None` when it never closes.
    fn quoted(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.at += 1;
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => return Some(out),
                b'\\' => {
                    out.push(self.peek()?);
                    self.at += 1;
                }
                byte => out.push(byte),
            }
        }
    }

    /// Past the next `,` outside a quoted string (or to the end).
    fn skip_to_comma(&mut self) {
        let mut quoted = false;
        while let Some(byte) = self.peek() {
            self.at += 1;
            match byte {
                b'\\' if quoted => self.at += 1,
                b'"' => quoted = !quoted,
                b',' if !quoted => return,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, dur_ms: Option<f64>, desc: Option<&str>) -> Substep {
        Substep {
            name: name.to_string(),
            dur_ns: dur_ms.map(|ms| (ms * 1e6).round() as u64),
            desc: desc.map(str::to_string),
        }
    }

    fn check(headers: &[&str], expected: &[Substep], expected_dropped: Dropped) {
        let (found, dropped) = parse(headers.iter().map(|header| header.as_bytes()));
        assert_eq!(found, expected, "{headers:?}");
        assert_eq!(dropped, expected_dropped, "{headers:?}");
    }

    /// The specification's own examples (W3C Server Timing, "The Server-Timing Header Field").
    #[test]
    fn the_specifications_examples() {
        let none = Dropped::default();
        check(
            &["miss, db;dur=53, app;dur=47.2"],
            &[step("miss", None, None), step("db", Some(53.0), None), step("app", Some(47.2), None)],
            none,
        );
        check(&["customView, dc;desc=atl"], &[step("customView", None, None), step("dc", None, Some("atl"))], none);
        check(&["cache;desc=\"Cache Read\";dur=23.2"], &[step("cache", Some(23.2), Some("Cache Read"))], none);
        check(&["total;dur=123.4"], &[step("total", Some(123.4), None)], none);
        // Several headers are one list.
        check(&["db;dur=53", "app;dur=47.2"], &[step("db", Some(53.0), None), step("app", Some(47.2), None)], none);
        // The issue's example, and a quoted desc holding a comma, a semicolon and escapes.
        check(
            &["db;dur=53.2, render;dur=12;desc=\"tmpl\""],
            &[step("db", Some(53.2), None), step("render", Some(12.0), Some("tmpl"))],
            none,
        );
        check(
            &[r#"a;desc="x, y; \"z\" \\";dur=1 , b"#],
            &[step("a", Some(1.0), Some(r#"x, y; "z" \"#)), step("b", None, None)],
            none,
        );
        // Only the first dur and desc count; parameter names are case-insensitive; unknown
        // parameters and value-less ones are ignored.
        check(&["m;DUR=2;dur=3;desc=a;desc=b;foo=bar;flag"], &[step("m", Some(2.0), Some("a"))], none);
        check(
            &["  m ; dur = 0.5 ,,, n\t;\tdur=1e3"],
            &[step("m", Some(0.5), None), step("n", Some(1000.0), None)],
            none,
        );
    }

    #[test]
    fn garbage_is_skipped_and_counted_never_a_panic() {
        check(&["=5, db;dur=1"], &[step("db", Some(1.0), None)], Dropped { malformed: 1, ..Dropped::default() });
        check(&["db dur=1, ok"], &[step("ok", None, None)], Dropped { malformed: 1, ..Dropped::default() });
        check(&["a;desc=\"never closed, b;dur=1"], &[], Dropped { malformed: 1, ..Dropped::default() });
        check(
            &["a;dur=abc, b;dur=-1, c;dur=NaN, d;dur=inf"],
            &[step("a", None, None), step("b", None, None), step("c", None, None), step("d", None, None)],
            Dropped { bad_duration: 4, ..Dropped::default() },
        );
        check(&["a;;dur=1, b;="], &[], Dropped { malformed: 2, ..Dropped::default() });
        check(&["", " , ", "\u{e9}t\u{e9};dur=1"], &[], Dropped { malformed: 1, ..Dropped::default() });
        check(&["a;desc=\"x\\"], &[], Dropped { malformed: 1, ..Dropped::default() });
        for noise in [&b"\xff\xfe;dur=\x00"[..], b";;;,,,\"\"\"", b"\\", b"\"", b"a;desc=\"\\", b"a;dur=1e400"] {
            let (_, dropped) = parse([noise]);
            assert!(dropped.total() > 0, "{noise:?}");
        }
    }

    #[test]
    fn limits_hold_and_say_what_they_dropped() {
        let many: Vec<String> = (0..40).map(|index| format!("m{index};dur={index}")).collect();
        let (found, dropped) = parse([many.join(", ").as_bytes()]);
        assert_eq!(found.len(), MAX_SUBSTEPS);
        assert_eq!(found.last().map(|step| step.name.as_str()), Some("m31"));
        assert_eq!(dropped, Dropped { too_many: 8, ..Dropped::default() });
        let long = format!("{}, short;dur=1", "n".repeat(MAX_NAME_BYTES + 1));
        check(&[&long], &[step("short", Some(1.0), None)], Dropped { long_name: 1, ..Dropped::default() });
        let desc = format!("m;desc=\"{}\"", "\u{e9}".repeat(100));
        let (found, _) = parse([desc.as_bytes()]);
        let kept = found[0].desc.as_deref().unwrap_or_default();
        assert!(kept.len() <= MAX_DESC_BYTES && kept.chars().all(|c| c == '\u{e9}'), "{kept}");
    }
}
