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

use memchr::memchr;

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
    // strace escapes every non-printable byte, so a NUL means this is not strace text.
    // Only NUL is checked: a per-byte test for all control bytes costs more than the rest
    // of the parse, and other garbage fails the grammar anyway.
    if memchr(0, line).is_some() {
        return Err(BadLine::Binary);
    }
    parse_line_without_nul(line)
}

/// [`parse_line`] for a line the caller already knows holds no NUL byte.
fn parse_line_without_nul(line: &[u8]) -> Result<Line<'_>, BadLine> {
    parse_line_then(line, |parsed| match parsed {
        Parsed::Call { pid, timestamp, call } => Ok(Line { pid, timestamp, event: Event::Call(call.clone()) }),
        Parsed::Other(line) => line,
    })
}

/// A parsed line as [`parse_line_then`] hands it over.
#[derive(Debug)]
pub(crate) enum Parsed<'r, 'a> {
    /// A system call, whole or half: nearly every line. The call is lent where it was built.
    Call { pid: Option<u32>, timestamp: Option<Timestamp<'a>>, call: &'r Call<'a> },
    /// Everything else: notes, signals, exits and bad lines.
    Other(Result<Line<'a>, BadLine>),
}

/// [`parse_line`] for a line the caller already knows holds no NUL byte (the analyzer checks
/// each whole read buffer once with `memchr`, much cheaper than a call per short line),
/// handing the result to `consume` rather than returning it.
///
/// The common shapes' code is inlined all the way into the caller and a call is lent to
/// `consume` where it was built. Returned as a `Line` instead, the ~100-byte enum was
/// assembled field by field and then copied in wide moves two or three times, and those
/// copies (loads that span several smaller stores, which the CPU cannot forward) were one
/// of the largest costs per line.
#[inline(always)]
pub(crate) fn parse_line_then<'a, R>(line: &'a [u8], consume: impl FnOnce(Parsed<'_, 'a>) -> R) -> R {
    let rest = trim_start(trim_end(line));
    if rest.is_empty() || rest.starts_with(b"strace: ") {
        return consume(Parsed::Other(Ok(Line { pid: None, timestamp: None, event: Event::Note })));
    }
    let (pid, rest) = match take_pid(rest) {
        Ok(found) => found,
        Err(reason) => return consume(Parsed::Other(Err(reason))),
    };
    let (timestamp, rest) = take_timestamp(rest);
    if matches!(rest.first(), Some(b'-' | b'+')) {
        return consume(Parsed::Other(parse_status(rest).map(|event| Line { pid, timestamp, event })));
    }
    match parse_call(rest) {
        Ok(call) => consume(Parsed::Call { pid, timestamp, call: &call }),
        Err(reason) => consume(Parsed::Other(Err(reason))),
    }
}

/// A call line after its pid and timestamp: whole, unfinished or resumed.
#[inline(always)]
fn parse_call(rest: &[u8]) -> Result<Call<'_>, BadLine> {
    if let Some(inner) = rest.strip_prefix(b"<... ") {
        // The name is one word: the first space must start " resumed>".
        let end = find_byte(b' ', inner).filter(|&space| inner[space..].starts_with(b" resumed>"));
        let end = end.ok_or(BadLine::Unrecognized)?;
        let name = &inner[..end];
        if !is_name(name) {
            return Err(BadLine::Unrecognized);
        }
        let tail = &inner[end + b" resumed>".len()..];
        return finish_call(name, Part::Resumed, tail);
    }
    // The name runs up to the first `(` and must be all name bytes, so one scan over name
    // bytes that must stop at a `(` finds and checks it (a `memchr` call costs more than
    // these few bytes).
    let open = rest.iter().take(MAX_NAME_BYTES + 1).position(|&byte| !is_name_byte(byte));
    let open = open.filter(|&open| open > 0 && rest[open] == b'(').ok_or(BadLine::Unrecognized)?;
    let name = &rest[..open];
    let tail = &rest[open + 1..];
    if let Some(args) = tail.strip_suffix(UNFINISHED) {
        return Ok(Call { name, part: Part::Unfinished, args, result: None, duration_ns: None });
    }
    finish_call(name, Part::Whole, tail)
}

/// Signal (`--- … ---`) and exit (`+++ … +++`) lines, and anything else that starts with
/// `-` or `+` (which is no system call: neither is a name byte).
#[inline(never)]
fn parse_status(rest: &[u8]) -> Result<Event<'_>, BadLine> {
    if let Some(inner) = rest.strip_prefix(b"--- ") {
        // `--- SIGCHLD {...} ---` or `--- stopped by SIGTSTP ---`: the signal is the first
        // word that starts with SIG.
        let name = inner.split(|&byte| byte == b' ').find(|word| word.starts_with(b"SIG")).ok_or(BadLine::Status)?;
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
    // Not a status line; `-` and `+` are no name bytes, so it is no call either.
    Err(BadLine::Unrecognized)
}

