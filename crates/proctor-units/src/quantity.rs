//! The one quantity grammar: every number a person types with a unit — a flag, a query
//! parameter, a `top` prompt, a `--slow` rule, an alert literal, a filter — is read here.
//!
//! A quantity is a number (decimals, `_` between digits, an exponent: `1.5e9`, `1_000`), then,
//! with or without one space between, an optional unit, then optionally `/s`, `/min` or `/h`:
//!
//! - durations: `ns`, `us`/`µs`, `ms`, `s` (`sec`, `second(s)`), `m` (`min`, `minute(s)`),
//!   `h` (`hr`, `hour(s)`), `d` (`day(s)`), `w` (`week(s)`), `y` (`year(s)`, 365 days); parts
//!   may follow each other without spaces, largest first or not: `1m30s`, `1h30m`, `2d12h`;
//! - sizes: `B`; **`K`, `M`, `G`, `T`, `P` alone are powers of 1024**, as in `ps`, `top`,
//!   `free` and GNU coreutils' size suffixes, and so are `KiB` … `PiB`; **`kB`/`KB`, `MB`,
//!   `GB`, `TB`, `PB` are powers of 1000**. `2G`, `2GiB` and `2 GiB` are all 2,147,483,648
//!   bytes; `2GB` is 2,000,000,000;
//! - percents: `%`;
//! - rates: a size or a bare number over a time: `50/s`, `3000/min` (= 50/s), `10MiB/s`.
//!
//! What a bare number means is the place's to say ([`Quantity::as_bytes`] and friends): bytes
//! where a size is asked for, per second where a rate is, a percent where a percent is; a bare
//! number is never a duration (but `0`), because statsd users read it as milliseconds and top
//! users as seconds. Unit names are case-sensitive (`m` is a minute, `M` a mebibyte). Parsing
//! does no I/O and reads no clock.

use std::fmt;

/// What a quantity measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// A bare number: the place it is typed in gives its meaning.
    None,
    Percent,
    Seconds,
    Bytes,
    BytesPerSec,
    PerSec,
}

impl Dim {
    pub fn name(self) -> &'static str {
        match self {
            Dim::None => "a plain number",
            Dim::Percent => "a percentage",
            Dim::Seconds => "a duration",
            Dim::Bytes => "a size in bytes",
            Dim::BytesPerSec => "a rate in bytes per second",
            Dim::PerSec => "a rate per second",
        }
    }

    /// Whether a quantity of this kind can be compared with a field in `unit` (a bare number
    /// always can: it is taken in the field's unit).
    pub fn fits(self, unit: crate::units::Unit) -> bool {
        use crate::units::Unit;
        match self {
            Dim::None => true,
            Dim::Percent => unit == Unit::Percent,
            Dim::Seconds => unit == Unit::Seconds,
            Dim::Bytes => unit == Unit::Bytes,
            Dim::BytesPerSec => unit == Unit::BytesPerSec,
            Dim::PerSec => unit == Unit::PerSec,
        }
    }
}

/// A number in its base unit (seconds, bytes, per second, percent points) and what it measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantity {
    pub value: f64,
    pub dim: Dim,
}

const KI: f64 = 1024.0;

