//! The rollup tiers' record: a [`RollupBlock`] (an hour of minute rows, or a day of hour rows)
//! as compact bytes, compressed by the writer like any event record. Pure.
//!
//! Columnar: each series is stored over the block's rows, its mean as differences from the
//! row before and its min, max and last as differences from the row's mean, all zigzag varints,
//! so an idle series (the usual group on a small box) is a few bytes an hour and a stream that
//! is all zero is a bit in the column's flags. Values are kept to 4 significant digits of the
//! column's largest value in the block (a decimal exponent per column): memory of 1.5 GiB to
//! within 0.1 MB, a CPU share of up to 100 % to within 0.01. Counts of values per row are kept
//! exactly. Layout, all integers LEB128 varints (`z` zigzag):
//!
//! ```text
//! span_s, names n, (len, utf-8)×n, rows r, (start_delta, samples)×r,
//! per column: flags u8 [bit 0 in every row, bits 1–4 min/mean/max/last stream all zero,
//!             bit 5 n equals the row's samples], presence bitmap ⌈r/8⌉ bytes unless bit 0,
//!             z exponent, z base (the first mean), then per stream not all zero one z
//!             value per present row,
//!             then unless bit 5 one z (n − samples) per present row
//! ```
//!
//! Decoding trusts nothing: every count is bounded before anything is allocated for it, the
//! cells (names × rows) by what the record's bytes can hold ([`check_cells`]), and a record that
//! ends early or runs over is an error, never a panic.

use proctor_model::{RollupBlock, RollupRow, Stat};

/// Why a rollup record does not decode (the store reports it as a codec error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlock(pub &'static str);

/// The rollup record format this build writes and reads.
pub const ROLLUP_VERSION: u8 = 1;

/// Most series names and rows a block may claim (a day of minutes is 1,440 rows).
const MAX_NAMES: u64 = 1 << 16;
const MAX_ROWS: u64 = 1 << 14;
const MAX_NAME_BYTES: u64 = 4096;
/// Most cells (a row's value of one series: names × rows) a block may claim per byte of its
/// record. The format lets a claim outgrow its bytes: an idle column is 3 bytes whatever the
/// rows, so a 36 KB record (a 76-byte frame) claimed 1,024 names × 16,384 rows, 16.7 million
/// cells of ~48 bytes decoded. A column takes at least 4 bytes (its name's length, flags,
/// exponent, base), so every block of up to 64 rows fits, whatever its names (the tiers write
/// 60 minute rows and 24 hour rows). A 64 KiB record (what a payload of up to 64 bytes may
/// decompress to, `codec::MIN_RECORD_ALLOWANCE`) then decodes to at most ~1 million cells, ~50 MB.
pub const CELLS_PER_BYTE: usize = 16;
/// Most cells any block may hold, however large its record: the most names over 64 rows
/// (~200 MB decoded; records of 256 KiB and more, payloads of 256 bytes and more, reach it).
const MAX_CELLS: usize = MAX_NAMES as usize * 64;
/// Significant decimal digits kept of each column's largest value.
const DIGITS: i32 = 4;

