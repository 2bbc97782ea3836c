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

/// Splits on ASCII whitespace runs (space, tab, newline, form feed, carriage return): the same
/// fields as `bytes.split(is_ascii_whitespace).filter(non-empty)`. A plain loop, because the
/// split-and-filter form yields and drops an empty slice for every extra space, and diskstats
/// lines open with a dozen of them.
pub(crate) fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { rest: bytes }
}

#[derive(Debug, Clone)]
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// What the iterator has not looked at yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|b| !b.is_ascii_whitespace())?;
        let rest = &self.rest[start..];
        let end = rest.iter().position(u8::is_ascii_whitespace).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Has the high bit set in the first byte of `word` that equals `byte` (in memory order, the
/// lowest set bit), and possibly in later bytes too: the borrow of the subtraction can flag the
/// byte after a match. Only the first match is ever used, so that does not matter.
#[inline]
fn byte_mask(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGH
}

/// How many leading words [`find_byte`] tests itself before handing a long haystack to
/// `memchr`: /proc lines are mostly 15–50 bytes, where `memchr`'s dispatch and setup cost more
/// than the search itself, but `/proc/stat`'s `intr` line runs to hundreds of bytes.
const SHORT_WORDS: usize = 6;

/// The index of the first `byte` in `hay`: eight bytes at a time (SWAR) for the first
/// [`SHORT_WORDS`] words, then `memchr` for what is left.
#[inline]
pub(crate) fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    let mut at = 0;
    let mut chunks = hay.chunks_exact(8);
    for chunk in chunks.by_ref().take(SHORT_WORDS) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mask = byte_mask(u64::from_le_bytes(word), byte);
        if mask != 0 {
            return Some(at + (mask.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = &hay[at..];
    if rest.len() >= 8 {
        return memchr::memchr(byte, rest).map(|i| at + i);
    }
    rest.iter().position(|&b| b == byte).map(|i| at + i)
}

/// Non-empty lines, split at `\n`; a last line without a newline is kept.
///
/// Newlines are found 64 bytes at a time into a bit mask, and each line is then one
/// `trailing_zeros`: this runs over every line of every host file on every cycle (vmstat alone
/// is ~200 lines), where a search call per line cost more in setup than in searching.
pub(crate) fn lines(bytes: &[u8]) -> Lines<'_> {
    Lines { bytes, start: 0, block: 0, mask: newlines_at(bytes, 0) }
}

#[derive(Debug, Clone)]
pub(crate) struct Lines<'a> {
    bytes: &'a [u8],
    /// Where the next line begins.
    start: usize,
    /// The offset of the 64-byte block `mask` describes.
    block: usize,
    /// The newlines of that block not yet handed out, one bit per byte.
    mask: u64,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        while self.start < self.bytes.len() {
            if self.mask == 0 && !self.refill() {
                // No newline after `start`: the rest is a last line without one.
                let line = &self.bytes[self.start..];
                self.start = self.bytes.len();
                return Some(line);
            }
            let end = self.block + self.mask.trailing_zeros() as usize;
            self.mask &= self.mask - 1;
            let line = &self.bytes[self.start..end];
            self.start = end + 1;
            if !line.is_empty() {
                return Some(line);
            }
        }
        None
    }
}

impl Lines<'_> {
    /// Moves on to the next block that holds a newline; `false` when there is none. Kept out
    /// of line so that `next`, which runs once per line, stays small enough to inline.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        while self.mask == 0 {
            self.block += 64;
            if self.block >= self.bytes.len() {
                return false;
            }
            self.mask = newlines_at(self.bytes, self.block);
        }
        true
    }
}

/// The newlines of `bytes[at..at + 64]` as bits; a short last block is padded with zeros,
/// which are not newlines.
#[inline]
fn newlines_at(bytes: &[u8], at: usize) -> u64 {
    block_mask(&block_at(bytes, at), b'\n')
}

/// Bit `i` is set where `block[i] == byte`: four SSE2 compares on x86_64 (SSE2 is part of
/// its baseline, so no runtime detection), [`block_mask_swar`] elsewhere.
#[inline]
fn block_mask(block: &[u8; 64], byte: u8) -> u64 {
    block_masks(block, [byte])[0]
}

/// [`block_mask`] for several bytes from one pass over the block.
#[inline]
pub(crate) fn block_masks<const N: usize>(block: &[u8; 64], bytes: [u8; N]) -> [u64; N] {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        let mut masks = [0u64; N];
        for (i, part) in block.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is always present on x86_64, and the unaligned load reads exactly
            // the 16 bytes of `part`.
            let v = unsafe { _mm_loadu_si128(part.as_ptr().cast::<__m128i>()) };
            for (mask, &byte) in masks.iter_mut().zip(&bytes) {
                // SAFETY: as above; these are register operations.
                let bits = unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8))) };
                *mask |= u64::from(bits as u16) << (16 * i);
            }
        }
        masks
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        bytes.map(|byte| block_mask_swar(block, byte))
    }
}

