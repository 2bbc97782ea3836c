//! Small byte-level helpers shared by the parsers. No allocation on the number paths.

/// Parses an unsigned decimal; `None` on anything else (empty, sign, overflow, junk).
pub(crate) fn u64_dec(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in bytes {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(value)
}

/// Parses a signed decimal.
pub(crate) fn i64_dec(bytes: &[u8]) -> Option<i64> {
    match bytes.split_first() {
        Some((b'-', rest)) => u64_dec(rest).and_then(|v| i64::try_from(v).ok()).map(|v| -v),
        _ => u64_dec(bytes).and_then(|v| i64::try_from(v).ok()),
    }
}

pub(crate) fn f64_dec(bytes: &[u8]) -> Option<f64> {
    std::str::from_utf8(bytes).ok()?.parse().ok().filter(|v: &f64| v.is_finite())
}

/// Parses a plain decimal such as `12.34` (PSI averages) without going through `str::parse`,
/// which is several times slower; anything else falls back to it.
pub(crate) fn decimal(bytes: &[u8]) -> Option<f64> {
    // Powers of ten up to 10^6 are exact in f64, so the table gives what `powi` gives, without
    // a library call per number; the values are a few bytes long, so a plain loop finds the dot
    // sooner than `memchr`'s setup would.
    const SCALE: [f64; 7] = [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0];
    let dot = bytes.iter().position(|&b| b == b'.');
    let (int, frac) = match dot {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (bytes, &b""[..]),
    };
    match (u64_dec(int), frac.len()) {
        (Some(i), 0) => Some(i as f64),
        (Some(i), len @ 1..=6) => u64_dec(frac).map(|f| i as f64 + f as f64 / SCALE[len]),
        _ => f64_dec(bytes),
    }
}

/// Splits on ASCII whitespace runs.
pub(crate) fn fields(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty())
}

/// Non-empty lines. Line ends are found with `memchr` (SIMD), which matters for the larger
/// files read every cycle (`vmstat` is ~200 lines).
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        if !line.is_empty() {
            return Some(line);
        }
    })
}

/// Splits `Key:   value rest` into (`Key`, `value rest` trimmed) at the first colon.
pub(crate) fn key_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = memchr::memchr(b':', line)?;
    Some((&line[..colon], trim(&line[colon + 1..])))
}

/// Splits `key value` at the first space: the shape of vmstat, memory.stat and cpu.stat.
pub(crate) fn key_space_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = memchr::memchr(b' ', line)?;
    Some((&line[..space], trim(&line[space + 1..])))
}

pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// Parses `1234 kB` (as in meminfo, status, smaps_rollup) into bytes.
pub(crate) fn kb_to_bytes(value: &[u8]) -> Option<u64> {
    let mut parts = fields(value);
    let number = u64_dec(parts.next()?)?;
    match parts.next() {
        None => Some(number),
        Some(b"kB") => number.checked_mul(1024),
        Some(_) => None,
    }
}

/// Parses a CPU list such as `0-3,8,10-11` into CPU numbers; `None` on junk.
pub fn cpu_list(bytes: &[u8]) -> Option<Vec<u32>> {
    let text = trim(bytes);
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(|&b| b == b',') {
        let part = trim(part);
        match part.iter().position(|&b| b == b'-') {
            Some(dash) => {
                let first = u32::try_from(u64_dec(&part[..dash])?).ok()?;
                let last = u32::try_from(u64_dec(&part[dash + 1..])?).ok()?;
                if last < first || last - first > 65_536 {
                    return None;
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(u32::try_from(u64_dec(part)?).ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(u64_dec(b"0"), Some(0));
        assert_eq!(u64_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(u64_dec(b"18446744073709551616"), None);
        assert_eq!(u64_dec(b""), None);
        assert_eq!(u64_dec(b"12a"), None);
        assert_eq!(i64_dec(b"-1"), Some(-1));
        assert_eq!(kb_to_bytes(b"  12 kB"), Some(12 * 1024));
        assert_eq!(kb_to_bytes(b"12 MB"), None);
        assert_eq!(decimal(b"1.50"), Some(1.5));
        assert_eq!(decimal(b"12"), Some(12.0));
        assert_eq!(decimal(b"0.00"), Some(0.0));
        assert_eq!(decimal(b"1e3"), Some(1000.0));
        assert_eq!(decimal(b"x.5"), None);
        // The table and `powi` agree to the bit on every PSI-shaped value.
        for (i, f, len) in [(0u64, 1u64, 2usize), (12, 34, 2), (99, 999_999, 6), (1, 5, 1), (3, 141_592, 6), (0, 7, 3)] {
            let text = format!("{i}.{f:0len$}");
            assert_eq!(decimal(text.as_bytes()), Some(i as f64 + f as f64 / 10f64.powi(len as i32)), "{text}");
            assert_eq!(decimal(text.as_bytes()), text.parse::<f64>().ok(), "{text}");
        }
    }

    #[test]
    fn lines_skip_empty_and_keep_last() {
        let got: Vec<&[u8]> = lines(b"a\n\nb c\nd").collect();
        assert_eq!(got, vec![&b"a"[..], b"b c", b"d"]);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(key_space_value(b"pgfault 12"), Some((&b"pgfault"[..], &b"12"[..])));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(b"0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list(b"\n"), Some(vec![]));
        assert_eq!(cpu_list(b"3-1"), None);
        assert_eq!(cpu_list(b"x"), None);
    }
}