/// Every unit the grammar knows: its spelling, what it measures and its factor to the base.
pub const UNITS: &[(&str, Dim, f64)] = &[
    ("%", Dim::Percent, 1.0),
    ("ns", Dim::Seconds, 1e-9),
    ("us", Dim::Seconds, 1e-6),
    ("µs", Dim::Seconds, 1e-6),
    ("ms", Dim::Seconds, 1e-3),
    ("s", Dim::Seconds, 1.0),
    ("sec", Dim::Seconds, 1.0),
    ("secs", Dim::Seconds, 1.0),
    ("second", Dim::Seconds, 1.0),
    ("seconds", Dim::Seconds, 1.0),
    ("m", Dim::Seconds, 60.0),
    ("min", Dim::Seconds, 60.0),
    ("mins", Dim::Seconds, 60.0),
    ("minute", Dim::Seconds, 60.0),
    ("minutes", Dim::Seconds, 60.0),
    ("h", Dim::Seconds, 3600.0),
    ("hr", Dim::Seconds, 3600.0),
    ("hrs", Dim::Seconds, 3600.0),
    ("hour", Dim::Seconds, 3600.0),
    ("hours", Dim::Seconds, 3600.0),
    ("d", Dim::Seconds, 86_400.0),
    ("day", Dim::Seconds, 86_400.0),
    ("days", Dim::Seconds, 86_400.0),
    ("w", Dim::Seconds, 7.0 * 86_400.0),
    ("week", Dim::Seconds, 7.0 * 86_400.0),
    ("weeks", Dim::Seconds, 7.0 * 86_400.0),
    ("y", Dim::Seconds, 365.0 * 86_400.0),
    ("year", Dim::Seconds, 365.0 * 86_400.0),
    ("years", Dim::Seconds, 365.0 * 86_400.0),
    ("B", Dim::Bytes, 1.0),
    ("K", Dim::Bytes, KI),
    ("k", Dim::Bytes, KI),
    ("KiB", Dim::Bytes, KI),
    ("M", Dim::Bytes, KI * KI),
    ("MiB", Dim::Bytes, KI * KI),
    ("G", Dim::Bytes, KI * KI * KI),
    ("GiB", Dim::Bytes, KI * KI * KI),
    ("T", Dim::Bytes, KI * KI * KI * KI),
    ("TiB", Dim::Bytes, KI * KI * KI * KI),
    ("P", Dim::Bytes, KI * KI * KI * KI * KI),
    ("PiB", Dim::Bytes, KI * KI * KI * KI * KI),
    ("kB", Dim::Bytes, 1e3),
    ("KB", Dim::Bytes, 1e3),
    ("MB", Dim::Bytes, 1e6),
    ("GB", Dim::Bytes, 1e9),
    ("TB", Dim::Bytes, 1e12),
    ("PB", Dim::Bytes, 1e15),
];

/// What may follow `/` to make a rate, and seconds per it.
const PER: &[(&str, f64)] =
    &[("s", 1.0), ("sec", 1.0), ("second", 1.0), ("min", 60.0), ("minute", 60.0), ("h", 3600.0), ("hour", 3600.0)];

/// The units in one line, for error messages.
pub const UNITS_HELP: &str =
    "%, ns us ms s m h d w y, B K M G T (×1024) KiB MiB GiB TiB, kB MB GB TB (×1000), any size or number /s /min /h";

/// Why a text is not a quantity. `at` is the byte offset of the trouble in the text given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    pub at: usize,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    Empty,
    NotANumber(String),
    UnknownUnit(String),
    /// `/s` after something that makes no rate (`5%/s`, `3s/s`).
    BadRate(String),
    /// Text left after a complete quantity.
    Trailing(String),
    /// A quantity of one kind where another was asked for: (the text, what it is, what was wanted).
    Wrong {
        text: String,
        is: Dim,
        wanted: &'static str,
    },
    /// Negative, infinite or not a number where that makes no sense.
    OutOfRange(String),
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Empty => write!(f, "an empty value"),
            ErrorKind::NotANumber(text) => write!(f, "{text:?} is not a number"),
            ErrorKind::UnknownUnit(unit) => write!(f, "unknown unit {unit:?} (units: {UNITS_HELP})"),
            ErrorKind::BadRate(text) => {
                write!(f, "{text:?} is no rate proctor measures (rates: 50/s, 3000/min, 10MiB/s)")
            }
            ErrorKind::Trailing(rest) => write!(f, "unexpected {rest:?} after the value"),
            ErrorKind::Wrong { text, is, wanted } => write!(f, "{text:?} is {}, not {wanted}", is.name()),
            ErrorKind::OutOfRange(text) => write!(f, "{text:?} is out of range"),
        }
    }
}

