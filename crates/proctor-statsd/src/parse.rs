//! The statsd line parser: bytes of one packet in, metrics and counted bad lines out.
//!
//! It decides each line the way Etsy statsd 0.9 does (see the crate docs for the few places
//! where proctor differs on purpose) and is a pure function of its input: no sockets, no clock,
//! no aggregation. It never panics on input; every line it cannot use is reported to the sink
//! with one reason from a small fixed set, so the caller can count it.

use std::borrow::Cow;

use crate::jsnum::{is_js_whitespace, js_number, js_trim};

/// Why a value on a line was not used. Etsy counts all of these as `bad_lines_seen`; proctor
/// also keeps them apart so an operator can tell a broken client from an odd one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BadLine {
    /// No `|type` after the value (`key:1`, or a bare `key`).
    MissingType,
    /// A type other than `c`, `g`, `ms`, `h`, `d`, `s`.
    UnknownType,
    /// The value is not a JavaScript number (`key:abc|c`).
    BadValue,
    /// A timer below zero (Etsy rejects these too).
    NegativeTimer,
    /// `Infinity`, `1e400` and other values, or value/rate quotients, that are not finite.
    NotFinite,
    /// A sample rate that is not `@` followed by a positive finite number (`@0` included), or
    /// one so small (subnormal) that its reciprocal is not finite.
    BadSampleRate,
    /// Nothing left of the key after sanitising.
    EmptyKey,
    /// A key longer than [`ParseOptions::max_key_bytes`] (after sanitising): every distinct key
    /// is held until it expires, so its length is bounded like the number of keys.
    KeyTooLong,
}

impl BadLine {
    /// Every reason, in a stable order (the index of each is its slot in [`PacketCounts::bad`]).
    pub const ALL: [BadLine; 8] = [
        BadLine::MissingType,
        BadLine::UnknownType,
        BadLine::BadValue,
        BadLine::NegativeTimer,
        BadLine::NotFinite,
        BadLine::BadSampleRate,
        BadLine::EmptyKey,
        BadLine::KeyTooLong,
    ];

    /// The reason as a label value (`proctor_statsd_bad_lines_total{reason="…"}`).
    pub fn as_str(self) -> &'static str {
        match self {
            BadLine::MissingType => "missing_type",
            BadLine::UnknownType => "unknown_type",
            BadLine::BadValue => "bad_value",
            BadLine::NegativeTimer => "negative_timer",
            BadLine::NotFinite => "not_finite",
            BadLine::BadSampleRate => "bad_sample_rate",
            BadLine::EmptyKey => "empty_key",
            BadLine::KeyTooLong => "key_too_long",
        }
    }

    /// The slot of this reason in [`BadLine::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One parsed value. Sample rates are already known to be positive and finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricValue<'a> {
    /// `c`: adds `value / sample_rate`.
    Counter { value: f64, sample_rate: f64 },
    /// `g`: sets the gauge, or adds to it when `delta` (a leading `+`/`-`) and the gauge is
    /// currently non-zero (Etsy's rule; a zero or missing gauge is set, not adjusted).
    Gauge { value: f64, delta: bool },
    /// `ms`, `h`, `d`: one sample; it counts as `1 / sample_rate` samples.
    Timer { value: f64, sample_rate: f64 },
    /// `s`: one member (the raw text, `"0"` when empty, as Etsy).
    Set { member: &'a str },
}

/// One metric: the sanitised key with DogStatsD tags folded in (`name;tag=value`), and a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric<'a> {
    pub key: &'a str,
    pub value: MetricValue<'a>,
}

/// What the parser hands its results to.
pub trait MetricSink {
    fn metric(&mut self, metric: Metric<'_>);
    fn bad_line(&mut self, reason: BadLine, line: &str);
}

/// Per-packet tallies, the same units Etsy reports: non-empty lines (`metrics_received`) and
/// bad values by reason (`bad_lines_seen`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketCounts {
    pub lines: u64,
    pub metrics: u64,
    pub bad: [u64; BadLine::ALL.len()],
}

impl PacketCounts {
    pub fn bad_total(&self) -> u64 {
        self.bad.iter().sum()
    }