pub fn encode_block(block: &RollupBlock) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + block.names.len() * 24);
    varint(&mut out, u64::from(block.span_s));
    varint(&mut out, block.names.len() as u64);
    for name in &block.names {
        varint(&mut out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
    }
    varint(&mut out, block.rows.len() as u64);
    let mut prev_start = 0;
    for row in &block.rows {
        varint(&mut out, row.start_unix_s.wrapping_sub(prev_start));
        prev_start = row.start_unix_s;
        varint(&mut out, u64::from(row.samples));
    }
    for col in 0..block.names.len() {
        let cells: Vec<Option<&Stat>> =
            block.rows.iter().map(|r| r.values.get(col).and_then(Option::as_ref).filter(|s| finite(s))).collect();
        let largest =
            cells.iter().flatten().map(|s| s.min.abs().max(s.max.abs()).max(s.last.abs())).fold(0.0, f64::max);
        let exponent = if largest > 0.0 { (largest.log10().floor() as i32 + 1 - DIGITS).clamp(-12, 15) } else { 0 };
        let scale = 10f64.powi(exponent);
        let q = |v: f64| (v / scale).round() as i64;
        let present: Vec<(usize, &Stat)> = cells.iter().enumerate().filter_map(|(i, c)| c.map(|s| (i, s))).collect();
        let mut streams: [Vec<i64>; 4] = Default::default();
        // Each mean is taken from the one before; the first from the column's base, so a
        // constant column's mean stream is all zero.
        let base = present.first().map_or(0, |(_, s)| q(s.mean));
        let mut prev_mean = base;
        for (_, s) in &present {
            // Wrapping, as the decoder adds them back: a value near the largest the exponent's
            // clamp allows (a hostile stored one the roller merges) quantizes to near i64's
            // ends, and a difference of two of them overflows, yet round-trips exactly.
            let mean = q(s.mean);
            streams[0].push(mean.wrapping_sub(q(s.min)));
            streams[1].push(mean.wrapping_sub(prev_mean));
            streams[2].push(q(s.max).wrapping_sub(mean));
            streams[3].push(q(s.last).wrapping_sub(mean));
            prev_mean = mean;
        }
        let counts: Vec<i64> =
            present.iter().map(|(i, s)| i64::from(s.n) - i64::from(block.rows[*i].samples)).collect();
        let mut flags = 0u8;
        if present.len() == block.rows.len() {
            flags |= 1;
        }
        for (k, stream) in streams.iter().enumerate() {
            if stream.iter().all(|v| *v == 0) {
                flags |= 2 << k;
            }
        }
        if counts.iter().all(|c| *c == 0) {
            flags |= 1 << 5;
        }
        out.push(flags);
        if flags & 1 == 0 {
            let mut bitmap = vec![0u8; block.rows.len().div_ceil(8)];
            for (i, _) in &present {
                bitmap[i / 8] |= 1 << (i % 8);
            }
            out.extend_from_slice(&bitmap);
        }
        zigzag(&mut out, i64::from(exponent));
        zigzag(&mut out, base);
        for (k, stream) in streams.iter().enumerate() {
            if flags & (2 << k) == 0 {
                for v in stream {
                    zigzag(&mut out, *v);
                }
            }
        }
        if flags & (1 << 5) == 0 {
            for c in &counts {
                zigzag(&mut out, *c);
            }
        }
    }
    out
}

fn finite(s: &Stat) -> bool {
    s.n > 0 && s.min.is_finite() && s.mean.is_finite() && s.max.is_finite() && s.last.is_finite()
}

