//! History older than the ring, read from the agent's own store.
//!
//! `/api/v1/history` answers from the ring while the range fits in it; the part of a range
//! before the ring's oldest point is read here from the data directory the agent records into.
//! Frames are chosen by [`crate::range::pick`] under the request's budget (every frame when they
//! fit; else spread by frames, aligned so a moving window picks the same frames again). Each
//! picked sample becomes a [`Snapshot`] through [`Snapshot::derive`] (rates against the picked
//! sample before it, same recorder run only: averages over the stride, exact from the raw
//! counters, but a peak shorter than the stride is averaged into it) and a point through the
//! ring's own [`PointMaker`], so a point means the same whichever source answered it. Points
//! are cached by (frame, the frame its rates are against), up to [`CACHE_BYTES`], so a
//! repeated poll of a day view decodes only the cells that are new.
//!
//! What it does not do: run on an HTTP worker (the server runs it on a blocking thread, one at
//! a time), write or repair the store (a `Reader` only reads; bad frames are skipped and
//! reported), or read `/proc`.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use proctor_model::Sample;
use proctor_store::{same_run, Reader};

use crate::range::{pick, ReadStats};
use proctor_agent::history::{Point, PointMaker};
use proctor_agent::snapshot::Snapshot;

/// The longest range read from the store in one request; older `from`s are clamped (and said).
pub const MAX_SPAN: Duration = crate::range::MAX_SPAN;

/// Frames one request may decode when `max_points` does not say (or says more).
pub const MAX_FRAMES: usize = 2048;

/// The fewest frames a request may decode, so a tiny `max_points` still gives a usable shape.
pub const MIN_FRAMES: usize = 100;

/// Heap the point cache may hold.
pub const CACHE_BYTES: usize = 2 << 20;

/// What reading the store for one request did: answered with the points, never raised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreReport {
    pub stats: ReadStats,
    /// Frames decoded, the sample before the first pick's included (at most once each).
    pub frames_decoded: usize,
    /// Points taken from the cache instead of decoding.
    pub points_cached: usize,
    /// The rollup tier read for the part older than the raw samples, if any.
    pub tier: Option<TierPart>,
}

/// Points by (frame time, time of the frame its rates are against; 0: none), all derived by the
/// same maker (the ring's series are fixed for the agent's life).
#[derive(Debug, Default)]
pub struct PointCache {
    points: HashMap<(u64, u64), Point>,
    bytes: usize,
}

