//! The rollup tiers' record: a [`RollupBlock`] (an hour of minute rows, six hours of them once
//! compacted, or a day of hour rows) as compact bytes, compressed by the writer like any event
//! record. Pure.
//!
//! Columnar: each series is stored over the block's rows, its mean as differences from the
//! row before (or from the column's median, where that is shorter) and its min, max and last
//! as differences from the row's mean, all zigzag varints, so an idle series (the usual group on
//! a small box) is a few bytes an hour and a stream that is all zero is a bit in the column's
//! flags. Counts of values per row are kept exactly.
//!
//! Precision (version 2, what the tiers hold): a column's **mean and max** are kept to 4
//! significant digits of the column's largest value in the block (a decimal exponent per
//! column): within half a unit of that 4th digit (memory of 1.5 GiB to within 0.5 MB, a CPU
//! share under 100 % to within 0.005). Its **min and last** are kept to 2 significant digits
//! of that largest value (a second exponent, 2 above the first): the min within half a unit of
//! the 2nd digit (1.5 GiB to within 50 MB, under 100 % to within 0.5), the last within one
//! unit, as it is kept inside the row's [min, max] as decoded. `report` and the history read the mean and max (and the count); min and last
//! are `dump rollup`'s columns and the envelope of a row. Version 1 (written before) kept all
//! four to 4 digits; its blocks read as they were written.
//!
//! Layout, all integers LEB128 varints (`z` zigzag):
//!
//! ```text
//! span_s, names n, (shared, len, utf-8)×n  [shared: the bytes the name shares with the name
//!                                           before; len, utf-8: the rest of it],
//! rows r, (start_delta, samples)×r,
//! per column: flags u8 [bit 0 in every row, bits 1–4 min/mean/max/last stream all zero,
//!             bit 5 n equals the row's samples, bit 6 means are offsets from the base, not
//!             differences from the row before], presence bitmap ⌈r/8⌉ bytes unless bit 0,
//!             z exponent e, z envelope exponent e′ (e ≤ e′ ≤ e + 18), z base (the first
//!             mean, or with bit 6 the median), then per stream not all zero one z value per
//!             present row (min and last in units of 10^e′, mean and max of 10^e),
//!             then unless bit 5 one z (n − samples) per present row
//! ```
//!
//! Version 1 differs in three places: names are (len, utf-8) whole, there is no envelope
//! exponent (min and last are in units of 10^e) and no bit 6.
//!
//! A compacted block is the same record over more rows, written by [`encode_block_exact`]: its
//! units are chosen so that every value reads back as the hour blocks held it.
//!
//! Decoding trusts nothing: every count is bounded before anything is allocated for it, the
//! cells (names × rows) by what the record's bytes can hold ([`check_cells`]), the names' bytes
//! likewise ([`NAME_BYTES_PER_BYTE`]), and a record that ends early or runs over is an error,
//! never a panic.

use proctor_model::{RollupBlock, RollupRow, Stat};

/// Why a rollup record does not decode (the store reports it as a codec error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlock(pub &'static str);

/// The rollup record format this build writes: version 2 (front-coded names, min and last to
/// 2 significant digits). It reads [`ROLLUP_VERSION_1`] too.
pub const ROLLUP_VERSION: u8 = 2;
/// The first rollup record format: names whole, all four statistics to 4 significant digits.
pub const ROLLUP_VERSION_1: u8 = 1;