    pub fn add(&mut self, other: &PacketCounts) {
        self.lines += other.lines;
        self.metrics += other.metrics;
        for (mine, theirs) in self.bad.iter_mut().zip(other.bad.iter()) {
            *mine += theirs;
        }
    }
}

/// Parser options that change keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Etsy's `keyNameSanitize` (default true): whitespace runs become `_`, `/` becomes `-`,
    /// and everything outside `[A-Za-z0-9_.;=-]` is removed.
    pub sanitize_keys: bool,
    /// Keys longer than this (in bytes, after sanitising) are bad lines (`key_too_long`).
    pub max_key_bytes: usize,
}

/// The longest key kept unless configured: far past Graphite's path components and any real
/// metric name, short enough that the key cap bounds memory (100,000 keys × 1 KiB).
pub const MAX_KEY_BYTES: usize = 1024;

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions { sanitize_keys: true, max_key_bytes: MAX_KEY_BYTES }
    }
}

/// A reusable parser: it owns the scratch buffers keys are built in, so parsing a packet does
/// not allocate once those have grown.
#[derive(Debug, Default)]
pub struct LineParser {
    options: ParseOptions,
    raw_key: String,
    key: String,
}

impl LineParser {
    pub fn new(options: ParseOptions) -> Self {
        LineParser { options, raw_key: String::new(), key: String::new() }
    }

    /// Parses every line of one packet (lines split on `\n`, empty lines skipped).
    ///
    /// Invalid UTF-8 is decoded lossily, as Node's `Buffer.toString()` does; the replacement
    /// characters then fall to key sanitising.
    pub fn parse_packet(&mut self, packet: &[u8], sink: &mut impl MetricSink) -> PacketCounts {
        // `from_utf8` checks ASCII a word at a time; the lossy decoder is only needed when it
        // fails, and gives the same text when it does not.
        let text: Cow<'_, str> = match std::str::from_utf8(packet) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(packet),
        };
        let mut counts = PacketCounts::default();
        for line in split_ascii(&text, b'\n') {
            if line.is_empty() {
                continue;
            }
            counts.lines += 1;
            self.parse_line(line, sink, &mut counts);
        }
        counts
    }

    fn parse_line(&mut self, line: &str, sink: &mut impl MetricSink, counts: &mut PacketCounts) {
        // DogStatsD tags: everything between the first `|#` and the next one (Etsy splits the
        // line on `|#` and reads only the second piece).
        let (head, tags) = match split_tags(line) {
            Some((head, rest)) => (head, split_tags(rest).map_or(rest, |(tags, _)| tags)),
            None => (line, ""),
        };
        let mut parts = split_ascii(head, b':');
        let raw_name = parts.next().unwrap_or("");
        self.build_key(raw_name, tags);
        let mut values = parts.peekable();
        // A line without `:` is Etsy's `key` alone, read as the value "1" with no type.
        let bare = values.peek().is_none();
        let single = ["1"];
        let values: &mut dyn Iterator<Item = &str> = if bare { &mut single.iter().copied() } else { &mut values };
        for value in values {
            match self.parse_value(value) {
                Ok(parsed) => {
                    counts.metrics += 1;
                    sink.metric(Metric { key: &self.key, value: parsed });
                }
                Err(reason) => {
                    counts.bad[reason.index()] += 1;
                    sink.bad_line(reason, line);
                }
            }
        }
    }

    fn parse_value<'a>(&self, value: &'a str) -> Result<MetricValue<'a>, BadLine> {
        let mut fields = split_ascii(value, b'|');
        let number = fields.next().unwrap_or("");
        let kind = js_trim(fields.next().ok_or(BadLine::MissingType)?);
        let sample_rate = match fields.next() {
            Some(rate) => parse_sample_rate(rate)?,
            None => 1.0,
        };
        if self.key.is_empty() {
            return Err(BadLine::EmptyKey);
        }
        if self.key.len() > self.options.max_key_bytes {
            return Err(BadLine::KeyTooLong);
        }
        match kind {
            "s" => Ok(MetricValue::Set { member: if number.is_empty() { "0" } else { number } }),
            "g" => {
                let value = finite(js_value(number)?)?;
                let delta = number.starts_with(['+', '-']);
                Ok(MetricValue::Gauge { value, delta })
            }
            "ms" | "h" | "d" => {
                let value = js_value(number)?;
                if value < 0.0 {
                    return Err(BadLine::NegativeTimer);
                }
                finite(value)?;
                Ok(MetricValue::Timer { value, sample_rate })
            }
            "c" => {
                let value = finite(js_value(number)?)?;
                finite(value / sample_rate)?;
                Ok(MetricValue::Counter { value, sample_rate })
            }
            _ => Err(BadLine::UnknownType),
        }
    }

    fn build_key(&mut self, raw_name: &str, tags: &str) {
        self.key.clear();
        if tags.is_empty() {
            // The common case: the name alone is the key, with no copy in between.
            if self.options.sanitize_keys {
                sanitize_key(raw_name, &mut self.key);
            } else {
                self.key.push_str(raw_name);
            }
            return;
        }
        self.raw_key.clear();
        self.raw_key.push_str(raw_name);
        if !tags.is_empty() {
            for tag in tags.split(',') {
                // Etsy replaces only the first `;` and the first `:` of each tag (JavaScript's
                // `String.replace` with a string pattern), then sanitising removes the rest.
                self.raw_key.push(';');
                let tag = replace_first(tag, ';', '_');
                self.raw_key.push_str(&replace_first(&tag, ':', '='));
            }
        }
        if self.options.sanitize_keys {
            sanitize_key(&self.raw_key, &mut self.key);
        } else {
            self.key.push_str(&self.raw_key);
        }
    }
}