/// The 64 bytes at `at` as a block, a short last block padded with zeros.
#[inline]
pub(crate) fn block_at(bytes: &[u8], at: usize) -> std::borrow::Cow<'_, [u8; 64]> {
    if let Some(Ok(block)) = bytes.get(at..at.saturating_add(64)).map(<&[u8; 64]>::try_from) {
        return std::borrow::Cow::Borrowed(block);
    }
    let tail = bytes.get(at..).unwrap_or_default();
    let mut block = [0u8; 64];
    block[..tail.len().min(64)].copy_from_slice(&tail[..tail.len().min(64)]);
    std::borrow::Cow::Owned(block)
}

/// [`block_mask`] a word at a time, for other architectures (and as its test oracle).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn block_mask_swar(block: &[u8; 64], byte: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut mask = 0u64;
    for (i, part) in block.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(part);
        let x = u64::from_le_bytes(word) ^ (ONES * u64::from(byte));
        // Exactly the matching bytes' high bits (no borrow between bytes), gathered into the
        // top byte by the multiply and shifted down.
        let high = !(((x & LOW7) + LOW7) | x | LOW7);
        mask |= ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
    }
    mask
}

/// The index of the first byte of `hay` that is `a` or `b`, a word at a time; for keys, which
/// end at a separator or, when the separator is missing, at the end of the line.
#[inline]
pub(crate) fn find_either(hay: &[u8], a: u8, b: u8) -> Option<usize> {
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Each mask is exact up to its own first match, so the lowest bit of the union is the
        // first byte that is either.
        let mask = byte_mask(word, a) | byte_mask(word, b);
        if mask != 0 {
            return Some(at + (mask.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&c| c == a || c == b).map(|i| at + i)
}

/// The first `out.len()` whitespace-separated fields of `bytes`, each as [`u64_dec`] would
/// parse it, in one pass over the bytes; returns how many fields there were (at most
/// `out.len()`). For lines of counters (diskstats, net/dev), where splitting first and parsing
/// each field after walked every byte twice.
pub(crate) fn u64_fields(bytes: &[u8], out: &mut [Option<u64>]) -> usize {
    let mut count = 0;
    let mut i = 0;
    while count < out.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            break;
        }
        let start = i;
        let mut value: u64 = 0;
        let mut digits_only = true;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            let digit = bytes[i].wrapping_sub(b'0');
            digits_only &= digit <= 9;
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            i += 1;
        }
        // Up to 19 digits cannot overflow; longer fields take the checked path.
        out[count] = match (digits_only, i - start) {
            (false, _) => None,
            (true, len) if len < 20 => Some(value),
            (true, _) => u64_dec(&bytes[start..i]),
        };
        count += 1;
    }
    count
}

/// Splits `Key:   value rest` into (`Key`, `value rest` trimmed) at the first colon.
pub(crate) fn key_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = find_byte(line, b':')?;
    Some((&line[..colon], trim(&line[colon + 1..])))
}

/// Splits `key value` at the first space: the shape of vmstat, memory.stat and cpu.stat.
pub(crate) fn key_space_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = find_byte(line, b' ')?;
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

