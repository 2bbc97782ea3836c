//! The line parser: one strace output line in, one [`Event`] out.
//!
//! It understands every common shape of strace output: a bare line, a `-f` pid column, the
//! `[pid N]` prefix strace writes to stderr, `-t`/`-tt`/`-ttt`/`-r` timestamps, `-T`
//! durations, `-y`/`-yy` decorations (the duration is the *last* `<…>` on the line, the
//! others are paths or sockets), `<unfinished ...>` and `<... X resumed>` halves, signals,
//! `+++ exited/killed +++` lines and strace's own `strace: …` notes.
//!
//! It does no I/O, allocates nothing, keeps no state between lines (pairing halves,
//! timestamps that wrap at midnight and `-r` deltas are the analyzer's job) and never panics
//! on any input: everything it does not recognise is a [`BadLine`] with a reason.

use memchr::{memchr, memrchr};

/// What one line says.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// From the pid column or `[pid N]`; `None` when the line has neither.
    pub pid: Option<u32>,
    pub timestamp: Option<Timestamp<'a>>,
    pub event: Event<'a>,
}

/// A timestamp as written, plus its text for display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timestamp<'a> {
    pub kind: TimeKind,
    /// Seconds: since midnight (`Clock`), since the epoch (`Epoch`) or since the previous
    /// line (`Relative`).
    pub seconds: f64,
    pub text: &'a [u8],
}

/// Which timestamp option produced a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeKind {
    /// `-t` or `-tt`: wall clock time of day, wraps at midnight.
    Clock,
    /// `-ttt`: seconds since the epoch.
    Epoch,
    /// `-r`: seconds since the previous line.
    Relative,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// A system call, whole or one half of a split one.
    Call(Call<'a>),
    /// `--- SIGCHLD {...} ---`, or `--- stopped by SIGSTOP ---`.
    Signal { name: &'a [u8] },
    /// `+++ exited with 0 +++`.
    Exited { code: i32 },
    /// `+++ killed by SIGKILL (core dumped) +++`.
    Killed { signal: &'a [u8] },
    /// strace's own notes (`strace: Process 12 attached`) and blank lines.
    Note,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call<'a> {
    pub name: &'a [u8],
    pub part: Part,
    /// The argument text (for a resumed half: what follows `resumed>`), without the
    /// closing parenthesis.
    pub args: &'a [u8],
    /// `None` for an unfinished half.
    pub result: Option<CallResult<'a>>,
    /// From `-T`, in nanoseconds.
    pub duration_ns: Option<u64>,
}

/// Which part of a call a line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Whole,
    /// `name(args <unfinished ...>`
    Unfinished,
    /// `<... name resumed>rest) = result`
    Resumed,
}

/// What follows ` = `.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CallResult<'a> {
    /// A number (decimal or hex); `-y` decorations after it are ignored here.
    Value(i64),
    /// `-1 ENOENT (No such file or directory)`
    Error { errno: &'a [u8] },
    /// `? ERESTARTSYS (To be restarted ...)`: interrupted by a signal.
    Interrupted { errno: &'a [u8] },
    /// `?` alone: no return (exit_group, or the process died inside the call).
    Unknown,
    /// Something else strace prints, kept as text.
    Other(&'a [u8]),
}

/// Why a line was not understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BadLine {
    /// NUL or other control bytes: not text.
    Binary,
    /// A `[pid` prefix or pid column that does not parse.
    Pid,
    /// No system call name, signal or exit where one was expected.
    Unrecognized,
    /// A call without ` = result`: usually a line cut short.
    NoResult,
    /// `+++ … +++` or `--- … ---` that does not parse.
    Status,
}

impl BadLine {
    pub fn as_str(self) -> &'static str {
        match self {
            BadLine::Binary => "binary data",
            BadLine::Pid => "bad pid",
            BadLine::Unrecognized => "not a system call, signal or exit",
            BadLine::NoResult => "call without a result (truncated?)",
            BadLine::Status => "bad signal or exit line",
        }
    }
}

const UNFINISHED: &[u8] = b" <unfinished ...>";

/// Parses one line (without its newline; a trailing `\r` is tolerated).
pub fn parse_line(line: &[u8]) -> Result<Line<'_>, BadLine> {
    let rest = trim_end(line);
    // strace escapes every non-printable byte, so a NUL means this is not strace text.
    // Only NUL is checked: a per-byte test for all control bytes costs more than the rest
    // of the parse, and other garbage fails the grammar anyway.
    if memchr(0, rest).is_some() {
        return Err(BadLine::Binary);
    }
    let rest = trim_start(rest);
    let mut line = Line { pid: None, timestamp: None, event: Event::Note };
    if rest.is_empty() || rest.starts_with(b"strace: ") {
        return Ok(line);
    }
    let (pid, rest) = take_pid(rest)?;
    line.pid = pid;
    let (timestamp, rest) = take_timestamp(rest);
    line.timestamp = timestamp;
    line.event = parse_event(rest)?;
    Ok(line)
}

