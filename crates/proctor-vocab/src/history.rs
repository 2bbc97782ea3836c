//! History shapes: `/api/v1/history` (named series over a time range, from the ring and the
//! agent's store) and `/api/v1/history/series` (what can be asked for).

use proctor_stored::store_history::StoreReport;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct SeriesOut {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

#[derive(Debug, Serialize)]
pub struct HistoryOut {
    pub from_unix_ms: u64,
    pub to_unix_ms: u64,
    /// The first `store_points` points come from the store, the next `ring_points` from the ring.
    pub store_points: usize,
    pub ring_points: usize,
    /// What reading the store did; `null` when the range did not reach before the ring or
    /// nothing is recorded.
    pub store: Option<HistoryStoreOut>,
    /// Shared by every series: `values[i]` was sampled at `times_unix_ms[i]`.
    pub times_unix_ms: Vec<u64>,
    pub series: Vec<SeriesOut>,
}

/// What reading the store for the part of a range older than the ring did.
#[derive(Debug, Serialize)]
pub struct HistoryStoreOut {
    pub from_unix_ms: u64,
    pub to_unix_ms: u64,
    pub clamped: bool,
    pub frames_in_range: usize,
    /// Frames that became points (decoded now or taken from the cache).
    pub frames_read: usize,
    /// Frames decoded for this answer, the one before the first point's included.
    pub frames_decoded: usize,
    pub points_cached: usize,
    pub frame_budget: usize,
    /// One frame in every `stride_frames` was read; 1 when every frame in the range was.
    pub stride_frames: u64,
    pub bad_frames: usize,
    pub damaged_segments: usize,
    pub problems: Vec<String>,
    pub elapsed_ms: f64,
    /// The rollup tier that answered the part older than the raw samples, if one did.
    pub tier: Option<HistoryTierOut>,
}

/// What a rollup tier answered in a history's store part.
#[derive(Debug, Serialize)]
pub struct HistoryTierOut {
    /// `1m` or `1h`.
    pub tier: &'static str,
    pub rows: u64,
    /// Points the rows were bucketed into (each the maximum of its rows' maxima).
    pub points: usize,
    pub bad_blocks: usize,
}

pub fn history_store(r: StoreReport) -> HistoryStoreOut {
    let s = r.stats;
    HistoryStoreOut {
        from_unix_ms: s.from_ns / 1_000_000,
        to_unix_ms: s.to_ns / 1_000_000,
        clamped: s.clamped,
        frames_in_range: s.frames_in_range,
        frames_read: s.frames_read + r.points_cached,
        frames_decoded: r.frames_decoded,
        points_cached: r.points_cached,
        frame_budget: s.frame_budget,
        stride_frames: s.stride,
        bad_frames: s.bad_frames,
        damaged_segments: s.damaged_segments,
        problems: s.problems,
        elapsed_ms: s.elapsed_ms,
        tier: r.tier.map(|t| HistoryTierOut { tier: t.tier, rows: t.rows, points: t.points, bad_blocks: t.bad_blocks }),
    }
}

#[derive(Debug, Serialize)]
pub struct SeriesListOut {
    pub series: Vec<String>,
    /// Pids among the top processes in the kept history, most often first: each has
    /// `process.PID.cpu_percent` and `process.PID.rss_bytes`.
    pub top_process_pids: Vec<u32>,
    pub oldest_unix_ms: Option<u64>,
    pub newest_unix_ms: Option<u64>,
}