impl std::error::Error for QuantityError {}

fn error(at: usize, kind: ErrorKind) -> QuantityError {
    QuantityError { at, kind }
}

fn unit(name: &str) -> Option<(Dim, f64)> {
    UNITS.iter().find(|(u, _, _)| *u == name).map(|&(_, dim, factor)| (dim, factor))
}

/// The length of the number at the start of `text` (`-`, digits, `_`, `.`, an exponent).
fn number_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'-' | b'+')) {
        i = 1;
    }
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.' || bytes[i] == b'_') {
        i += 1;
    }
    // An exponent: `1e3`, `2.5E-2` (no unit starts with `e`).
    if i > 0 && i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            i = j;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
    }
    i
}

/// The length of the unit word at the start of `text`: letters, `%` or `µ`.
fn word_len(text: &str) -> usize {
    text.char_indices().find(|&(_, c)| !(c.is_alphabetic() || c == '%' || c == 'µ')).map_or(text.len(), |(i, _)| i)
}

/// Reads one quantity from the start of `text` and says how many bytes it took; what follows
/// is the caller's (an expression's next token, a rule's hold time). A unit after one space is
/// taken only when it is a unit (`2 GiB` is a size; in `2 and`, `and` is left). Expression
/// lexers use this; a whole value goes through [`parse_quantity`].
pub fn scan_quantity(text: &str) -> Result<(Quantity, usize), QuantityError> {
    let (first, mut i) = scan_one(text)?;
    if first.dim != Dim::Seconds {
        return Ok((first, i));
    }
    // Duration parts may follow each other: `1m30s`, `1h30m`.
    let mut total = first.value;
    while text[i..].starts_with(|c: char| c.is_ascii_digit()) {
        let (part, used) = scan_one(&text[i..]).map_err(|e| QuantityError { at: e.at + i, ..e })?;
        if part.dim != Dim::Seconds {
            return Err(error(i, ErrorKind::Trailing(text[i..].to_string())));
        }
        total += part.value;
        i += used;
    }
    Ok((Quantity { value: total, dim: Dim::Seconds }, i))
}

fn scan_one(text: &str) -> Result<(Quantity, usize), QuantityError> {
    let n = number_len(text);
    let digits: String = text[..n].chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || digits == "-" || digits == "+" {
        // The word that is not a number, or its first character (`€5`: at a char boundary).
        let first = text.chars().next().map_or(0, char::len_utf8);
        let word = &text[..word_len(text).max(first)];
        return Err(error(0, if text.is_empty() { ErrorKind::Empty } else { ErrorKind::NotANumber(word.to_string()) }));
    }
    let value: f64 = digits.parse().map_err(|_| error(0, ErrorKind::NotANumber(text[..n].to_string())))?;
    let mut i = n;
    // The unit: right after the number, or after one space when what follows is a unit.
    let (mut dim, mut factor) = (Dim::None, 1.0);
    let attached = word_len(&text[i..]);
    if attached > 0 {
        let name = &text[i..i + attached];
        (dim, factor) = unit(name).ok_or_else(|| error(i, ErrorKind::UnknownUnit(name.to_string())))?;
        i += attached;
    } else if text[i..].starts_with(' ') {
        let len = word_len(&text[i + 1..]);
        if let Some(found) = (len > 0).then(|| unit(&text[i + 1..i + 1 + len])).flatten() {
            (dim, factor) = found;
            i += 1 + len;
        }
    }
    // A rate: `/s`, `/min`, `/h` after a size or a bare number. Anything else after `/` is
    // left to the caller (an expression's division: `100/rss_bytes`).
    if let Some(after) = text[i..].strip_prefix('/') {
        let len = word_len(after);
        let whole_word = !after[len..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
        if let Some(&(_, seconds)) = PER.iter().find(|(p, _)| len > 0 && whole_word && *p == &after[..len]) {
            dim = match dim {
                Dim::Bytes => Dim::BytesPerSec,
                Dim::None => Dim::PerSec,
                _ => return Err(error(i, ErrorKind::BadRate(text[..i + 1 + len].to_string()))),
            };
            factor /= seconds;
            i += 1 + len;
        }
    }
    Ok((Quantity { value: value * factor, dim }, i))
}

/// A whole text as one quantity (surrounding spaces ignored).
pub fn parse_quantity(text: &str) -> Result<Quantity, QuantityError> {
    let lead = text.len() - text.trim_start().len();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(error(0, ErrorKind::Empty));
    }
    let (q, used) = scan_quantity(trimmed).map_err(|e| QuantityError { at: e.at + lead, ..e })?;
    if used < trimmed.len() {
        let rest = &trimmed[used..];
        let at = lead + used + rest.len() - rest.trim_start().len();
        return Err(error(at, ErrorKind::Trailing(rest.trim_start().to_string())));
    }
    if !q.value.is_finite() {
        return Err(error(lead, ErrorKind::OutOfRange(trimmed.to_string())));
    }
    Ok(q)
}