fn parse_event(rest: &[u8]) -> Result<Event<'_>, BadLine> {
    if let Some(inner) = rest.strip_prefix(b"--- ") {
        // `--- SIGCHLD {...} ---` or `--- stopped by SIGTSTP ---`: the signal is the first
        // word that starts with SIG.
        let name = inner
            .split(|&byte| byte == b' ')
            .find(|word| word.starts_with(b"SIG"))
            .ok_or(BadLine::Status)?;
        return Ok(Event::Signal { name });
    }
    if let Some(inner) = rest.strip_prefix(b"+++ ") {
        if let Some(code) = inner.strip_prefix(b"exited with ") {
            let digits = code.split(|&byte| byte == b' ').next().unwrap_or_default();
            let code = parse_i64(digits).ok_or(BadLine::Status)?;
            return Ok(Event::Exited { code: i32::try_from(code).map_err(|_| BadLine::Status)? });
        }
        if let Some(signal) = inner.strip_prefix(b"killed by ") {
            let signal = signal.split(|&byte| byte == b' ').next().unwrap_or_default();
            if signal.is_empty() {
                return Err(BadLine::Status);
            }
            return Ok(Event::Killed { signal });
        }
        return Err(BadLine::Status);
    }
    if let Some(inner) = rest.strip_prefix(b"<... ") {
        // The name is one word: the first space must start " resumed>".
        let end = memchr(b' ', inner).filter(|&space| inner[space..].starts_with(b" resumed>"));
        let end = end.ok_or(BadLine::Unrecognized)?;
        let name = &inner[..end];
        if !is_name(name) {
            return Err(BadLine::Unrecognized);
        }
        let tail = &inner[end + b" resumed>".len()..];
        return finish_call(name, Part::Resumed, tail);
    }
    let open = memchr(b'(', rest).ok_or(BadLine::Unrecognized)?;
    let name = &rest[..open];
    if !is_name(name) {
        return Err(BadLine::Unrecognized);
    }
    let tail = &rest[open + 1..];
    if let Some(args) = tail.strip_suffix(UNFINISHED) {
        return Ok(Event::Call(Call {
            name,
            part: Part::Unfinished,
            args,
            result: None,
            duration_ns: None,
        }));
    }
    finish_call(name, Part::Whole, tail)
}

/// Parses `args) = result <duration>` (or the tail of a resumed half).
fn finish_call<'a>(name: &'a [u8], part: Part, tail: &'a [u8]) -> Result<Event<'a>, BadLine> {
    let (tail, duration_ns) = take_duration(tail);
    let equals = rfind_equals(tail).ok_or(BadLine::NoResult)?;
    let result = parse_result(trim_start(&tail[equals + 3..]));
    let args = trim_end(&tail[..equals]);
    let args = args.strip_suffix(b")").unwrap_or(args);
    Ok(Event::Call(Call { name, part, args, result: Some(result), duration_ns }))
}

/// The last ` = ` in `text`. The result is near the end of the line, so searching backwards
/// for `=` is short; a `memmem` finder would cost more to build than the search.
fn rfind_equals(text: &[u8]) -> Option<usize> {
    let mut end = text.len();
    while let Some(at) = memrchr(b'=', &text[..end]) {
        if at >= 1 && text[at - 1] == b' ' && text.get(at + 1) == Some(&b' ') {
            return Some(at - 1);
        }
        end = at;
    }
    None
}

/// Splits a trailing `<0.000123>` off. With `-y` the result itself may end in `<path>`, so
/// only a final `<…>` that parses as seconds counts.
fn take_duration(tail: &[u8]) -> (&[u8], Option<u64>) {
    if tail.last() != Some(&b'>') {
        return (tail, None);
    }
    let Some(open) = memrchr(b'<', tail) else {
        return (tail, None);
    };
    match parse_seconds_ns(&tail[open + 1..tail.len() - 1]) {
        Some(ns) => (trim_end(&tail[..open]), Some(ns)),
        None => (tail, None),
    }
}

fn parse_result(text: &[u8]) -> CallResult<'_> {
    if let Some(after) = text.strip_prefix(b"?") {
        let errno = first_word(trim_start(after));
        return if errno.starts_with(b"E") {
            CallResult::Interrupted { errno }
        } else {
            CallResult::Unknown
        };
    }
    if let Some(after) = text.strip_prefix(b"-1 ") {
        let errno = first_word(after);
        if errno.starts_with(b"E") {
            return CallResult::Error { errno };
        }
    }
    let number = text
        .split(|&byte| byte == b' ' || byte == b'<' || byte == b'(')
        .next()
        .unwrap_or_default();
    match parse_i64(number) {
        Some(value) => CallResult::Value(value),
        None => CallResult::Other(text),
    }
}