pub fn decode_block(bytes: &[u8]) -> Result<RollupBlock, BadBlock> {
    let mut r = Bytes { bytes, at: 0 };
    let span_s = u32::try_from(r.varint()?).map_err(|_| bad("a span past u32"))?;
    let names_n = r.bounded(MAX_NAMES, "more series names than a block may hold")?;
    let mut names = Vec::with_capacity(names_n.min(r.left()));
    for _ in 0..names_n {
        let len = r.bounded(MAX_NAME_BYTES, "a series name longer than 4 KiB")?;
        let raw = r.take(len)?;
        names.push(String::from_utf8(raw.to_vec()).map_err(|_| bad("a series name that is not UTF-8"))?);
    }
    let rows_n = r.bounded(MAX_ROWS, "more rows than a block may hold")?;
    // Each cell costs memory and work for every reader after this, so the claim is held to
    // what the record's bytes can hold before a row is built.
    check_cells(names.len(), rows_n, bytes.len())?;
    let mut rows = Vec::with_capacity(rows_n.min(r.left()));
    let mut start = 0u64;
    for _ in 0..rows_n {
        start = start.wrapping_add(r.varint()?);
        let samples = u32::try_from(r.varint()?).map_err(|_| bad("a sample count past u32"))?;
        rows.push(RollupRow { start_unix_s: start, span_s, samples, values: Vec::with_capacity(names.len()) });
    }
    // One set of buffers for every column (a block has hundreds).
    let mut present: Vec<usize> = Vec::with_capacity(rows_n);
    let mut streams: [Vec<i64>; 4] = Default::default();
    let mut counts: Vec<i64> = Vec::with_capacity(rows_n);
    for col in 0..names.len() {
        let flags = r.take(1)?[0];
        present.clear();
        if flags & 1 != 0 {
            present.extend(0..rows_n);
        } else {
            let bitmap = r.take(rows_n.div_ceil(8))?;
            present.extend((0..rows_n).filter(|i| bitmap[i / 8] & (1 << (i % 8)) != 0));
        }
        let exponent = r.zigzag()?;
        if !(-12..=15).contains(&exponent) {
            return Err(bad("a column exponent out of range"));
        }
        // Dividing by an exact power of ten gives the nearest double to the decimal (355 / 100
        // is 3.55; 355 × 0.01 is 3.5500000000000003).
        let (scale, divide) = (10f64.powi(exponent.unsigned_abs() as i32), exponent < 0);
        let base = r.zigzag()?;
        for (k, stream) in streams.iter_mut().enumerate() {
            stream.clear();
            if flags & (2 << k) == 0 {
                for _ in 0..present.len() {
                    stream.push(r.zigzag()?);
                }
            } else {
                stream.resize(present.len(), 0);
            }
        }
        counts.clear();
        if flags & (1 << 5) == 0 {
            for _ in 0..present.len() {
                counts.push(r.zigzag()?);
            }
        } else {
            counts.resize(present.len(), 0);
        }
        // Each row's cell for this column, as columns are read (into vectors sized for every
        // column: the claim was held to the record's bytes above).
        for row in rows.iter_mut() {
            row.values.push(None);
        }
        let mut mean = base;
        for (j, &i) in present.iter().enumerate() {
            mean = mean.wrapping_add(streams[1][j]);
            let n = i64::from(rows[i].samples).wrapping_add(counts[j]);
            let n = u32::try_from(n).map_err(|_| bad("a value count out of range"))?;
            let v = |q: i64| if divide { q as f64 / scale } else { q as f64 * scale };
            let stat = Stat {
                min: v(mean.wrapping_sub(streams[0][j])),
                mean: v(mean),
                max: v(mean.wrapping_add(streams[2][j])),
                last: v(mean.wrapping_add(streams[3][j])),
                n,
            };
            rows[i].values[col] = Some(stat);
        }
    }
    if r.left() != 0 {
        return Err(bad("bytes after the last column"));
    }
    Ok(RollupBlock { span_s, names, rows })
}

/// Checks that a block of `names` series over `rows` rows may be held by a record of
/// `record_len` bytes: what the decoder accepts, and so what a writer may write.
pub fn check_cells(names: usize, rows: usize, record_len: usize) -> Result<(), BadBlock> {
    let cells = names.saturating_mul(rows);
    if cells > record_len.saturating_mul(CELLS_PER_BYTE) {
        return Err(bad("more cells (names × rows) than the record's bytes can hold"));
    }
    if cells > MAX_CELLS {
        return Err(bad("more cells (names × rows) than a block may hold"));
    }
    Ok(())
}

fn bad(why: &'static str) -> BadBlock {
    BadBlock(why)
}