/// Parses `args) = result <duration>` (or the tail of a resumed half).
#[inline(always)]
fn finish_call<'a>(name: &'a [u8], part: Part, tail: &'a [u8]) -> Result<Call<'a>, BadLine> {
    let (tail, duration_ns) = match take_duration_micros(tail) {
        Some((rest, ns)) => (rest, Some(ns)),
        None => take_duration(tail),
    };
    let (equals, result) = match take_decimal_result(tail) {
        Some(found) => found,
        None => find_result(tail)?,
    };
    let args = trim_end(&tail[..equals]);
    let args = args.strip_suffix(b")").unwrap_or(args);
    Ok(Call { name, part, args, result: Some(result), duration_ns })
}

/// The last ` = ` in `tail` and the result after it: every result shape.
#[inline(never)]
fn find_result(tail: &[u8]) -> Result<(usize, CallResult<'_>), BadLine> {
    let equals = rfind_equals(tail).ok_or(BadLine::NoResult)?;
    Ok((equals, parse_result(trim_start(&tail[equals + 3..]))))
}

/// ` = 123` at the end of `tail`, the usual result, read backwards in one pass: the position
/// of the ` = ` and the value. `None` for every other shape, which [`rfind_equals`] and
/// [`parse_result`] handle; where this finds a result they find the same one (digits hold
/// no `=`, so this ` = ` is the last one).
#[inline(always)]
fn take_decimal_result(tail: &[u8]) -> Option<(usize, CallResult<'_>)> {
    let mut start = tail.len();
    let mut value = 0u64;
    let mut scale = 1u64;
    // At most 18 digits, so the value fits an i64; longer numbers take the general path.
    while start > 0 && tail.len() - start < 18 {
        let digit = tail[start - 1].wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value += u64::from(digit) * scale;
        scale *= 10;
        start -= 1;
    }
    if start == tail.len() || start < 3 || tail[start - 3..start] != *b" = " {
        return None;
    }
    Some((start - 3, CallResult::Value(value as i64)))
}

/// The last ` = ` in `text`, searched backwards for `=` with `memrchr`. Short decimal
/// results no longer get here (see [`take_decimal_result`]); what does is mostly errors such
/// as `-1 ENOENT (No such file or directory)`, long enough that `memrchr` beats a byte loop
/// (callgrind on the bench log: 2.8 % fewer instructions in all). A `memmem` finder would
/// cost more to build than the search.
#[inline]
fn rfind_equals(text: &[u8]) -> Option<usize> {
    let mut end = text.len();
    while let Some(at) = memchr::memrchr(b'=', &text[..end]) {
        if at >= 1 && text[at - 1] == b' ' && text.get(at + 1) == Some(&b' ') {
            return Some(at - 1);
        }
        end = at;
    }
    None
}

/// The usual `-T` shape, ` <S.UUUUUU>` with fewer than ten seconds, read at fixed offsets
/// from the end of `tail`: the common case of [`take_duration`], which handles every other
/// shape. `None` unless `tail` ends in exactly that shape after a byte that is not blank, so
/// what is left is what `take_duration` would leave (its `trim_end` has nothing to trim), and
/// the nanoseconds are what [`parse_seconds_ns`] computes.
#[inline(always)]
fn take_duration_micros(tail: &[u8]) -> Option<(&[u8], u64)> {
    // Checked and decoded a word at a time, as in `take_clock_micros`: the last 8 bytes are
    // `.UUUUUU>` and the 4 before the fraction's dot overlap them: ` <S.`.
    const FRACTION_SHAPE: u64 = u64::from_le_bytes(*b".000000>");
    const FRACTION_SEPARATORS: u64 = 0xff00_0000_0000_00ff;
    const OPEN_SHAPE: u64 = u32::from_le_bytes(*b" <0.") as u64;
    const OPEN_SEPARATORS: u64 = 0xff00_ffff;
    let start = tail.len().checked_sub(11)?;
    let before = *tail.get(start.checked_sub(1)?)?;
    let fraction = read_u64(tail, start + 3)? ^ FRACTION_SHAPE;
    let open = read_u32(tail, start)? ^ OPEN_SHAPE;
    let not_blank = !matches!(before, b' ' | b'\t' | b'\r' | b'\n');
    if !(all_bytes_below_ten(fraction)
        & all_bytes_below_ten(open)
        & (fraction & FRACTION_SEPARATORS == 0)
        & (open & OPEN_SEPARATORS == 0)
        & not_blank)
    {
        return None;
    }
    // Byte k of `pairs` is 10 × digit k + digit k+1, as in `take_clock_micros`.
    let pairs = fraction * 10 + (fraction >> 8);
    let byte = |word: u64, index: u32| (word >> (8 * index)) & 0xff;
    let micros = byte(pairs, 1) * 10_000 + byte(pairs, 3) * 100 + byte(pairs, 5);
    Some((&tail[..start], byte(open, 2) * 1_000_000_000 + micros * 1_000))
}

