//! Answering a history range: the ring's part and the store's part, joined where the ring
//! begins, with a point budget split between them by the time each covers.
//!
//! A query runs in three steps so that the slow one holds no lock and can run wherever its
//! caller runs blocking work: [`plan_history`] checks the names and says whether (and
//! what) the store must answer, under the ring's lock for a moment; [`read_store_part`] reads
//! the store with no lock held; [`join_history`] walks the ring's range once under its
//! lock, then buckets and joins the parts after releasing it. Serializing the answer is the
//! caller's, with no lock held.

use std::path::PathBuf;

use crate::store_history::{self, PointCache, StoreReport, MAX_FRAMES, MIN_FRAMES};
use proctor_agent::agent::Shared;
use proctor_agent::history::{Point, PointMaker, Range, SeriesData};

/// How far past the ring's oldest point the store is read. The ring keeps moving while the
/// store is read, so the store part is read a little past the seam and cut at the ring's oldest
/// point as it is when the parts are joined: no gap unless the read took longer than this.
pub const SEAM_SLACK_MS: u64 = 10_000;

/// A range of named series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryQuery {
    pub names: Vec<String>,
    pub from_ms: u64,
    pub to_ms: u64,
    /// At most this many points (0: every point).
    pub max_points: usize,
}

/// What the store must answer for a query: the part of its range before the ring.
#[derive(Debug, Clone)]
pub struct StorePart {
    pub dir: PathBuf,
    pub maker: PointMaker,
    pub from_ms: u64,
    pub to_ms: u64,
    /// Frames the read may decode.
    pub budget: usize,
}

/// A query's answer, before serialization.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryAnswer {
    pub from_ms: u64,
    pub to_ms: u64,
    /// The first `store_points` points come from the store, the next `ring_points` from the ring.
    pub store_points: usize,
    pub ring_points: usize,
    pub times_ms: Vec<u64>,
    pub series: Vec<SeriesData>,
}

/// Checks the names (an unknown one is returned as the error) and says what the store must
/// answer: `None` when the range starts inside the ring or nothing is recorded.
pub fn plan_history(shared: &Shared, q: &HistoryQuery) -> Result<Option<StorePart>, String> {
    let dir = shared.latest().agent.recording.dir.clone();
    shared.with_history(|h| {
        if let Some(unknown) = q.names.iter().find(|n| !h.knows(n)) {
            return Err(unknown.clone());
        }
        let ring_first = h.first_ms().unwrap_or(u64::MAX);
        let (Some(dir), true) = (dir, q.from_ms < ring_first) else { return Ok(None) };
        let budget = if q.max_points == 0 { MAX_FRAMES } else { q.max_points.clamp(MIN_FRAMES, MAX_FRAMES) };
        Ok(Some(StorePart {
            dir,
            maker: h.maker().clone(),
            from_ms: q.from_ms,
            to_ms: q.to_ms.min(ring_first.saturating_sub(1).saturating_add(SEAM_SLACK_MS)),
            budget,
        }))
    })
}

/// Joins the store's points (oldest first, possibly empty) with the ring's at the ring's
/// oldest point, each part bucketed to its share of `max_points`.
pub fn join_history(shared: &Shared, q: &HistoryQuery, mut store_points: Vec<Point>) -> HistoryAnswer {
    // Under the lock: one range walk, the ring's part assembled (only the series asked for).
    let (ring, ring_first, last_ms, maker) = shared.with_history(|h| {
        let ring_first = h.first_ms().unwrap_or(u64::MAX);
        let points = h.points(q.from_ms.max(ring_first), q.to_ms);
        let newest = points.last().map(|p| p.time_ms);
        let share = split(q, ring_first, newest, !store_points.iter().any(|p| p.time_ms < ring_first));
        let ring = h.maker().assemble(&q.names, &points, share.1);
        (ring, ring_first, h.last_ms(), (h.maker().clone(), share.0))
    });
    let (maker, store_max) = maker;
    store_points.retain(|p| p.time_ms < ring_first);
    let refs: Vec<_> = store_points.iter().map(Point::as_ref).collect();
    let old = maker.assemble(&q.names, &refs, store_max);
    join(q, old, ring, last_ms)
}

/// `max_points` shared between the store's part and the ring's by the time each covers.
fn split(q: &HistoryQuery, ring_first: u64, newest: Option<u64>, store_empty: bool) -> (usize, usize) {
    match (q.max_points, store_empty) {
        (0, _) | (_, true) => (q.max_points, q.max_points),
        (n, false) => {
            let newest = newest.unwrap_or(q.to_ms.min(ring_first));
            let store_span = ring_first.min(newest).saturating_sub(q.from_ms) as f64;
            let whole = newest.saturating_sub(q.from_ms).max(1) as f64;
            let store_max = ((n as f64 * store_span / whole).round() as usize).clamp(1, n.saturating_sub(1).max(1));
            (store_max, n.saturating_sub(store_max).max(1))
        }
    }
}

fn join(q: &HistoryQuery, old: Range, new: Range, last_ms: Option<u64>) -> HistoryAnswer {
    let store_points = old.times_ms.len();
    let ring_points = new.times_ms.len();
    let mut times_ms = old.times_ms;
    times_ms.extend(new.times_ms);
    let series = old
        .series
        .into_iter()
        .zip(new.series)
        .map(|(mut a, b)| {
            a.values.extend(b.values);
            a
        })
        .collect();
    HistoryAnswer {
        from_ms: q.from_ms,
        to_ms: q.to_ms.min(last_ms.unwrap_or(0).max(q.from_ms)),
        store_points,
        ring_points,
        times_ms,
        series,
    }
}

/// The store's part of a query: blocking (it decodes frames), so run it where blocking work
/// belongs. `cache` keeps the points of the last read for the next.
pub fn read_store_part(part: &StorePart, cache: &mut PointCache) -> (Vec<Point>, StoreReport) {
    if part.from_ms > part.to_ms {
        return (Vec::new(), StoreReport::default());
    }
    store_history::read_points(&part.dir, &part.maker, part.from_ms, part.to_ms, part.budget, cache)
}