impl PointCache {
    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Reads the points of `[from_ms, to_ms]` from the store in `dir`, oldest first, deriving
/// each with `maker`, decoding at most `budget` frames (plus one for the first point's rates).
/// Every problem lands in the report; none is an error.
pub fn read_points(
    dir: &Path,
    maker: &PointMaker,
    from_ms: u64,
    to_ms: u64,
    budget: usize,
    cache: &mut PointCache,
) -> (Vec<Point>, StoreReport) {
    const MS: u64 = 1_000_000;
    let started = Instant::now();
    let budget = budget.max(1);
    let to_ns = to_ms.saturating_mul(MS).saturating_add(MS - 1);
    let mut report = StoreReport {
        stats: ReadStats::new(from_ms.saturating_mul(MS), to_ns, Some(MAX_SPAN), budget),
        ..StoreReport::default()
    };
    let (mut points, mut raw_first_ms) = (Vec::new(), u64::MAX);
    match Reader::open(dir) {
        Ok(mut reader) => {
            raw_first_ms = reader.segments().iter().find(|s| !s.set_aside).map_or(u64::MAX, |s| s.start_ns / MS);
            points = read(&mut reader, maker, budget, cache, &mut report);
        }
        Err(e) => report.stats.problems.push(format!("cannot read the store: {e}")),
    }
    // Older than the raw samples (or than the raw part's span): the rollup tiers, up to theirs.
    let tier_to_ms = raw_first_ms.max(report.stats.from_ns / MS).min(to_ms.saturating_add(1));
    let tier_from_ms = from_ms.max(to_ms.saturating_sub(crate::range::MAX_TIERED_SPAN.as_millis() as u64));
    if tier_from_ms.saturating_add(60_000) < tier_to_ms {
        let (old, part) = tier_points(dir, maker, tier_from_ms, tier_to_ms, budget);
        if let Some(part) = part {
            if !old.is_empty() {
                report.stats.clamped = from_ms < tier_from_ms;
                report.stats.from_ns = tier_from_ms * MS;
            }
            report.tier = Some(part);
            points.splice(0..0, old);
        }
    }
    report.stats.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    (points, report)
}

/// What a rollup tier answered for the part of a history range older than the raw samples.
#[derive(Debug, Clone, PartialEq)]
pub struct TierPart {
    /// `1m` or `1h`.
    pub tier: &'static str,
    /// Rows in the part, and the points they were bucketed into (at most the budget).
    pub rows: u64,
    pub points: usize,
    /// Blocks that could not be read (skipped, counted).
    pub bad_blocks: usize,
}

/// The points of `[from_ms, to_ms)` from the rollup tier that fits: rows starting in it, each
/// timed at its start, bucketed into at most `budget` spans of equal time, each point the
/// newest row start of its bucket with, per series, the **maximum** of its rows' maxima (as the history buckets the
/// ring's points: a one-sample spike survives). Series the tiers do not keep are unknown
/// ([`proctor_agent::history::rollup_series`]); no top processes. The minute tier while its rows fit
/// in 16 × the budget, else the hour tier when it reaches back as far.
fn tier_points(
    dir: &Path,
    maker: &PointMaker,
    from_ms: u64,
    to_ms: u64,
    budget: usize,
) -> (Vec<Point>, Option<TierPart>) {
    const NS: u64 = 1_000_000_000;
    let (from_s, to_s) = (from_ms / 1000, to_ms / 1000);
    let coarse = (to_s - from_s) / 60 > 16 * budget as u64;
    let Some((label, mut tier)) = crate::range::open_tier(dir, from_s * NS, coarse) else { return (Vec::new(), None) };
    let (block_s, _) = crate::range::tier_spans(label);
    let Ok(blocks) = tier.event_frames(from_s.saturating_sub(block_s) * NS, to_s * NS) else {
        return (Vec::new(), None);
    };
    let mut part = TierPart { tier: label, rows: 0, points: 0, bad_blocks: 0 };
    let width = (to_s - from_s).div_ceil(budget.max(1) as u64).max(1);
    let names = maker.names();
    // Buckets by index: (newest row start, per maker column the maximum so far).
    let mut buckets: std::collections::BTreeMap<u64, (u64, Vec<f64>)> = std::collections::BTreeMap::new();
    let mut read_until_s = 0;
    for frame in &blocks {
        let Some(block) = crate::range::read_tier_block(&mut tier, frame, &mut read_until_s) else {
            part.bad_blocks += 1;
            continue;
        };
        // Blocks rolled before the catalog name a series by an alias of its name: each block
        // name is looked up in the catalog once per block, not once per series asked for.
        let canonical: Vec<&str> = block.names.iter().map(|b| proctor_units::series::canonical(b)).collect();
        let columns: Vec<Option<usize>> = names
            .iter()
            .map(|n| {
                let r = proctor_agent::history::rollup_series(n)?;
                canonical.iter().position(|b| *b == r)
            })
            .collect();
        for row in &block.rows {
            let start = row.start_unix_s;
            if start < from_s || start * 1000 >= to_ms {
                continue;
            }
            part.rows += 1;
            let (time, values) =
                buckets.entry((start - from_s) / width).or_insert_with(|| (0, vec![f64::NAN; names.len()]));
            *time = (*time).max(start);
            for (value, column) in values.iter_mut().zip(&columns) {
                if let Some(stat) = column.and_then(|c| row.values.get(c).copied().flatten()) {
                    *value = if value.is_nan() { stat.max } else { value.max(stat.max) };
                }
            }
        }
    }
    let points: Vec<Point> = buckets.into_values().map(|(time, values)| maker.point_of(time * 1000, values)).collect();
    part.points = points.len();
    (points, Some(part))
}

fn read(
    reader: &mut Reader,
    maker: &PointMaker,
    budget: usize,
    cache: &mut PointCache,
    report: &mut StoreReport,
) -> Vec<Point> {
    const MS: u64 = 1_000_000;
    let (from_ns, to_ns) = (report.stats.from_ns, report.stats.to_ns);
    // A little before the range too, so the first point has a sample to take rates against.
    let lookback_ns = 120_000 * MS;
    let frames = match reader.frames(from_ns.saturating_sub(lookback_ns), to_ns) {
        Ok(f) => f,
        Err(e) => {
            report.stats.problems.push(format!("cannot list the store's frames: {e}"));
            return Vec::new();
        }
    };
    let first_in = frames.partition_point(|f| f.unix_ns() < from_ns);
    report.stats.frames_in_range = frames.len() - first_in;
    let picked = pick(&frames[first_in..], budget);
    report.stats.stride = picked.stride;
    // Which frames become points, each with the frame its rates are against: the pick before
    // it, or for the first one the frame just before it in the store.
    let mut before = picked.frames.first().and_then(|first| {
        let at = frames.iter().position(|f| f == first)?;
        at.checked_sub(1).map(|i| frames[i])
    });
    // The last frame read as a point, and its sample (`None`: it did not decode, and is not
    // read again as the next point's base).
    let mut decoded: Option<(u64, Option<Sample>)> = None;
    let mut fresh = PointCache::default();
    let mut points = Vec::with_capacity(picked.frames.len());
    for frame in picked.frames {
        let prev = before.replace(frame);
        let key = (frame.unix_ns(), prev.map_or(0, |p| p.unix_ns()));
        if let Some(point) = cache.points.remove(&key) {
            report.points_cached += 1;
            keep(&mut fresh, key, &point);
            points.push(point);
            continue;
        }
        let prev_sample = match (prev, decoded.take()) {
            (Some(p), Some((t, s))) if t == p.unix_ns() => s,
            (Some(p), _) => {
                report.frames_decoded += 1;
                reader.read(&p)
            }
            (None, _) => None,
        };
        report.frames_decoded += 1;
        let Some(cur) = reader.read(&frame) else {
            decoded = Some((frame.unix_ns(), None));
            continue;
        };
        report.stats.frames_read += 1;
        let against = prev_sample.as_ref().filter(|p| same_run(p, &cur));
        let snapshot = Snapshot::derive(cur, against);
        let point = maker.point(&snapshot);
        keep(&mut fresh, key, &point);
        points.push(point);
        decoded = Some((frame.unix_ns(), Some(snapshot.sample)));
    }
    *cache = fresh;
    report.stats.note_reader(reader);
    points
}

/// Keeps a copy of `point` in the next request's cache while it stays under [`CACHE_BYTES`].
fn keep(cache: &mut PointCache, key: (u64, u64), point: &Point) {
    let bytes = point.bytes() + std::mem::size_of::<Point>();
    if cache.bytes + bytes <= CACHE_BYTES {
        cache.bytes += bytes;
        cache.points.insert(key, point.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::tests::{damage_frame, short_store_v2};

    /// Regression (issue 15 item 10): a frame that failed to decode as a point was read again as
    /// the next point's rate base, and each reading counted: `bad_frames` was twice the store's.
    #[test]
    fn a_bad_frame_is_counted_once_in_the_history_store_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let end_ns = 1_700_000_000_000_000_000;
        short_store_v2(dir.path(), 13, end_ns);
        damage_frame(dir.path(), 5);
        damage_frame(dir.path(), 9);
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            processes: false,
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let maker =
            proctor_agent::history::History::new(&Snapshot::derive(sampler.sample(), None), 10, 10).maker().clone();
        let end_ms = end_ns / 1_000_000;
        let (points, report) =
            read_points(dir.path(), &maker, end_ms - 12_000, end_ms, 100, &mut PointCache::default());
        assert_eq!(points.len(), 11);
        assert_eq!(report.stats.bad_frames, 2, "{report:?}");
        let lines = report.stats.problems.iter().filter(|p| p.starts_with("skipped the frame")).count();
        assert_eq!(lines, 2, "{report:?}");
        // Each frame in the range decoded once (a bad one is not tried again as the next
        // point's base), plus at most the one before the range.
        let in_range = report.stats.frames_in_range;
        assert!(report.frames_decoded <= in_range + 1, "{} decoded of {in_range}", report.frames_decoded);
    }
}