/// Splits a trailing `<0.000123>` off (every shape; see [`take_duration_micros`]). With `-y` the result itself may end in `<path>`, so
/// only a final `<…>` that parses as seconds counts.
#[inline(never)]
fn take_duration(tail: &[u8]) -> (&[u8], Option<u64>) {
    if tail.last() != Some(&b'>') {
        return (tail, None);
    }
    // A plain backwards loop: the `<` is a few bytes from the end.
    let Some(open) = tail.iter().rposition(|&byte| byte == b'<') else {
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
        return if errno.starts_with(b"E") { CallResult::Interrupted { errno } } else { CallResult::Unknown };
    }
    if let Some(after) = text.strip_prefix(b"-1 ") {
        let errno = first_word(after);
        if errno.starts_with(b"E") {
            return CallResult::Error { errno };
        }
    }
    let end = text.iter().position(|&byte| matches!(byte, b' ' | b'<' | b'(')).unwrap_or(text.len());
    let number = &text[..end];
    match parse_i64(number) {
        Some(value) => CallResult::Value(value),
        None => CallResult::Other(text),
    }
}

/// `[pid 123] ` or `123 ` (the `-f` column). A leading number followed by `:` or `.` is a
/// timestamp, not a pid.
#[inline(always)]
fn take_pid(rest: &[u8]) -> Result<(Option<u32>, &[u8]), BadLine> {
    if rest.first() == Some(&b'[') {
        return take_bracket_pid(rest);
    }
    // One pass computes the value while counting the digits; the count is capped where
    // `parse_u32` would refuse anyway, so the value cannot overflow.
    let mut digits = 0;
    let mut value = 0u64;
    while let Some(&byte) = rest.get(digits) {
        if !byte.is_ascii_digit() {
            break;
        }
        value = value.wrapping_mul(10).wrapping_add(u64::from(byte - b'0'));
        digits += 1;
    }
    if digits > 0 && rest.get(digits) == Some(&b' ') {
        let pid = if digits <= 19 { u32::try_from(value).ok() } else { None };
        let pid = pid.ok_or(BadLine::Pid)?;
        return Ok((Some(pid), trim_start(&rest[digits..])));
    }
    Ok((None, rest))
}

/// `[pid 123] `: how strace marks other threads' lines when it writes to stderr.
fn take_bracket_pid(rest: &[u8]) -> Result<(Option<u32>, &[u8]), BadLine> {
    let Some(inner) = rest.strip_prefix(b"[pid") else {
        return Ok((None, rest));
    };
    let close = find_byte(b']', inner).ok_or(BadLine::Pid)?;
    let pid = parse_u32(trim_start(&inner[..close])).ok_or(BadLine::Pid)?;
    Ok((Some(pid), trim_start(&inner[close + 1..])))
}

/// An optional timestamp word. `HH:MM:SS[.frac]` is `-t`/`-tt`; a plain decimal with ten or
/// more integer digits is `-ttt` (epoch seconds); a shorter one is `-r`.
#[inline(always)]
fn take_timestamp(rest: &[u8]) -> (Option<Timestamp<'_>>, &[u8]) {
    if !rest.first().is_some_and(u8::is_ascii_digit) {
        return (None, rest);
    }
    if let Some(parsed) = take_clock_micros(rest) {
        return parsed;
    }
    take_other_timestamp(rest)
}