/// `isNumber` in Etsy: a non-empty string that `Number()` does not turn into NaN.
fn js_value(text: &str) -> Result<f64, BadLine> {
    if text.is_empty() {
        return Err(BadLine::BadValue);
    }
    js_number(text).ok_or(BadLine::BadValue)
}

fn finite(value: f64) -> Result<f64, BadLine> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(BadLine::NotFinite)
    }
}

/// Etsy accepts `@` + a non-negative JavaScript number, then uses only the leading run of
/// digits and dots (`@1e-1` is a rate of 1). Where that run is missing (`@ 0.5`) Etsy throws;
/// where the rate is 0 it divides by zero. Both are bad lines here.
fn parse_sample_rate(field: &str) -> Result<f64, BadLine> {
    let number = field.strip_prefix('@').ok_or(BadLine::BadSampleRate)?;
    if number.is_empty() || number.starts_with('-') || js_number(number).is_none() {
        return Err(BadLine::BadSampleRate);
    }
    let run_len = number.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
    if run_len == 0 {
        return Err(BadLine::BadSampleRate);
    }
    // The aggregator multiplies and counts by `1 / rate`; a subnormal rate (below 2.2e-308)
    // would make that Infinity.
    match js_number(&number[..run_len]) {
        Some(rate) if rate > 0.0 && rate.is_finite() && (1.0 / rate).is_finite() => Ok(rate),
        _ => Err(BadLine::BadSampleRate),
    }
}

/// A byte that sanitising keeps as it is: `[A-Za-z0-9_.;=-]`.
fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b';' | b'=')
}