/// `[pid 123] ` or `123 ` (the `-f` column). A leading number followed by `:` or `.` is a
/// timestamp, not a pid.
fn take_pid(rest: &[u8]) -> Result<(Option<u32>, &[u8]), BadLine> {
    if let Some(inner) = rest.strip_prefix(b"[pid") {
        let close = memchr(b']', inner).ok_or(BadLine::Pid)?;
        let pid = parse_u32(trim_start(&inner[..close])).ok_or(BadLine::Pid)?;
        return Ok((Some(pid), trim_start(&inner[close + 1..])));
    }
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits > 0 && rest.get(digits) == Some(&b' ') {
        let pid = parse_u32(&rest[..digits]).ok_or(BadLine::Pid)?;
        return Ok((Some(pid), trim_start(&rest[digits..])));
    }
    Ok((None, rest))
}

/// An optional timestamp word. `HH:MM:SS[.frac]` is `-t`/`-tt`; a plain decimal with ten or
/// more integer digits is `-ttt` (epoch seconds); a shorter one is `-r`.
fn take_timestamp(rest: &[u8]) -> (Option<Timestamp<'_>>, &[u8]) {
    if !rest.first().is_some_and(u8::is_ascii_digit) {
        return (None, rest);
    }
    let end = memchr(b' ', rest).unwrap_or(rest.len());
    let text = &rest[..end];
    let after = trim_start(&rest[end..]);
    let parsed = if memchr(b':', text).is_some() {
        parse_clock(text).map(|seconds| (TimeKind::Clock, seconds))
    } else {
        let integer_digits = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
        let kind = if integer_digits >= 9 { TimeKind::Epoch } else { TimeKind::Relative };
        parse_seconds_ns(text).map(|ns| (kind, ns as f64 / 1e9))
    };
    match parsed {
        Some((kind, seconds)) => (Some(Timestamp { kind, seconds, text }), after),
        None => (None, rest),
    }
}

/// `HH:MM:SS` or `HH:MM:SS.ffffff` → seconds since midnight.
fn parse_clock(text: &[u8]) -> Option<f64> {
    let mut fields = text.splitn(3, |&byte| byte == b':');
    let hours = parse_u32(fields.next()?)?;
    let minutes = parse_u32(fields.next()?)?;
    let seconds_ns = parse_seconds_ns(fields.next()?)?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(f64::from(hours * 3600 + minutes * 60) + seconds_ns as f64 / 1e9)
}

/// `123` or `123.456789` (seconds) → nanoseconds; digits past nanoseconds are ignored.
pub(crate) fn parse_seconds_ns(text: &[u8]) -> Option<u64> {
    let (whole, fraction) = match memchr(b'.', text) {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &b""[..]),
    };
    if whole.is_empty() || whole.len() > 11 {
        return None;
    }
    let mut ns = parse_u64(whole)?.checked_mul(1_000_000_000)?;
    let mut scale = 100_000_000u64;
    for &byte in fraction {
        if !byte.is_ascii_digit() {
            return None;
        }
        ns += u64::from(byte - b'0') * scale;
        scale /= 10;
    }
    Some(ns)
}

fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 {
        return None;
    }
    let mut value = 0u64;
    for &byte in text {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(byte - b'0');
    }
    Some(value)
}

fn parse_u32(text: &[u8]) -> Option<u32> {
    parse_u64(text).and_then(|value| u32::try_from(value).ok())
}

/// Decimal (optionally negative) or `0x` hex, as strace prints results.
fn parse_i64(text: &[u8]) -> Option<i64> {
    if let Some(hex) = text.strip_prefix(b"0x") {
        if hex.is_empty() || hex.len() > 16 {
            return None;
        }
        let mut value = 0u64;
        for &byte in hex {
            let digit = (byte as char).to_digit(16)?;
            value = (value << 4) | u64::from(digit);
        }
        return Some(value as i64);
    }
    match text.strip_prefix(b"-") {
        Some(digits) => parse_u64(digits).and_then(|value| i64::try_from(value).ok()).map(|v| -v),
        None => parse_u64(text).and_then(|value| i64::try_from(value).ok()),
    }
}

/// System call names: letters, digits and `_`; strace writes `???` for unknown ones.
fn is_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.iter().all(|&byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'?')
}

fn first_word(text: &[u8]) -> &[u8] {
    let end = memchr(b' ', text).unwrap_or(text.len());
    &text[..end]
}

fn trim_start(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&byte| byte != b' ' && byte != b'\t').unwrap_or(text.len());
    &text[start..]
}

fn trim_end(text: &[u8]) -> &[u8] {
    let end = text
        .iter()
        .rposition(|&byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'))
        .map_or(0, |last| last + 1);
    &text[..end]
}

#[cfg(test)]
mod tests;