/// Most series names and rows a block may claim (a day of minutes is 1,440 rows).
const MAX_NAMES: u64 = 1 << 16;
const MAX_ROWS: u64 = 1 << 14;
const MAX_NAME_BYTES: u64 = 4096;
/// Most cells (a row's value of one series: names × rows) a block may claim per byte of its
/// record. The format lets a claim outgrow its bytes: an idle column is 3 bytes whatever the
/// rows, so a 36 KB record (a 76-byte frame) claimed 1,024 names × 16,384 rows, 16.7 million
/// cells of ~48 bytes decoded. A column takes at least 4 bytes (its name's length, flags,
/// exponent, base; version 2 adds the envelope exponent and the shared length), so every block
/// of up to 64 rows fits, whatever its names (the tiers write 60 minute rows and 24 hour rows).
/// A 64 KiB record (what a payload of up to 64 bytes may decompress to,
/// `codec::MIN_RECORD_ALLOWANCE`) then decodes to at most ~1 million cells, ~50 MB.
pub const CELLS_PER_BYTE: usize = 16;
/// Most bytes of names a version-2 block may claim per byte of its record. Front coding lets a
/// 3-byte entry (shared 4,095, one byte more) stand for a 4 KiB name, so 65,536 names could
/// claim 256 MiB from a ~200 KB record; the tiers' names are ~10 record bytes each (a group's
/// series share all but the series' own name) and each column takes at least 4 bytes more, so
/// a real block stays far below 64; one whose front-coded names would pass it (kilobyte names
/// that share all but a byte) is written with every name whole ([`encode_block`]), which never
/// does, so every block the writer writes reads back.
pub const NAME_BYTES_PER_BYTE: usize = 64;
/// The most rows of a compacted minute block: six hours (`proctor_stored::rollup`'s compaction
/// writes 6 consecutive hour blocks again as one).
pub const MAX_COMPACTED_ROWS: usize = 6 * 60;
/// Cells a block of up to [`MAX_COMPACTED_ROWS`] rows may hold whatever its record's size. An
/// idle column costs the same few bytes over 360 rows as over 60, so six hours of a box of idle
/// groups pass [`CELLS_PER_BYTE`] no more; this allowance lets any such block of up to 2,912
/// series through. It costs no new room to a hostile frame: a 64 KiB record (what a frame of a
/// few bytes may decompress to) could already claim as many at 16 cells a byte, ~50 MB decoded.
/// A block of more rows, or one past it, is held to its bytes as before.
pub const COMPACTED_CELLS: usize = 1 << 20;
/// Most cells any block may hold, however large its record: the most names over 64 rows
/// (~200 MB decoded; records of 256 KiB and more, payloads of 256 bytes and more, reach it).
const MAX_CELLS: usize = MAX_NAMES as usize * 64;
/// Significant decimal digits kept of each column's largest value: mean and max.
const DIGITS: i32 = 4;
/// Significant decimal digits kept of each column's largest value: min and last (version 2).
const ENVELOPE_DIGITS: i32 = 2;
/// The largest envelope exponent above the column's: 10^18 is the largest power of ten in i64.
const MAX_ENVELOPE_STEP: i64 = 18;

/// The block as a version-2 record ([`ROLLUP_VERSION`]).
pub fn encode_block(block: &RollupBlock) -> Vec<u8> {
    encode_choosing_names(block, false).expect("quantizing always encodes")
}

/// The block as a version-2 record that decodes to exactly its values, or `None` where no
/// record can: how blocks already read from a tier are written again as one (compaction).
///
/// [`encode_block`] keeps 4 significant digits of each column's largest value in the block,
/// so hours merged into one block would lose digits in an hour whose values are smaller than
/// another's. Here each column takes the coarsest unit (10^e) in which every statistic it
/// holds is an integer that decodes back to the same `f64`, and min and last the coarsest
/// multiple of it (10^e′) that holds every one of their offsets from the mean: values decoded
/// from hour blocks are such integers of their hour's unit, so the unit of the finest hour
/// holds them all. A column whose values need more than 53 bits of a unit the record allows,
/// or a value the record cannot hold (a count of 0), makes the block `None`; the caller keeps
/// what it had. The caller should still decode the record and compare (the compactor does).
pub fn encode_block_exact(block: &RollupBlock) -> Option<Vec<u8>> {
    encode_choosing_names(block, true)
}

fn encode_choosing_names(block: &RollupBlock, exact: bool) -> Option<Vec<u8>> {
    let out = encode_with(block, true, exact)?;
    // Long names that share nearly all their bytes (group names of kilobytes) could stand for
    // more name bytes than a reader takes from a record this size: then each name is written
    // whole, which never does.
    let name_bytes: usize = block.names.iter().map(String::len).sum();
    if name_bytes > out.len().saturating_mul(NAME_BYTES_PER_BYTE) {
        return encode_with(block, false, exact);
    }
    Some(out)
}

/// A column's decimal unit as the decoder applies it: an integer count `q` is `q / 10^-e` for
/// a negative exponent `e` (dividing by an exact power of ten gives the nearest double to the
/// decimal: 355 / 100 is 3.55, 355 × 0.01 is 3.5500000000000003), else `q × 10^e`.
#[derive(Clone, Copy)]
struct Unit {
    scale: f64,
    divide: bool,
}

