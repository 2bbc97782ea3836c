//! History older than the ring, read from `proctor serve`'s own store.
//!
//! `/api/v1/history` answers from the ring while the range fits in it; the part of a range
//! before the ring's oldest point is read here from the data directory the agent records into.
//! Each stored sample becomes a [`Snapshot`] through [`Snapshot::derive`] (rates against the
//! stored sample before it, same recorder run only) and a point through the ring's own
//! [`PointMaker`], so a point means the same whichever source answered it.
//!
//! The work per request is bounded, because decoding is the cost (a 600-process sample is
//! ~0.6 ms to decode): at most [`MAX_SPAN`] of time and at most `budget` frames decoded. When a
//! range holds more frames than that, one frame is taken per cell of a time grid (cells of
//! `stride_ms`, aligned to the epoch so a moving window picks the same frames again) and its rates
//! are taken against the previous cell's frame: averages over the stride, exact from the raw
//! counters, but a peak shorter than the stride is averaged into it. Points are cached by
//! (frame, the frame its rates are against), up to [`CACHE_BYTES`], so a repeated poll of a day
//! view decodes only the cells that are new.
//!
//! What it does not do: run on a tokio worker (the router runs it under `spawn_blocking`, one at
//! a time), write or repair the store (a `Reader` only reads; bad frames are skipped and
//! reported), or read `/proc`.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use proctor_model::Sample;
use proctor_store::frame::FrameKind;
use proctor_store::{same_run, Reader, StoredFrame};

use crate::agent::Snapshot;
use crate::history::{Point, PointMaker};

/// The longest range read from the store in one request; older `from`s are clamped (and said).
pub const MAX_SPAN: Duration = Duration::from_secs(8 * 24 * 3600);

/// Frames one request may decode when `max_points` does not say (or says more).
pub const MAX_FRAMES: usize = 2048;

/// The fewest frames a request may decode, so a tiny `max_points` still gives a usable shape.
pub const MIN_FRAMES: usize = 100;

/// Heap the point cache may hold.
pub const CACHE_BYTES: usize = 2 << 20;

/// What reading the store for one request did: answered with the points, never raised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreReport {
    /// The range actually read (after clamping to [`MAX_SPAN`]).
    pub from_ms: u64,
    pub to_ms: u64,
    /// `from` was older than [`MAX_SPAN`] allows and was moved up.
    pub clamped: bool,
    pub frames_in_range: usize,
    pub frames_decoded: usize,
    /// Points taken from the cache instead of decoding.
    pub points_cached: usize,
    /// The grid step when the range held more frames than the budget; 0 when every frame was read.
    pub stride_ms: u64,
    pub bad_frames: usize,
    pub damaged_segments: usize,
    /// The first few problems, with their file: bad frames, damaged segments, a store that
    /// could not be opened.
    pub problems: Vec<String>,
    pub elapsed_ms: f64,
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
    let started = Instant::now();
    let floor = to_ms.saturating_sub(MAX_SPAN.as_millis() as u64);
    let mut report =
        StoreReport { from_ms: from_ms.max(floor), to_ms, clamped: from_ms < floor, ..StoreReport::default() };
    let points = read(dir, maker, budget.max(1), cache, &mut report);
    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    (points, report)
}