/// Appends `v` as a LEB128 varint (the record's integers).
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-coded as a varint (the record's signed integers).
pub fn zigzag(out: &mut Vec<u8>, v: i64) {
    varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

struct Bytes<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&[u8], BadBlock> {
        if n > self.left() {
            return Err(bad("the record ends early"));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, BadBlock> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("a varint longer than 64 bits"))
    }

    fn zigzag(&mut self) -> Result<i64, BadBlock> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A count no larger than `max` (an error naming `what` otherwise).
    fn bounded(&mut self, max: u64, what: &'static str) -> Result<usize, BadBlock> {
        let n = self.varint()?;
        if n > max {
            return Err(bad(what));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(min: f64, mean: f64, max: f64, last: f64, n: u32) -> Option<Stat> {
        Some(Stat { min, mean, max, last, n })
    }

    fn block() -> RollupBlock {
        let names = vec!["host.cpu.user".to_string(), "group.web.rss".to_string(), "group.idle.rss".to_string()];
        let rows = (0..60u64)
            .map(|m| RollupRow {
                start_unix_s: 1_700_000_000 + m * 60,
                span_s: 60,
                samples: 60,
                values: vec![
                    stat(1.5, 12.25 + m as f64, 80.0, 20.0, 59),
                    (m % 7 != 3).then_some(Stat { min: 100e6, mean: 101.5e6, max: 103e6, last: 102e6, n: 60 }),
                    stat(4096.0, 4096.0, 4096.0, 4096.0, 60),
                ],
            })
            .collect();
        RollupBlock { span_s: 60, names, rows }
    }

    #[test]
    fn a_block_round_trips_to_four_significant_digits() {
        let b = block();
        let bytes = encode_block(&b);
        let back = decode_block(&bytes).expect("decodes");
        assert_eq!(back.names, b.names);
        assert_eq!(back.rows.len(), 60);
        for (a, z) in b.rows.iter().zip(&back.rows) {
            assert_eq!((a.start_unix_s, a.span_s, a.samples), (z.start_unix_s, z.span_s, z.samples));
            for (x, y) in a.values.iter().zip(&z.values) {
                match (x, y) {
                    (None, None) => {}
                    (Some(x), Some(y)) => {
                        assert_eq!(x.n, y.n);
                        for (p, q) in [(x.min, y.min), (x.mean, y.mean), (x.max, y.max), (x.last, y.last)] {
                            // Within half a unit of the 4th digit of the column's largest value.
                            let tolerance = if x.max > 1e6 { 0.5e5 } else { 0.05 };
                            assert!((p - q).abs() <= tolerance, "{p} vs {q}");
                        }
                    }
                    other => panic!("presence differs: {other:?}"),
                }
            }
        }
        // An idle column is its name, flags, exponent and one mean: a few bytes an hour.
        let mut without = b.clone();
        without.names.pop();
        for row in &mut without.rows {
            row.values.pop();
        }
        let idle = bytes.len() - encode_block(&without).len();
        assert!(idle <= "group.idle.rss".len() + 1 + 4, "{idle} bytes for an idle column");
    }

    /// Values at the far ends of what a decoded (possibly hostile) block may hold, as the roller
    /// merges and writes them again, encode without overflow and come back as they were.
    #[test]
    fn values_at_the_quantizers_ends_round_trip() {
        let (low, high) = (-9.2e33, 9.2e33);
        let rows = [(low, high), (high, low), (high, high)]
            .iter()
            .enumerate()
            .map(|(m, &(min, mean))| RollupRow {
                start_unix_s: 1_700_000_000 + m as u64 * 60,
                span_s: 60,
                samples: 60,
                values: vec![stat(min, mean, high, low, 60)],
            })
            .collect();
        let b = RollupBlock { span_s: 60, names: vec!["hostile".into()], rows };
        let back = decode_block(&encode_block(&b)).expect("decodes");
        for (a, z) in b.rows.iter().zip(&back.rows) {
            let (x, y) = (a.values[0].expect("kept"), z.values[0].expect("kept"));
            for (p, q) in [(x.min, y.min), (x.mean, y.mean), (x.max, y.max), (x.last, y.last)] {
                assert!((p - q).abs() <= 1e-3 * p.abs(), "{p} vs {q}");
            }
        }
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let bytes = encode_block(&block());
        for cut in 0..bytes.len() {
            assert!(decode_block(&bytes[..cut]).is_err(), "cut at {cut} decoded");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_block(&longer).is_err());
        // A claim of a billion names is refused before anything is allocated for them.
        let mut claim = Vec::new();
        varint(&mut claim, 60);
        varint(&mut claim, 1 << 30);
        assert!(matches!(decode_block(&claim), Err(BadBlock(_))));
        // Random bytes (a fixed xorshift sequence): an error or a block, never a panic.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 200) as usize;
            let noise: Vec<u8> = (0..len).map(|i| (x.rotate_left(i as u32 % 64) >> 3) as u8).collect();
            let _ = decode_block(&noise);
        }
        // Flipped bytes: an error or a block, never a panic.
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x5a;
            let _ = decode_block(&flipped);
        }
    }

    /// A record of `names` names of `name_len` bytes over `rows` minute rows, every column an
    /// idle one (flags saying every row holds it and all its streams are zero, exponent, base:
    /// 3 bytes).
    fn idle_record(names: u64, name_len: usize, rows: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(&mut out, 60);
        varint(&mut out, names);
        for i in 0..names {
            varint(&mut out, name_len as u64);
            out.resize(out.len() + name_len, b'a' + (i % 26) as u8);
        }
        varint(&mut out, rows);
        for i in 0..rows {
            varint(&mut out, if i == 0 { 1_700_000_000 } else { 60 });
            varint(&mut out, 60);
        }
        for _ in 0..names {
            out.extend_from_slice(&[0x3f, 0, 0]);
        }
        out
    }

    /// Regression (issue 33 item 5): a record of idle columns holds a row's cell for 3 bytes a
    /// column whatever the rows, so 1,024 names × 16,384 rows (a 76-byte frame) decoded into 16.7
    /// million cells, ~800 MB. A claim of more cells than the record's bytes can hold is refused
    /// before the rows are built; the one here (1,024 × 1,024 in 6 KB) would cost ~50 MB.
    #[test]
    fn a_block_claiming_more_cells_than_its_bytes_hold_is_refused() {
        let record = idle_record(1024, 0, 1024);
        assert!(record.len() < 8 * 1024, "{} bytes", record.len());
        // `.err()`: a block that decodes is a million cells to print.
        let too_dense = Some(BadBlock("more cells (names × rows) than the record's bytes can hold"));
        assert_eq!(decode_block(&record).err(), too_dense);
        assert_eq!(decode_block(&idle_record(64, 0, 1024)).err(), too_dense);
        // However long its names, no block holds more than `MAX_CELLS`.
        let long_names = idle_record(4096, 200, 2048);
        assert!(long_names.len() * CELLS_PER_BYTE > 4096 * 2048);
        assert_eq!(decode_block(&long_names).err(), Some(BadBlock("more cells (names × rows) than a block may hold")));
        // The tiers' blocks always fit: a column takes at least 4 bytes (an empty name's length,
        // flags, exponent, base), so 64 rows of idle columns with empty names are the densest
        // (the tiers write 60 and 24 rows).
        for (names, rows) in [(1024, 64), (1, 64), (1, 1024), (32, 1024)] {
            let block = decode_block(&idle_record(names, 0, rows)).expect("decodes");
            assert_eq!((block.names.len(), block.rows.len()), (names as usize, rows as usize));
            assert!(block.rows.iter().all(|r| r.values.iter().all(|v| v.is_some_and(|s| s.n == 60))));
        }
    }

    #[test]
    fn stats_merge_as_their_samples_would() {
        let mut a = Stat::one(2.0);
        a.push(4.0);
        let mut b = Stat::one(9.0);
        b.push(1.0);
        a.merge(&b);
        assert_eq!(a, Stat { min: 1.0, mean: 4.0, max: 9.0, last: 1.0, n: 4 });
    }
}