impl Unit {
    fn new(exponent: i64) -> Unit {
        Unit { scale: 10f64.powi(exponent.unsigned_abs() as i32), divide: exponent < 0 }
    }

    #[inline]
    fn value(self, q: i64) -> f64 {
        if self.divide {
            q as f64 / self.scale
        } else {
            q as f64 * self.scale
        }
    }
}

/// Integers below 2^53 are exact in an `f64`.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The coarsest exponent, from the one 4 digits of `largest` give down to the record's least,
/// in which every statistic of `cells` is an integer count that decodes to itself.
fn exact_exponent(cells: &[&Stat], largest: f64) -> Option<i32> {
    let fits = |e: i32| {
        let (scale, unit) = (10f64.powi(e), Unit::new(i64::from(e)));
        cells.iter().all(|s| {
            [s.min, s.mean, s.max, s.last].iter().all(|&v| {
                let q = (v / scale).round();
                q.abs() < EXACT_INTEGER && unit.value(q as i64) == v
            })
        })
    };
    (-12..=exponent_for(largest, DIGITS)).rev().find(|&e| fits(e))
}

/// The record, names front-coded or (`front_coded` false) each whole (shared 0); `exact` as
/// [`encode_block_exact`] (`None` only then).
fn encode_with(block: &RollupBlock, front_coded: bool, exact: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + block.names.len() * 24);
    varint(&mut out, u64::from(block.span_s));
    varint(&mut out, block.names.len() as u64);
    // Sorted names (the roller sorts them) share most of their bytes with the one before:
    // `group.NAME.` for each of a group's series.
    let mut prev: &[u8] = &[];
    for name in &block.names {
        let name = name.as_bytes();
        let shared = if front_coded { prev.iter().zip(name).take_while(|(a, b)| a == b).count() } else { 0 };
        varint(&mut out, shared as u64);
        varint(&mut out, (name.len() - shared) as u64);
        out.extend_from_slice(&name[shared..]);
        prev = name;
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
        let present: Vec<(usize, &Stat)> = cells.iter().enumerate().filter_map(|(i, c)| c.map(|s| (i, s))).collect();
        if exact
            && present.len() != block.rows.iter().filter(|r| r.values.get(col).is_some_and(Option::is_some)).count()
        {
            // A value the record cannot hold (no samples, not finite) would be dropped.
            return None;
        }
        let exponent = if exact {
            exact_exponent(&present.iter().map(|(_, s)| *s).collect::<Vec<_>>(), largest)?
        } else {
            exponent_for(largest, DIGITS)
        };
        let scale = 10f64.powi(exponent);
        let q = |v: f64| (v / scale).round() as i64;
        // Min and last as offsets from the mean in units of 10^envelope: at least the column's
        // own (both are clamped alike), at most 2 above it; exactly, the coarsest that divides
        // every offset (at most 18 above: 10^18 is the largest power of ten in i64).
        let envelope = if exact {
            let offsets: Vec<i128> = present
                .iter()
                .flat_map(|(_, s)| {
                    [i128::from(q(s.mean)) - i128::from(q(s.min)), i128::from(q(s.last)) - i128::from(q(s.mean))]
                })
                .collect();
            let above = (0..=MAX_ENVELOPE_STEP as u32)
                .rev()
                .find(|k| offsets.iter().all(|o| o % 10i128.pow(*k) == 0))
                .unwrap_or(0);
            exponent + above as i32
        } else {
            exponent_for(largest, ENVELOPE_DIGITS).max(exponent)
        };
        let step = 10i64.pow((envelope - exponent).unsigned_abs());
        let means: Vec<i64> = present.iter().map(|(_, s)| q(s.mean)).collect();
        // Each mean from the one before (the first from the base: a constant column's stream is
        // all zero), or from the column's median where that is shorter: a series that jumps
        // about a level costs two jumps per row as differences, one offset from the median.
        // Wrapping, as the decoder adds them back: a value near the largest the exponent's
        // clamp allows (a hostile stored one the roller merges) quantizes to near i64's ends,
        // and a difference of two of them overflows, yet round-trips exactly.
        let first = means.first().copied().unwrap_or(0);
        let deltas: Vec<i64> =
            means.iter().scan(first, |prev, m| Some(m.wrapping_sub(std::mem::replace(prev, *m)))).collect();
        let mut sorted = means.clone();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let offsets: Vec<i64> = means.iter().map(|m| m.wrapping_sub(median)).collect();
        let cost = |v: &[i64]| v.iter().map(|x| zigzag_len(*x)).sum::<usize>();
        let from_base = cost(&offsets) < cost(&deltas);
        let mut streams: [Vec<i64>; 4] = Default::default();
        // Offsets in i128, so that the last value's bounds are compared as numbers, then
        // truncated: a hostile stored value near the quantizer's ends makes an offset past i64,
        // which wraps, and the decoder's wrapping arithmetic gives the value back exactly.
        let step128 = i128::from(step);
        for ((_, s), &mean) in present.iter().zip(&means) {
            let mean128 = i128::from(mean);
            let max = i128::from(q(s.max)) - mean128;
            let min = nearest_multiple(mean128 - i128::from(q(s.min)), step128);
            // The last value stays inside the row's [min, max] as decoded (rounding it alone to
            // the envelope's unit could put it up to half a unit past either end), where the row
            // is in order (a hostile stored one need not be: it is kept as it came).
            let last_exact = i128::from(q(s.last)) - mean128;
            let mut last = nearest_multiple(last_exact, step128);
            let in_order = mean128 - i128::from(q(s.min)) >= 0 && max >= 0;
            if in_order && (i128::from(q(s.min)) - mean128..=max).contains(&last_exact) {
                last = last.clamp(-min, max.div_euclid(step128));
            }
            streams[0].push(min as i64);
            streams[2].push(max as i64);
            streams[3].push(last as i64);
        }
        streams[1] = if from_base { offsets } else { deltas };
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
        if from_base {
            flags |= 1 << 6;
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
        zigzag(&mut out, i64::from(envelope));
        zigzag(&mut out, if from_base { median } else { first });
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
    Some(out)
}

/// The decimal exponent that keeps `digits` significant digits of `largest` (clamped to what
/// a record may say).
fn exponent_for(largest: f64, digits: i32) -> i32 {
    if largest > 0.0 {
        (largest.log10().floor() as i32 + 1 - digits).clamp(-12, 15)
    } else {
        0
    }
}

/// `v / step` rounded to the nearest integer (halves up); `step` ≥ 1.
fn nearest_multiple(v: i128, step: i128) -> i128 {
    let (q, r) = (v.div_euclid(step), v.rem_euclid(step));
    if 2 * r >= step && step > 1 {
        q + 1
    } else {
        q
    }
}

fn zigzag_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - z.leading_zeros() as usize).max(1).div_ceil(7)
}