/// [`take_timestamp`] for every shape but `-tt`'s.
#[inline(never)]
fn take_other_timestamp(rest: &[u8]) -> (Option<Timestamp<'_>>, &[u8]) {
    let end = find_byte(b' ', rest).unwrap_or(rest.len());
    let text = &rest[..end];
    let after = trim_start(&rest[end..]);
    let parsed = if find_byte(b':', text).is_some() {
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

/// The `-tt` shape `HH:MM:SS.ffffff ` read at fixed offsets: the common case of
/// [`take_timestamp`], which handles every other shape. `None` when `rest` does not start
/// with exactly that shape. The arithmetic is [`parse_clock`]'s, so the seconds are the same
/// `f64` to the bit.
#[inline(always)]
fn take_clock_micros(rest: &[u8]) -> Option<(Option<Timestamp<'_>>, &[u8])> {
    // The 16 bytes are two little-endian words, checked and decoded a word at a time (SWAR):
    // XOR with the expected shape ('0' where a digit goes) leaves 0..=9 in digit bytes and 0
    // in separator bytes exactly when the shape is right.
    const CLOCK_SHAPE: u64 = u64::from_le_bytes(*b"00:00:00");
    const CLOCK_SEPARATORS: u64 = 0x0000_ff00_00ff_0000;
    const FRACTION_SHAPE: u64 = u64::from_le_bytes(*b".000000 ");
    const FRACTION_SEPARATORS: u64 = 0xff00_0000_0000_00ff;
    let clock = read_u64(rest, 0)? ^ CLOCK_SHAPE;
    let fraction = read_u64(rest, 8)? ^ FRACTION_SHAPE;
    if !(all_bytes_below_ten(clock)
        & all_bytes_below_ten(fraction)
        & (clock & CLOCK_SEPARATORS == 0)
        & (fraction & FRACTION_SEPARATORS == 0))
    {
        return None;
    }
    // Byte k of `pairs` is 10 × digit k + digit k+1 (at most 99, so no byte carries over).
    let clock_pairs = clock * 10 + (clock >> 8);
    let fraction_pairs = fraction * 10 + (fraction >> 8);
    let byte = |word: u64, index: u32| ((word >> (8 * index)) & 0xff) as u32;
    let hours = byte(clock_pairs, 0);
    let minutes = byte(clock_pairs, 3);
    if hours > 23 || minutes > 59 {
        return None;
    }
    let micros = (byte(fraction_pairs, 1) * 10_000 + byte(fraction_pairs, 3) * 100 + byte(fraction_pairs, 5)) as u64;
    let seconds_ns = u64::from(byte(clock_pairs, 6)) * 1_000_000_000 + micros * 1_000;
    let seconds = f64::from(hours * 3600 + minutes * 60) + seconds_ns as f64 / 1e9;
    let timestamp = Timestamp { kind: TimeKind::Clock, seconds, text: &rest[..15] };
    Some((Some(timestamp), trim_start(&rest[15..])))
}

/// Bytes `at..at + 8` of `bytes` as a little-endian word, if there are that many.
#[inline(always)]
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let word: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(word))
}

/// Bytes `at..at + 4` of `bytes` as a little-endian word, if there are that many.
#[inline(always)]
fn read_u32(bytes: &[u8], at: usize) -> Option<u64> {
    let word: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u64::from(u32::from_le_bytes(word)))
}

/// Whether every byte of `word` is at most 9: each is below 16, and adding 6 to each (which
/// cannot carry into the next byte then) keeps it below 16.
#[inline(always)]
fn all_bytes_below_ten(word: u64) -> bool {
    const HIGH_NIBBLES: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    (word & HIGH_NIBBLES == 0) & (word.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES == 0)
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
    let (whole, fraction) = match find_byte(b'.', text) {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &b""[..]),
    };
    if whole.is_empty() || whole.len() > 11 {
        return None;
    }
    let whole_ns = parse_u64(whole)?.checked_mul(1_000_000_000)?;
    // Digits past the ninth are checked but ignored. The scale comes from a table: a
    // division per digit was a visible share of the whole parse.
    let mut fraction_ns = 0u64;
    for (at, &byte) in fraction.iter().enumerate() {
        if !byte.is_ascii_digit() {
            return None;
        }
        if at < 9 {
            fraction_ns = fraction_ns * 10 + u64::from(byte - b'0');
        }
    }
    const SCALE: [u64; 10] = [1_000_000_000, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];
    whole_ns.checked_add(fraction_ns * SCALE[fraction.len().min(9)])
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
    !name.is_empty() && name.len() <= MAX_NAME_BYTES && name.iter().all(|&byte| is_name_byte(byte))
}

const MAX_NAME_BYTES: usize = 64;

#[inline]
fn is_name_byte(byte: u8) -> bool {
    NAME_BYTES[usize::from(byte)]
}

/// A lookup table: one load per byte of the name instead of three range tests.
static NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let value = byte as u8;
        table[byte] = value.is_ascii_alphanumeric() || value == b'_' || value == b'?';
        byte += 1;
    }
    table
};

fn first_word(text: &[u8]) -> &[u8] {
    let end = find_byte(b' ', text).unwrap_or(text.len());
    &text[..end]
}

/// The first `needle` in a short `text`. The fields searched here are a few bytes long, where
/// a plain loop beats the dispatch and setup of a `memchr` call.
#[inline]
fn find_byte(needle: u8, text: &[u8]) -> Option<usize> {
    text.iter().position(|&byte| byte == needle)
}

#[inline]
fn trim_start(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&byte| byte != b' ' && byte != b'\t').unwrap_or(text.len());
    &text[start..]
}

#[inline]
fn trim_end(text: &[u8]) -> &[u8] {
    let end = text.iter().rposition(|&byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n')).map_or(0, |last| last + 1);
    &text[..end]
}

#[cfg(test)]
mod tests;