/// `text.split(byte as char)` for an ASCII `byte`, found with a plain byte loop: the lines and
/// fields here are a few bytes long, where `str::split`'s searcher costs more than the search.
/// An ASCII byte never occurs inside a multi-byte character, so every cut is a boundary.
fn split_ascii(text: &str, byte: u8) -> impl Iterator<Item = &str> {
    debug_assert!(byte.is_ascii());
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.bytes().position(|b| b == byte) {
            Some(at) => {
                rest = Some(&current[at + 1..]);
                Some(&current[..at])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// `line.split_once("|#")` without building a substring searcher for every line.
fn split_tags(line: &str) -> Option<(&str, &str)> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(offset) = bytes[from..].iter().position(|b| *b == b'|') {
        let at = from + offset;
        if bytes.get(at + 1) == Some(&b'#') {
            // Both bytes are ASCII, so both cuts fall on character boundaries.
            return Some((&line[..at], &line[at + 2..]));
        }
        from = at + 1;
    }
    None
}

fn replace_first(text: &str, from: char, to: char) -> Cow<'_, str> {
    match text.find(from) {
        Some(at) => {
            let mut out = String::with_capacity(text.len());
            out.push_str(&text[..at]);
            out.push(to);
            out.push_str(&text[at + from.len_utf8()..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

/// Etsy's `sanitizeKeyName`: each run of whitespace becomes one `_`, `/` becomes `-`, and
/// characters outside `[a-zA-Z_\-0-9.;=]` are dropped. Applied in that order, so whitespace
/// removed in step three cannot merge two runs.
pub fn sanitize_key(raw: &str, out: &mut String) {
    // Most keys are already clean: copy them whole.
    if raw.bytes().all(is_key_byte) {
        out.push_str(raw);
        return;
    }
    let mut in_space = false;
    for c in raw.chars() {
        if is_js_whitespace(c) {
            if !in_space {
                out.push('_');
            }
            in_space = true;
            continue;
        }
        in_space = false;
        match c {
            '/' => out.push('-'),
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' | ';' | '=' => out.push(c),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BadLine, LineParser, Metric, MetricSink, MetricValue, ParseOptions};

    #[derive(Default)]
    struct Collect {
        out: Vec<String>,
    }

    impl MetricSink for Collect {
        fn metric(&mut self, metric: Metric<'_>) {
            let value = match metric.value {
                MetricValue::Counter { value, sample_rate } => format!("c {value} @{sample_rate}"),
                MetricValue::Gauge { value, delta } => format!("g {value} delta={delta}"),
                MetricValue::Timer { value, sample_rate } => format!("ms {value} @{sample_rate}"),
                MetricValue::Set { member } => format!("s {member:?}"),
            };
            self.out.push(format!("{} {value}", metric.key));
        }
        fn bad_line(&mut self, reason: BadLine, _line: &str) {
            self.out.push(format!("bad {}", reason.as_str()));
        }
    }

    fn check(packet: &str, expected: &[&str]) {
        let mut parser = LineParser::new(ParseOptions::default());
        let mut sink = Collect::default();
        parser.parse_packet(packet.as_bytes(), &mut sink);
        assert_eq!(sink.out, expected, "packet {packet:?}");
    }

    #[test]
    fn keys_longer_than_the_cap_are_bad_lines() {
        let mut parser = LineParser::new(ParseOptions { max_key_bytes: 16, ..ParseOptions::default() });
        let mut sink = Collect::default();
        let counts = parser.parse_packet(b"short:1|c\nthis.key.is.longer.than.sixteen:1|c", &mut sink);
        assert_eq!(sink.out, ["short c 1 @1", "bad key_too_long"]);
        assert_eq!(counts.metrics, 1);
        assert_eq!(counts.bad[BadLine::KeyTooLong.index()], 1);
        assert_eq!(BadLine::KeyTooLong.as_str(), "key_too_long");
    }

    #[test]
    fn basic_types() {
        check("a:1|c", &["a c 1 @1"]);
        check("a:1.5|c|@0.1", &["a c 1.5 @0.1"]);
        check("a:-3|g", &["a g -3 delta=true"]);
        check("a:3|g", &["a g 3 delta=false"]);
        check("a:+3|g", &["a g 3 delta=true"]);
        check("t:320|ms|@0.5", &["t ms 320 @0.5"]);
        check("t:1|h\nt:2|d", &["t ms 1 @1", "t ms 2 @1"]);
        check("u:alice|s", &["u s \"alice\""]);
        check("u:|s", &["u s \"0\""]);
    }

    #[test]
    fn several_lines_and_values() {
        check("a:1|c:2|c\n\nb:3|g\n", &["a c 1 @1", "a c 2 @1", "b g 3 delta=false"]);
    }

    #[test]
    fn dogstatsd_tags_fold_into_the_key() {
        check("req:1|c|#env:prod,region:eu", &["req;env=prod;region=eu c 1 @1"]);
        check("req:1|c|@0.5|#a:b:c", &["req;a=bc c 1 @0.5"]);
        check("req:1|c|#x;y:z", &["req;x_y=z c 1 @1"]);
        check("req:1|c|#", &["req c 1 @1"]);
    }

    #[test]
    fn ascii_split_is_str_split() {
        for text in ["", ":", "a", "a:b", "a::b:", ":a", "é:ü:", "a\nb\n", "|||"] {
            for (byte, c) in [(b':', ':'), (b'\n', '\n'), (b'|', '|')] {
                let ours: Vec<&str> = super::split_ascii(text, byte).collect();
                let std: Vec<&str> = text.split(c).collect();
                assert_eq!(ours, std, "{text:?} on {c:?}");
            }
        }
    }

    #[test]
    fn tags_split_like_str_split_once() {
        for line in ["a:1|c", "a:1|c|#x:y", "|#", "a|#b|#c", "a||#b", "a|", "é|#ü", "#|", "a|#"] {
            let expected = line.split_once("|#");
            assert_eq!(super::split_tags(line), expected, "{line:?}");
        }
    }

    #[test]
    fn keys_are_sanitised_like_etsy() {
        check("my key  here/x$y:1|c", &["my_key_here-xy c 1 @1"]);
        check("caf\u{e9}.\u{3000}x:1|c", &["caf._x c 1 @1"]);
    }

    #[test]
    fn bad_lines_are_counted_by_reason() {
        check("a", &["bad missing_type"]);
        check("a:1", &["bad missing_type"]);
        check("a:1|x", &["bad unknown_type"]);
        check("a:1|", &["bad unknown_type"]);
        check("a:abc|c", &["bad bad_value"]);
        check("a:|c", &["bad bad_value"]);
        check("a:-1|ms", &["bad negative_timer"]);
        check("a:Infinity|c", &["bad not_finite"]);
        check("a:1e400|g", &["bad not_finite"]);
        check("a:1|c|@0", &["bad bad_sample_rate"]);
        check("a:1|c|@", &["bad bad_sample_rate"]);
        check("a:1|c|@-1", &["bad bad_sample_rate"]);
        check("a:1|c|@ 0.5", &["bad bad_sample_rate"]);
        check("a:1|c|", &["bad bad_sample_rate"]);
        check("a:1e308|c|@0.000001", &["bad not_finite"]);
        check("$$$:1|c", &["bad empty_key"]);
    }

    /// A subnormal rate is positive and finite, but `1 / rate` (what a timer's count adds, and
    /// what a counter's value is multiplied by) is Infinity. Found while writing the fuzz
    /// target's invariants; Etsy sends the Infinity on.
    #[test]
    fn a_rate_without_a_finite_reciprocal_is_a_bad_rate() {
        let tiny = format!("0.{}1", "0".repeat(320));
        check(&format!("t:1|ms|@{tiny}"), &["bad bad_sample_rate"]);
        check(&format!("c:0|c|@{tiny}"), &["bad bad_sample_rate"]);
        // The smallest normal rate still has a finite reciprocal and is kept.
        let smallest_normal = format!("0.{}22250738585072014", "0".repeat(307));
        check(&format!("t:1|ms|@{smallest_normal}"), &[format!("t ms 1 @{}", f64::MIN_POSITIVE).as_str()]);
    }

    #[test]
    fn odd_numbers_follow_javascript() {
        check("a:0x10|c", &["a c 16 @1"]);
        check("a: 5 |c", &["a c 5 @1"]);
        check("a:1|c|@1e-1", &["a c 1 @1"]);
        check("a:1|c |@.5", &["a c 1 @0.5"]);
    }

    #[test]
    fn crlf_lines_still_parse() {
        check("a:1|c\r\nb:2|ms\r\n", &["a c 1 @1", "b ms 2 @1"]);
    }

    /// Random bytes, and random splices of valid lines, never panic, and the tallies add up.
    #[test]
    fn random_bytes_never_panic() {
        let alphabet: &[u8] = b"ab:|@#,.;=-+0123456789ecgmshd \n\r\t/\xff\xc3\xa9";
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parser = LineParser::new(ParseOptions::default());
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let packet: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 4 == 0 {
                        r as u8
                    } else {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    }
                })
                .collect();
            let mut sink = Collect::default();
            let counts = parser.parse_packet(&packet, &mut sink);
            assert_eq!(counts.metrics + counts.bad_total(), sink.out.len() as u64);
            assert!(sink.out.iter().all(|line| !line.contains("inf") && !line.contains("NaN")));
        }
    }
}