fn wanted(text: &str, want: Dim, bare: bool, what: &'static str) -> Result<f64, QuantityError> {
    let q = parse_quantity(text)?;
    if q.dim == want || (bare && q.dim == Dim::None) {
        if q.value < 0.0 {
            return Err(error(0, ErrorKind::OutOfRange(text.trim().to_string())));
        }
        return Ok(q.value);
    }
    Err(error(0, ErrorKind::Wrong { text: text.trim().to_string(), is: q.dim, wanted: what }))
}

/// A size in bytes: `2G`, `2GiB`, `2 GiB`, `1.5e9` (a bare number is bytes).
pub fn parse_size(text: &str) -> Result<f64, QuantityError> {
    wanted(text, Dim::Bytes, true, "a size (2G, 512MiB, 1.5e9)")
}

/// Things per second: `50`, `50/s`, `3000/min` (a bare number is per second).
pub fn parse_rate(text: &str) -> Result<f64, QuantityError> {
    wanted(text, Dim::PerSec, true, "a rate (50, 50/s, 3000/min)")
}

/// Percent points: `80%`, `80` (a bare number is a percent).
pub fn parse_percent(text: &str) -> Result<f64, QuantityError> {
    wanted(text, Dim::Percent, true, "a percentage (80%)")
}

/// For clap's `value_parser`: a size in bytes.
pub fn size_arg(text: &str) -> Result<f64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// For clap's `value_parser`.
pub fn rate_arg(text: &str) -> Result<f64, String> {
    parse_rate(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    fn q(text: &str) -> Quantity {
        parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn sizes_follow_one_rule_for_bare_k_m_g() {
        for text in ["2G", "2GiB", "2 GiB", "2 G", "2048M", "2048 MiB", "2097152K", "2_147_483_648B", "2147483648"] {
            assert_eq!(parse_size(text), Ok(2.0 * GIB), "{text}");
        }
        assert_eq!(parse_size("2GB"), Ok(2e9));
        assert_eq!(parse_size("1.5e9"), Ok(1.5e9));
        assert_eq!(parse_size("1.5kB"), Ok(1500.0));
        assert_eq!(parse_size("4k"), Ok(4096.0));
        assert_eq!(q("1P").value, GIB * 1024.0 * 1024.0);
    }

    #[test]
    fn rates_durations_and_percents() {
        assert_eq!(parse_rate("50"), Ok(50.0));
        assert_eq!(parse_rate("50/s"), Ok(50.0));
        assert_eq!(parse_rate("3000/min"), Ok(50.0));
        assert_eq!(parse_rate("7200/h"), Ok(2.0));
        assert_eq!(q("10MiB/s"), Quantity { value: 10.0 * 1024.0 * 1024.0, dim: Dim::BytesPerSec });
        assert_eq!(q("1G/min").dim, Dim::BytesPerSec);
        assert_eq!(q("1m30s"), Quantity { value: 90.0, dim: Dim::Seconds });
        assert_eq!(q("1h30m").value, 5400.0);
        assert_eq!(q("2d12h").value, 216_000.0);
        assert_eq!(q("1w").value, 604_800.0);
        assert_eq!(q("1y").value, 31_536_000.0);
        assert_eq!(q("250ms").value, 0.25);
        assert_eq!(q("10 min").value, 600.0);
        assert_eq!(parse_percent("80%"), Ok(80.0));
        assert_eq!(parse_percent("80"), Ok(80.0));
        assert_eq!(q("1e3"), Quantity { value: 1000.0, dim: Dim::None });
    }

    #[test]
    fn a_lexer_takes_the_quantity_and_leaves_the_rest() {
        assert_eq!(scan_quantity("2 GiB and x").map(|(q, n)| (q.value, n)), Ok((2.0 * GIB, 5)));
        assert_eq!(scan_quantity("2 and x").map(|(q, n)| (q.dim, n)), Ok((Dim::None, 1)));
        assert_eq!(scan_quantity("5m)").map(|(q, n)| (q.value, n)), Ok((300.0, 2)));
        assert_eq!(scan_quantity("80%>5s").map(|(q, n)| (q.value, n)), Ok((80.0, 3)));
        assert_eq!(scan_quantity("100/s ").map(|(q, n)| (q.dim, n)), Ok((Dim::PerSec, 5)));
    }

    #[test]
    fn what_is_refused_says_where_and_why() {
        let e = parse_quantity("5parsecs").expect_err("unknown unit");
        assert_eq!((e.at, e.kind.clone()), (1, ErrorKind::UnknownUnit("parsecs".into())));
        assert!(e.to_string().starts_with("unknown unit \"parsecs\""), "{e}");
        let e = parse_quantity("5 parsecs").expect_err("trailing");
        assert_eq!((e.at, e.kind), (2, ErrorKind::Trailing("parsecs".into())));
        assert!(matches!(parse_quantity("5%/s").map_err(|e| e.kind), Err(ErrorKind::BadRate(_))));
        assert!(matches!(parse_quantity("5/fortnight").map_err(|e| e.kind), Err(ErrorKind::Trailing(_))));
        assert_eq!(scan_quantity("100/rss_bytes").map(|(q, n)| (q.dim, n)), Ok((Dim::None, 3)));
        assert!(matches!(parse_quantity("1m30").map_err(|e| e.kind), Err(ErrorKind::Trailing(_))));
        assert!(matches!(parse_quantity("2G30s").map_err(|e| e.kind), Err(ErrorKind::Trailing(_))));
        assert!(matches!(parse_quantity("").map_err(|e| e.kind), Err(ErrorKind::Empty)));
        assert!(matches!(parse_quantity("soon").map_err(|e| e.kind), Err(ErrorKind::NotANumber(_))));
        assert!(matches!(parse_quantity("1e999").map_err(|e| e.kind), Err(ErrorKind::OutOfRange(_))));
        let e = parse_size("5s").expect_err("a duration is no size");
        assert_eq!(e.to_string(), "\"5s\" is a duration, not a size (2G, 512MiB, 1.5e9)");
        assert!(parse_rate("-5/s").is_err());
        assert!(parse_size("2 GiB/fortnight").is_err());
        // Text from outside (a query parameter, a prompt) is refused, never a panic, whatever
        // its first character.
        for text in ["€5", "—", "5€", "µ", "5 €", "2G/€", "1m€", "\u{0}", "ǅ5", "5ǅ"] {
            assert!(parse_quantity(text).is_err(), "{text:?}");
        }
    }
}
