//! JavaScript number semantics that Etsy statsd's wire behaviour depends on: what `Number(str)`
//! accepts, what JavaScript counts as whitespace, and how a number prints (`String(x)`).
//!
//! Etsy statsd is a Node program, so "is this a valid value" and "how does 0.1 look on the
//! Graphite wire" are defined by ECMAScript, not by Rust's `f64::from_str` and `Display`. This
//! module reproduces exactly those two conversions. It does no I/O and holds no state.

/// ECMAScript `WhiteSpace` plus `LineTerminator`: what `String.prototype.trim`, `\s` in a regular
/// expression and `Number()` skip. It is Unicode `White_Space` minus U+0085 (NEL, which
/// JavaScript does not treat as whitespace) plus U+FEFF (the byte-order mark, which it does).
pub fn is_js_whitespace(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// JavaScript's `String.prototype.trim`.
pub fn js_trim(text: &str) -> &str {
    // Every JavaScript whitespace character is either ASCII at or below the space, or starts
    // with a byte above 0x7f; printable ASCII at both ends leaves nothing to trim.
    let printable = |byte: Option<&u8>| byte.is_some_and(|b| (0x21..0x7f).contains(b));
    let bytes = text.as_bytes();
    if printable(bytes.first()) && printable(bytes.last()) {
        return text;
    }
    text.trim_matches(is_js_whitespace)
}

/// JavaScript's `Number(text)` for a string: `None` where JavaScript gives `NaN`.
///
/// Accepted: surrounding whitespace, the empty string (0), decimal literals with optional sign,
/// fraction and exponent (`1.`, `.5`, `+1e3`), `Infinity` with optional sign, and unsigned
/// `0x`/`0o`/`0b` integers. Rust's parser alone would also accept `inf` and `nan`, which
/// JavaScript rejects, so the grammar is checked here first.
pub fn js_number(text: &str) -> Option<f64> {
    let text = js_trim(text);
    if text.is_empty() {
        return Some(0.0);
    }
    let bytes = text.as_bytes();
    if bytes.len() > 2 && bytes[0] == b'0' {
        let radix = match bytes[1] {
            b'x' | b'X' => Some(16),
            b'o' | b'O' => Some(8),
            b'b' | b'B' => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            return radix_integer(&text[2..], radix);
        }
    }
    let (negative, unsigned) = match bytes[0] {
        b'+' => (false, &text[1..]),
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    if unsigned == "Infinity" {
        return Some(if negative { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if !is_decimal_literal(unsigned.as_bytes()) {
        return None;
    }
    // Up to 15 digits and nothing else is an integer below 2^53: exact as a double, so it needs
    // no correctly rounded parse (most statsd values look like this).
    if unsigned.len() <= 15 && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        let magnitude = unsigned.bytes().fold(0u64, |n, b| n * 10 + u64::from(b - b'0')) as f64;
        return Some(if negative { -magnitude } else { magnitude });
    }
    // The grammar is checked, so Rust's correctly rounded parser gives the same double as
    // JavaScript's (both round to nearest per IEEE 754).
    text.parse::<f64>().ok()
}

fn radix_integer(digits: &str, radix: u32) -> Option<f64> {
    if digits.is_empty() {
        return None;
    }
    let mut value = 0.0_f64;
    for c in digits.chars() {
        value = value * f64::from(radix) + f64::from(c.to_digit(radix)?);
    }
    Some(value)
}

/// `StrUnsignedDecimalLiteral` without `Infinity`: `digits[.digits?]` or `.digits`, then an
/// optional exponent.
fn is_decimal_literal(bytes: &[u8]) -> bool {
    let mut index = 0;
    let int_digits = count_digits(&bytes[index..]);
    index += int_digits;
    let mut frac_digits = 0;
    if bytes.get(index) == Some(&b'.') {
        index += 1;
        frac_digits = count_digits(&bytes[index..]);
        index += frac_digits;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if matches!(bytes.get(index), Some(b'e' | b'E')) {
        index += 1;
        if matches!(bytes.get(index), Some(b'+' | b'-')) {
            index += 1;
        }
        let exp_digits = count_digits(&bytes[index..]);
        if exp_digits == 0 {
            return false;
        }
        index += exp_digits;
    }
    index == bytes.len()
}

fn count_digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

/// JavaScript's `String(x)` for a number (ECMAScript `Number::toString`): the shortest digits
/// that round-trip, plain notation for decimal exponents in [-7, 21), exponent notation
/// (`1e-7`, `1.5e+21`) outside it, `-0` printed as `0`.
pub fn js_format(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    // `{:e}` gives Rust's shortest round-trip digits, the same digits JavaScript chooses.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digit_count = digits.len() as i32;
    // `n` in the specification: the decimal point sits after `n` digits.
    let point = exponent + 1;
    let mut out = String::with_capacity(24);
    if value < 0.0 {
        out.push('-');
    }
    if digit_count <= point && point <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - digit_count) as usize));
    } else if 0 < point && point <= 21 {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if digit_count > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if point - 1 < 0 { '-' } else { '+' });
        out.push_str(&(point - 1).abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{is_js_whitespace, js_format, js_number, js_trim};

    /// The fast paths (printable ends need no trim; short digit runs need no float parse) give
    /// exactly what the general code gives.
    #[test]
    fn fast_paths_agree_with_the_general_code() {
        let integers = ["0", "-0", "+0", "7", "-7", "007", "123456789012345", "-999999999999999", "1234567890123456"];
        for text in integers {
            let parsed = js_number(text).expect("a number");
            let general: f64 = text.parse().expect("rust parses it");
            assert_eq!(parsed.to_bits(), general.to_bits(), "{text:?}");
        }
        for text in ["", " ", "a", " a", "a ", "\u{a0}a", "a\u{3000}", "\u{feff}x\t", "ab", "a b", "\u{85}a"] {
            assert_eq!(js_trim(text), text.trim_matches(is_js_whitespace), "{text:?}");
        }
    }

    #[test]
    fn number_accepts_what_javascript_accepts() {
        let cases: &[(&str, Option<f64>)] = &[
            ("1", Some(1.0)),
            (" 12\t", Some(12.0)),
            ("", Some(0.0)),
            ("   ", Some(0.0)),
            ("1.", Some(1.0)),
            (".5", Some(0.5)),
            ("+3", Some(3.0)),
            ("-3e2", Some(-300.0)),
            ("0x10", Some(16.0)),
            ("0b101", Some(5.0)),
            ("0o17", Some(15.0)),
            ("Infinity", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("1e400", Some(f64::INFINITY)),
            ("inf", None),
            ("NaN", None),
            ("nan", None),
            ("-0x10", None),
            ("0x", None),
            ("1e", None),
            (".", None),
            ("1.2.3", None),
            ("12abc", None),
            ("+", None),
            ("1_000", None),
        ];
        for (text, expected) in cases {
            assert_eq!(js_number(text), *expected, "Number({text:?})");
        }
    }

    #[test]
    fn format_prints_what_javascript_prints() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (5.0, "5"),
            (-5.0, "-5"),
            (0.1, "0.1"),
            (100.0 / 3.0, "33.333333333333336"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (-2.5e-8, "-2.5e-8"),
            (0.000123, "0.000123"),
            (f64::INFINITY, "Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(js_format(*value), *expected, "String({value:e})");
        }
    }
}