fn finite(s: &Stat) -> bool {
    s.n > 0 && s.min.is_finite() && s.mean.is_finite() && s.max.is_finite() && s.last.is_finite()
}

/// A record of this build's version ([`ROLLUP_VERSION`]).
pub fn decode_block(bytes: &[u8]) -> Result<RollupBlock, BadBlock> {
    decode_block_version(ROLLUP_VERSION, bytes)
}

/// A record of either version this build reads (the frame header says which).
pub fn decode_block_version(version: u8, bytes: &[u8]) -> Result<RollupBlock, BadBlock> {
    let v2 = match version {
        ROLLUP_VERSION_1 => false,
        ROLLUP_VERSION => true,
        _ => return Err(bad("a rollup record version this build does not read")),
    };
    let mut r = Bytes { bytes, at: 0 };
    let span_s = u32::try_from(r.varint()?).map_err(|_| bad("a span past u32"))?;
    let names_n = r.bounded(MAX_NAMES, "more series names than a block may hold")?;
    let mut names: Vec<String> = Vec::with_capacity(names_n.min(r.left()));
    // A front-coded name may be far longer than its entry: the names' bytes are held to what
    // the record's bytes can hold as they are read.
    let name_budget = bytes.len().saturating_mul(NAME_BYTES_PER_BYTE);
    let mut name_bytes = 0usize;
    for _ in 0..names_n {
        let shared = if v2 { r.bounded(MAX_NAME_BYTES, "a series name longer than 4 KiB")? } else { 0 };
        let len = r.bounded(MAX_NAME_BYTES, "a series name longer than 4 KiB")?;
        if (shared + len) as u64 > MAX_NAME_BYTES {
            return Err(bad("a series name longer than 4 KiB"));
        }
        name_bytes += shared + len;
        if name_bytes > name_budget {
            return Err(bad("more bytes of names than the record's bytes can hold"));
        }
        let prev = names.last().map_or(&[][..], |n| n.as_bytes());
        if shared > prev.len() {
            return Err(bad("a series name sharing more bytes than the name before has"));
        }
        let mut name = Vec::with_capacity(shared + len);
        name.extend_from_slice(&prev[..shared]);
        name.extend_from_slice(r.take(len)?);
        names.push(String::from_utf8(name).map_err(|_| bad("a series name that is not UTF-8"))?);
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
        if v2 && flags & 0x80 != 0 {
            return Err(bad("a column flag this build does not know"));
        }
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
        // Min and last are in units of 10^envelope, a multiple of the column's unit.
        let step = if v2 {
            let above = r.zigzag()?.wrapping_sub(exponent);
            if !(0..=MAX_ENVELOPE_STEP).contains(&above) {
                return Err(bad("an envelope exponent out of range"));
            }
            10i64.pow(above as u32)
        } else {
            1
        };
        let from_base = v2 && flags & (1 << 6) != 0;
        let unit = Unit::new(exponent);
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
            mean = if from_base { base } else { mean }.wrapping_add(streams[1][j]);
            let n = i64::from(rows[i].samples).wrapping_add(counts[j]);
            let n = u32::try_from(n).map_err(|_| bad("a value count out of range"))?;
            let v = |q: i64| unit.value(q);
            // A statistic equal to the mean (most mins and lasts at 2 digits, every one of an
            // idle column) takes the mean's value: the division is most of a block's decoding.
            let mean_value = v(mean);
            let at = |offset: i64| if offset == 0 { mean_value } else { v(mean.wrapping_add(offset)) };
            let stat = Stat {
                min: at(streams[0][j].wrapping_mul(step).wrapping_neg()),
                mean: mean_value,
                max: at(streams[2][j]),
                last: at(streams[3][j].wrapping_mul(step)),
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
    let compacted = rows <= MAX_COMPACTED_ROWS && cells <= COMPACTED_CELLS;
    if cells > record_len.saturating_mul(CELLS_PER_BYTE) && !compacted {
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

    /// Half a unit of the `digits`-th significant digit of `largest`, as the encoder picks it.
    fn half_unit(largest: f64, digits: i32) -> f64 {
        0.5 * 10f64.powi(largest.log10().floor() as i32 + 1 - digits)
    }

    #[test]
    fn a_block_round_trips_within_its_documented_precision() {
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
                        // Mean and max within half a unit of the 4th digit of the column's
                        // largest value, min and last of the 2nd (last a whole unit: it is kept
                        // inside the row's [min, max]; and the 4th's rounding).
                        let (fine, coarse) = if x.max > 1e6 { (0.5e5, 1e7 + 0.5e5) } else { (0.05, 1.0 + 0.05) };
                        for (p, q, tolerance) in [
                            (x.min, y.min, coarse),
                            (x.mean, y.mean, fine),
                            (x.max, y.max, fine),
                            (x.last, y.last, coarse),
                        ] {
                            assert!((p - q).abs() <= tolerance, "{p} vs {q}");
                        }
                    }
                    other => panic!("presence differs: {other:?}"),
                }
            }
        }
        // An idle column is its name's new bytes, flags, exponents and one mean: a few bytes an hour.
        let mut without = b.clone();
        without.names.pop();
        for row in &mut without.rows {
            row.values.pop();
        }
        let idle = bytes.len() - encode_block(&without).len();
        assert!(idle <= "idle.rss".len() + 2 + 5, "{idle} bytes for an idle column");
    }

    /// The precision the format documents, over columns of every magnitude (a fixed xorshift
    /// sequence): mean and max within half a unit of the 4th significant digit of the column's
    /// largest value, min within half a unit of the 2nd and last within one (plus the 4th's
    /// rounding), and
    /// every decoded row in order: min ≤ mean ≤ max, min ≤ last ≤ max.
    #[test]
    fn every_statistic_keeps_the_precision_the_format_documents() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for magnitude in [-6, -2, 0, 1, 2, 3, 6, 9, 12] {
            let top = 10f64.powi(magnitude);
            let names = (0..8).map(|c| format!("group.g{c}.cpu")).collect();
            let rows: Vec<RollupRow> = (0..60u64)
                .map(|m| RollupRow {
                    start_unix_s: 1_700_000_000 + m * 60,
                    span_s: 60,
                    samples: 60,
                    values: (0..8)
                        .map(|_| {
                            let (a, b, c) = (next() * top, next() * top, next());
                            let (min, max) = (a.min(b), a.max(b));
                            let mean = min + (max - min) * next();
                            Some(Stat { min, mean, max, last: min + (max - min) * c, n: 60 })
                        })
                        .collect(),
                })
                .collect();
            let b = RollupBlock { span_s: 60, names, rows };
            let back = decode_block(&encode_block(&b)).expect("decodes");
            for col in 0..8 {
                let largest = b.rows.iter().map(|r| r.values[col].expect("kept").max).fold(0.0, f64::max);
                let (fine, coarse) = (half_unit(largest, 4), half_unit(largest, 2));
                // Room for the decimal's nearest double.
                let slack = largest * 1e-12;
                for (a, z) in b.rows.iter().zip(&back.rows) {
                    let (x, y) = (a.values[col].expect("kept"), z.values[col].expect("kept"));
                    assert!((x.mean - y.mean).abs() <= fine + slack, "mean {} vs {} at 1e{magnitude}", x.mean, y.mean);
                    assert!((x.max - y.max).abs() <= fine + slack, "max {} vs {} at 1e{magnitude}", x.max, y.max);
                    assert!((x.min - y.min).abs() <= coarse + fine + slack, "min {} vs {}", x.min, y.min);
                    // Last within a whole unit: it is kept inside the row's [min, max].
                    assert!((x.last - y.last).abs() <= 2.0 * coarse + fine + slack, "last {} vs {}", x.last, y.last);
                    assert!(y.min <= y.mean && y.mean <= y.max, "{y:?}");
                    assert!(y.min <= y.last && y.last <= y.max, "{y:?}");
                }
            }
        }
    }

    /// A series that jumps between two levels is stored as offsets from its median (one per row,
    /// instead of two jumps), and reads back the same.
    #[test]
    fn means_that_jump_about_a_level_are_offsets_from_the_median() {
        let levels = [3.0, 7000.0, 3.0, 3.0, 7000.0, 9000.0];
        let rows: Vec<RollupRow> = (0..60u64)
            .map(|m| {
                let v = levels[(m * 7 % 6) as usize];
                RollupRow {
                    start_unix_s: 1_700_000_000 + m * 60,
                    span_s: 60,
                    samples: 60,
                    values: vec![stat(v, v, v, v, 60)],
                }
            })
            .collect();
        let b = RollupBlock { span_s: 60, names: vec!["group.web.cpu".into()], rows };
        let bytes = encode_block(&b);
        // The column's flags follow the names and rows: bit 6 says offsets from the base.
        let flags_at = 1 + 1 + 1 + 1 + "group.web.cpu".len() + 1 + 5 + 1 + 59 * 2;
        assert_eq!(bytes[flags_at] & (1 << 6), 1 << 6, "flags {:#x}", bytes[flags_at]);
        assert_eq!(decode_block(&bytes).expect("decodes"), b);
    }

    /// Names are front-coded (each says how many bytes it shares with the one before), any
    /// UTF-8 included, and come back whole.
    #[test]
    fn front_coded_names_round_trip() {
        let names: Vec<String> = [
            "group.café.cpu",
            "group.café.rss",
            "group.cafë.cpu",
            "group.cafë.rss",
            "host.load.avg1",
            "host.load.avg1x",
            "",
        ]
        .map(String::from)
        .to_vec();
        let idle = stat(1.0, 1.0, 1.0, 1.0, 60);
        let rows = (0..3u64)
            .map(|m| RollupRow {
                start_unix_s: 1_700_000_000 + m * 60,
                span_s: 60,
                samples: 60,
                values: vec![idle; names.len()],
            })
            .collect();
        let b = RollupBlock { span_s: 60, names, rows };
        let bytes = encode_block(&b);
        // "group.café.rss" costs its 3 new bytes and 2 lengths.
        assert!(bytes.windows(5).any(|w| w == [12, 3, b'r', b's', b's']), "{bytes:?}");
        assert_eq!(decode_block(&bytes).expect("decodes"), b);
    }

    /// Names of kilobytes that share all but a byte would stand for more name bytes than a
    /// reader takes from a record this size ([`NAME_BYTES_PER_BYTE`]): the writer writes them
    /// whole instead, and the block reads back.
    #[test]
    fn long_names_sharing_nearly_everything_are_written_whole_and_read_back() {
        let stem = "g".repeat(3990);
        let names: Vec<String> = (0..100).map(|i| format!("group.{stem}.{i:03}")).collect();
        let idle = stat(1.0, 1.0, 1.0, 1.0, 60);
        let rows =
            vec![RollupRow { start_unix_s: 1_700_000_000, span_s: 60, samples: 60, values: vec![idle; names.len()] }];
        let b = RollupBlock { span_s: 60, names, rows };
        let bytes = encode_block(&b);
        let name_bytes: usize = b.names.iter().map(String::len).sum();
        assert_eq!(decode_block(&bytes).expect("decodes"), b);
        assert!(name_bytes > 64 * encode_with(&b, true, false).expect("encodes").len(), "front-coded, past the bound");
        assert!(bytes.len() > name_bytes, "{} bytes: written whole", bytes.len());
    }

    /// A version-2 record's name entries are checked: sharing more than the name before has,
    /// a name longer than 4 KiB, or more name bytes than the record may stand for (front coding
    /// lets a 3-byte entry claim a 4 KiB name) are errors before anything is allocated for them.
    #[test]
    fn front_coded_names_claiming_too_much_are_refused() {
        let record = |entries: &[(u64, &[u8])], names: u64| {
            let mut out = Vec::new();
            varint(&mut out, 60);
            varint(&mut out, names);
            for (shared, rest) in entries {
                varint(&mut out, *shared);
                varint(&mut out, rest.len() as u64);
                out.extend_from_slice(rest);
            }
            out
        };
        let first = [b'a'; 4000];
        assert_eq!(
            decode_block(&record(&[(0, b"ab"), (3, b"c")], 2)).err(),
            Some(BadBlock("a series name sharing more bytes than the name before has"))
        );
        assert_eq!(
            decode_block(&record(&[(0, &first), (4000, &[b'b'; 97])], 2)).err(),
            Some(BadBlock("a series name longer than 4 KiB"))
        );
        // 4,000 bytes once, then 4,001-byte names for 3 bytes each: past 64 name bytes per byte.
        let mut entries: Vec<(u64, &[u8])> = vec![(0, &first)];
        entries.extend(std::iter::repeat_n((4000u64, &b"b"[..]), 200));
        assert_eq!(
            decode_block(&record(&entries, 201)).err(),
            Some(BadBlock("more bytes of names than the record's bytes can hold"))
        );
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
    /// 3 bytes; version 2 adds the envelope exponent and each name's shared length).
    fn idle_record(version: u8, names: u64, name_len: usize, rows: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(&mut out, 60);
        varint(&mut out, names);
        for i in 0..names {
            if version == ROLLUP_VERSION {
                varint(&mut out, 0);
            }
            varint(&mut out, name_len as u64);
            out.resize(out.len() + name_len, b'a' + (i % 26) as u8);
        }
        varint(&mut out, rows);
        for i in 0..rows {
            varint(&mut out, if i == 0 { 1_700_000_000 } else { 60 });
            varint(&mut out, 60);
        }
        for _ in 0..names {
            out.extend_from_slice(if version == ROLLUP_VERSION { &[0x3f, 0, 0, 0] } else { &[0x3f, 0, 0] });
        }
        out
    }

    /// Regression (issue 33 item 5): a record of idle columns holds a row's cell for 3 bytes a
    /// column whatever the rows, so 1,024 names × 16,384 rows (a 76-byte frame) decoded into 16.7
    /// million cells, ~800 MB. A claim of more cells than the record's bytes can hold is refused
    /// before the rows are built; the one here (1,024 × 1,024 in 6 KB) would cost ~50 MB. Both
    /// versions.
    #[test]
    fn a_block_claiming_more_cells_than_its_bytes_hold_is_refused() {
        for version in [ROLLUP_VERSION_1, ROLLUP_VERSION] {
            let decode = |record: &[u8]| decode_block_version(version, record);
            let record = idle_record(version, 1024, 0, 1024);
            assert!(record.len() < 9 * 1024, "{} bytes", record.len());
            // `.err()`: a block that decodes is a million cells to print.
            let too_dense = Some(BadBlock("more cells (names × rows) than the record's bytes can hold"));
            assert_eq!(decode(&record).err(), too_dense);
            assert_eq!(decode(&idle_record(version, 64, 0, 1024)).err(), too_dense);
            // However long its names, no block holds more than `MAX_CELLS`.
            let long_names = idle_record(version, 4096, 200, 2048);
            assert!(long_names.len() * CELLS_PER_BYTE > 4096 * 2048);
            assert_eq!(decode(&long_names).err(), Some(BadBlock("more cells (names × rows) than a block may hold")));
            // The tiers' blocks always fit: a column takes at least 4 bytes (an empty name's
            // length, flags, exponent, base), so 64 rows of idle columns with empty names are the
            // densest (the tiers write 60 and 24 rows).
            for (names, rows) in [(1024, 64), (1, 64), (1, 1024), (32, 1024)] {
                let block = decode(&idle_record(version, names, 0, rows)).expect("decodes");
                assert_eq!((block.names.len(), block.rows.len()), (names as usize, rows as usize));
                assert!(block.rows.iter().all(|r| r.values.iter().all(|v| v.is_some_and(|s| s.n == 60))));
            }
        }
    }

    /// Six hours of minute rows of idle columns (a compacted block of a box of idle groups) fit
    /// whatever their record's size, up to [`COMPACTED_CELLS`]; one cell more, or a row more than
    /// six hours, is held to the record's bytes as before.
    #[test]
    fn six_hours_of_idle_columns_decode_and_a_claim_past_them_does_not() {
        let too_dense = Some(BadBlock("more cells (names × rows) than the record's bytes can hold"));
        let most = (COMPACTED_CELLS / MAX_COMPACTED_ROWS) as u64;
        let record = idle_record(ROLLUP_VERSION, most, 0, MAX_COMPACTED_ROWS as u64);
        assert!(record.len() * CELLS_PER_BYTE < COMPACTED_CELLS, "{} bytes", record.len());
        let block = decode_block(&record).expect("decodes");
        assert_eq!((block.names.len(), block.rows.len()), (most as usize, MAX_COMPACTED_ROWS));
        assert_eq!(decode_block(&idle_record(ROLLUP_VERSION, most + 1, 0, MAX_COMPACTED_ROWS as u64)).err(), too_dense);
        assert_eq!(decode_block(&idle_record(ROLLUP_VERSION, 64, 0, MAX_COMPACTED_ROWS as u64 + 1)).err(), too_dense);
    }

    /// Hours whose columns were written with different units (an hour of small values, one of
    /// large) merged into one block come back exactly from [`encode_block_exact`], where
    /// [`encode_block`] would keep 4 digits of the largest value only.
    #[test]
    fn hours_merged_exactly_read_back_the_same_values() {
        let hour = |start: u64, top: f64| {
            let rows = (0..60u64)
                .map(|m| {
                    let v = top * (1.0 + (m * 37 % 101) as f64 / 101.0);
                    RollupRow {
                        start_unix_s: start + m * 60,
                        span_s: 60,
                        samples: 60,
                        values: vec![
                            stat(v * 0.5, v * 0.75, v, v * 0.6, 60),
                            (m % 5 != 0).then_some(Stat { min: 3.0, mean: 3.0, max: 3.0, last: 3.0, n: 59 }),
                        ],
                    }
                })
                .collect();
            let b = RollupBlock { span_s: 60, names: vec!["group.web.cpu".into(), "group.web.rss".into()], rows };
            // As a tier holds it: written and read back.
            decode_block(&encode_block(&b)).expect("decodes")
        };
        let hours = [hour(1_700_000_000, 0.012), hour(1_700_003_600, 7_345.0), hour(1_700_007_200, 1.5e9)];
        let mut merged = hours[0].clone();
        merged.rows = hours.iter().flat_map(|h| h.rows.clone()).collect();
        let exact = encode_block_exact(&merged).expect("exact");
        assert_eq!(decode_block(&exact).expect("decodes"), merged);
        assert_ne!(decode_block(&encode_block(&merged)).expect("decodes"), merged, "4 digits of 1.5e9 lose 0.012");
        // A value no record holds (no samples) is refused, not dropped.
        merged.rows[0].values[0] = stat(1.0, 1.0, 1.0, 1.0, 0);
        assert_eq!(encode_block_exact(&merged), None);
    }

    /// A version this build does not know is an error, not a guess.
    #[test]
    fn an_unknown_version_is_refused() {
        let record = encode_block(&block());
        assert!(decode_block_version(ROLLUP_VERSION, &record).is_ok());
        assert!(decode_block_version(3, &record).is_err());
        assert!(decode_block_version(0, &record).is_err());
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