fn read(dir: &Path, maker: &PointMaker, budget: usize, cache: &mut PointCache, report: &mut StoreReport) -> Vec<Point> {
    const MS: u64 = 1_000_000;
    let mut reader = match Reader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(format!("cannot read the store: {e}"));
            return Vec::new();
        }
    };
    let (from_ns, to_ns) = (report.from_ms.saturating_mul(MS), report.to_ms.saturating_mul(MS).saturating_add(MS - 1));
    // A little before the range too, so the first point has a sample to take rates against.
    let lookback_ns = 120_000 * MS;
    let frames = match reader.frames(from_ns.saturating_sub(lookback_ns), to_ns) {
        Ok(f) => f,
        Err(e) => {
            report.problems.push(format!("cannot list the store's frames: {e}"));
            return Vec::new();
        }
    };
    let first_in = frames.partition_point(|f| f.unix_ns() < from_ns);
    report.frames_in_range = frames.len() - first_in;
    // Which frames become points, each with the frame its rates are against.
    let mut picked: Vec<(StoredFrame, Option<StoredFrame>)> = Vec::new();
    if report.frames_in_range <= budget {
        for i in first_in..frames.len() {
            picked.push((frames[i], i.checked_sub(1).map(|j| frames[j])));
        }
    } else {
        let span_ms = report.to_ms.saturating_sub(report.from_ms).max(1);
        report.stride_ms = span_ms.div_ceil(budget as u64).max(1);
        let stride_ns = report.stride_ms * MS;
        let mut before = first_in.checked_sub(1).map(|j| frames[j]);
        for pick in one_per_cell(&frames[first_in..], stride_ns) {
            picked.push((pick, before));
            before = Some(pick);
        }
    }
    let mut decoded: Option<(u64, Sample)> = None;
    let mut fresh = PointCache::default();
    let mut points = Vec::with_capacity(picked.len());
    for (frame, prev) in picked {
        let key = (frame.unix_ns(), prev.map_or(0, |p| p.unix_ns()));
        if let Some(point) = cache.points.remove(&key) {
            report.points_cached += 1;
            keep(&mut fresh, key, &point);
            points.push(point);
            continue;
        }
        let prev_sample = match (prev, decoded.take()) {
            (Some(p), Some((t, s))) if t == p.unix_ns() => Some(s),
            (Some(p), _) => {
                report.frames_decoded += 1;
                reader.read(&p)
            }
            (None, _) => None,
        };
        report.frames_decoded += 1;
        let Some(cur) = reader.read(&frame) else { continue };
        let against = prev_sample.as_ref().filter(|p| same_run(p, &cur));
        let snapshot = Snapshot::derive(cur, against);
        let point = maker.point(&snapshot);
        keep(&mut fresh, key, &point);
        points.push(point);
        decoded = Some((frame.unix_ns(), snapshot.sample));
    }
    *cache = fresh;
    let read_report = reader.report();
    report.bad_frames = read_report.bad_frames.len();
    report.damaged_segments = read_report.damaged_segments.len();
    for (path, offset, why) in read_report.bad_frames.iter().take(4) {
        report.problems.push(format!("skipped the frame at {}:{offset}: {why}", path.display()));
    }
    for (path, why) in read_report.damaged_segments.iter().take(4) {
        report.problems.push(format!("{} is damaged: {why}", path.display()));
    }
    points
}

/// One frame per cell of an epoch-aligned grid of `stride_ns` over time-ordered `frames`, so a
/// moving window picks the same frames again: the cell's first key frame if it has one, else its
/// first frame. A key decodes on its own; any other frame read cold decodes its chunk's key and
/// the anchors before it too (~2.5× the time with record version 2), and a chunk (60 frames) is
/// about as long as a day view's cells, so most cells hold a key.
pub(crate) fn one_per_cell(frames: &[StoredFrame], stride_ns: u64) -> Vec<StoredFrame> {
    let stride_ns = stride_ns.max(1);
    let mut picked = Vec::new();
    let mut rest = frames;
    while let Some(first) = rest.first() {
        let cell = first.unix_ns() / stride_ns;
        let len = rest.partition_point(|f| f.unix_ns() / stride_ns == cell);
        picked.push(*rest[..len].iter().find(|f| f.frame.header.kind == FrameKind::Key).unwrap_or(first));
        rest = &rest[len..];
    }
    picked
}

/// Keeps a copy of `point` in the next request's cache while it stays under [`CACHE_BYTES`].
fn keep(cache: &mut PointCache, key: (u64, u64), point: &Point) {
    let bytes = point.bytes() + std::mem::size_of::<Point>();
    if cache.bytes + bytes <= CACHE_BYTES {
        cache.bytes += bytes;
        cache.points.insert(key, point.clone());
    }
}