/// [`kb_to_bytes`] of the text after a `Key:` colon, with a fast path for the two shapes the
/// kernel prints (`   1234 kB` and `   1234`): spaces, at most 19 digits (so no overflow check
/// is needed), then nothing or exactly ` kB`. Anything else goes to [`kb_to_bytes`], so the
/// answer is the same for every input, only cheaper for the usual one.
#[inline]
pub(crate) fn kb_value(raw: &[u8]) -> Option<u64> {
    let start = raw.iter().position(|&b| b != b' ').unwrap_or(raw.len());
    let text = &raw[start..];
    let digits = text.iter().position(|b| !b.is_ascii_digit()).unwrap_or(text.len());
    if (1..20).contains(&digits) {
        let mut value = 0u64;
        for &b in &text[..digits] {
            value = value * 10 + u64::from(b - b'0');
        }
        match &text[digits..] {
            b"" => return Some(value),
            b" kB" => return value.checked_mul(1024),
            _ => {}
        }
    }
    kb_to_bytes(raw)
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

/// A xorshift64 generator for the property tests: deterministic, so a failure reproduces.
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
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
        for (i, f, len) in [(0u64, 1u64, 2usize), (12, 34, 2), (99, 999_999, 6), (1, 5, 1), (3, 141_592, 6), (0, 7, 3)]
        {
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

    /// The word-at-a-time search, the line splitter and the field splitter against the obvious
    /// byte-by-byte definitions, on inputs full of near misses: bytes one off the needle, the
    /// needle with its high bit set, 0x01 right after a match (where a borrow would leak), and
    /// every length around the word size and the hand-over to `memchr`.
    #[test]
    fn word_search_lines_and_fields_agree_with_the_plain_definitions() {
        let mut next = crate::parse::xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = b"\n\x0b\x09\x8a\x01\x00\xff\x80 :\x3a\xba\x3b\x39\x0c\rkB0a";
        for round in 0..20_000 {
            let len = (next() % 300) as usize;
            let hay: Vec<u8> = (0..len)
                .map(
                    |_| if round % 3 == 0 { next() as u8 } else { alphabet[(next() % alphabet.len() as u64) as usize] },
                )
                .collect();
            for needle in [b'\n', b':', b' ', 0u8, 0xff, 0x80] {
                assert_eq!(find_byte(&hay, needle), hay.iter().position(|&b| b == needle), "{needle:#x} in {hay:?}");
                let either = hay.iter().position(|&b| b == needle || b == b':');
                assert_eq!(find_either(&hay, needle, b':'), either, "{needle:#x} or ':' in {hay:?}");
            }
            let want: Vec<&[u8]> = hay.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
            assert_eq!(lines(&hay).collect::<Vec<_>>(), want, "lines of {hay:?}");
            let want: Vec<&[u8]> = hay.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty()).collect();
            assert_eq!(fields(&hay).collect::<Vec<_>>(), want, "fields of {hay:?}");
        }
    }

    #[test]
    fn block_masks_agree_with_a_byte_loop() {
        let mut next = crate::parse::xorshift(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"\n\x0b\x09\x8a\x01\x00\xff\x80 ";
        for round in 0..20_000 {
            let mut block = [0u8; 64];
            for b in &mut block {
                *b = if round % 2 == 0 { next() as u8 } else { alphabet[(next() % alphabet.len() as u64) as usize] };
            }
            for byte in [b'\n', 0, 0xff, 0x80, b' '] {
                let want = block.iter().enumerate().filter(|(_, &b)| b == byte).fold(0u64, |m, (i, _)| m | 1 << i);
                assert_eq!(block_mask(&block, byte), want, "{byte:#x} in {block:?}");
                assert_eq!(block_mask_swar(&block, byte), want, "{byte:#x} in {block:?}");
                assert_eq!(block_masks(&block, [0x0a, byte])[1], want, "{byte:#x} in {block:?}");
            }
        }
    }

    #[test]
    fn u64_fields_agree_with_fields_and_u64_dec() {
        let mut next = crate::parse::xorshift(0x5851_f42d_4c95_7f2d);
        let alphabet = b"0123456789999   \t\r\nx-";
        for _ in 0..20_000 {
            let len = (next() % 90) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let cap = (next() % 18) as usize;
            let want: Vec<Option<u64>> = fields(&bytes).take(cap).map(u64_dec).collect();
            let mut got = vec![Some(7); cap];
            let count = u64_fields(&bytes, &mut got);
            assert_eq!(&got[..count], &want[..], "{:?} cap {cap}", String::from_utf8_lossy(&bytes));
        }
        let mut one = [None];
        for (text, want) in [
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("9999999999999999999", Some(9_999_999_999_999_999_999)),
            ("000000000000000000001", None),
        ] {
            assert_eq!((u64_fields(text.as_bytes(), &mut one), one[0]), (1, want), "{text}");
        }
    }

    /// `kb_value`'s fast path against `kb_to_bytes` on the text after every colon of a real
    /// `status` and `meminfo`, and on edits of it.
    #[test]
    fn kb_value_agrees_with_kb_to_bytes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/");
        let mut values: Vec<Vec<u8>> = Vec::new();
        for name in ["status", "meminfo", "node0-meminfo"] {
            let text = std::fs::read(format!("{dir}{name}")).expect("fixture");
            values.extend(lines(&text).filter_map(|l| Some(l[find_byte(l, b':')? + 1..].to_vec())));
        }
        values.extend(
            [
                &b"99999999999999999999 kB"[..],
                b"1999999999999999999 kB",
                b" 18014398509481983 kB",
                b"1 kB x",
                b"1  kB",
                b"1 kb",
                b"",
                b" ",
            ]
            .map(<[u8]>::to_vec),
        );
        let mut next = crate::parse::xorshift(0x1234_5678_9abc_def1);
        let alphabet = b" \t\r0123456789kBb\xff";
        for value in &values {
            assert_eq!(kb_value(value), kb_to_bytes(value), "{:?}", String::from_utf8_lossy(value));
            for _ in 0..200 {
                let mut v = value.clone();
                for _ in 0..1 + next() % 3 {
                    let byte = alphabet[(next() % alphabet.len() as u64) as usize];
                    let at = (next() % (v.len() as u64 + 1)) as usize;
                    match next() % 3 {
                        0 if at < v.len() => v[at] = byte,
                        1 => v.insert(at, byte),
                        _ => v.truncate(at),
                    }
                }
                assert_eq!(kb_value(&v), kb_to_bytes(&v), "{:?}", String::from_utf8_lossy(&v));
            }
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(b"0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list(b"\n"), Some(vec![]));
        assert_eq!(cpu_list(b"3-1"), None);
        assert_eq!(cpu_list(b"x"), None);
    }
}
