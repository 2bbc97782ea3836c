//! `/api/v1/report`: the top processes and the headline figures of a time range, folded by
//! `proctor-report`'s [`RangeBuilder`] (what `proctor report` prints) over `proctor serve`'s own
//! store.
//!
//! Only the store is read, not the ring: while serve records, the store holds every sample the
//! ring does (the recorder appends each one as it is published), and the ring keeps no
//! processes. The newest sample or two may still be on their way to the store.
//!
//! The work per request is bounded like the history's store part: at most [`MAX_SPAN`] of time
//! and at most `budget` frames decoded (lean: processes' `stat` fields and command lines, no
//! status, io or PSS). When the range holds more frames than that, one frame is taken per cell
//! of an epoch-aligned grid (`stride_ms`) and folded whole; process CPU between two read frames
//! telescopes to the counters' difference, so it stays exact for processes that lived through
//! both, but a process that lived only between two read frames is missed and RSS peaks and
//! means are over the read frames. The answer says how many frames were read and the stride.
//!
//! What it does not do: run on a tokio worker (the router runs it under `spawn_blocking`
//! holding the one store-read permit it shares with the history), write or repair the store,
//! cache answers, or read `/proc`.

use std::path::Path;
use std::time::{Duration, Instant};

use proctor_report::{ProcessUsage, RangeBuilder, RangeConfig, RangeSummary, Unit};
use proctor_store::{Reader, StoredFrame};
use serde::Serialize;

use crate::store_history;

/// The longest range one request folds; an older `from` is clamped (and said).
pub const MAX_SPAN: Duration = crate::store_history::MAX_SPAN;

/// Frames one request decodes at most: a few hundred lean decodes of a ~600-process sample
/// take a fraction of a second.
pub const MAX_FRAMES: usize = 300;

/// The most processes a top list may ask for.
pub const MAX_TOP: usize = 50;

const MS: u64 = 1_000_000;

/// `/api/v1/report`'s answer. `available: false` (with `reason`) when there is no store to
/// read: recording is off, or the store cannot be opened.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReportOut {
    pub available: bool,
    pub reason: Option<String>,
    /// Where the figures come from: `"store"` (the agent's own recording).
    pub source: &'static str,
    pub dir: Option<String>,
    /// The range folded (after clamping to [`MAX_SPAN`]), Unix ms, both ends included.
    pub from_unix_ms: u64,
    pub to_unix_ms: u64,
    pub clamped: bool,
    /// Frames the store holds in the range, and how many of them were decoded and folded.
    pub frames_in_range: usize,
    pub frames_read: usize,
    pub frame_budget: usize,
    /// The grid step when the range held more frames than the budget; 0 when every frame was read.
    pub stride_ms: u64,
    /// What the reading leaves out, in words (for the dashboard to show as is).
    pub note: String,
    /// Headline figures of the range summary.
    pub samples: u64,
    pub runs: u64,
    pub samples_with_rates: u64,
    pub first_unix_ms: Option<u64>,
    pub last_unix_ms: Option<u64>,
    /// The median time between consecutive *read* samples of one run (the stride when strided).
    pub median_interval_ms: Option<f64>,
    pub processes_seen: u64,
    /// Each host series over the whole range: the mean and max of its per-sample values.
    pub headline: Vec<HeadlineOut>,
    /// Highest CPU seconds used inside the range first.
    pub top_cpu: Vec<ProcessOut>,
    /// Highest peak resident size first.
    pub top_rss_peak: Vec<ProcessOut>,
    /// Highest mean resident size first.
    pub top_rss_mean: Vec<ProcessOut>,
    pub bad_frames: usize,
    pub damaged_segments: usize,
    /// The first few problems, with their file.
    pub problems: Vec<String>,
    pub elapsed_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeadlineOut {
    pub name: &'static str,
    pub unit: Unit,
    pub description: &'static str,
    pub mean: f64,
    pub max: f64,
    /// Per-sample values behind the mean and max.
    pub count: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessOut {
    pub pid: u32,
    pub start_ticks: u64,
    pub name: String,
    pub cmdline: Option<String>,
    pub cpu_seconds: f64,
    pub rss_peak_bytes: Option<u64>,
    pub rss_mean_bytes: Option<f64>,
    /// Read samples the process appeared in.
    pub samples: u64,
    pub first_seen_unix_ms: u64,
    pub last_seen_unix_ms: u64,
}

impl From<&ProcessUsage> for ProcessOut {
    fn from(u: &ProcessUsage) -> Self {
        ProcessOut {
            pid: u.pid,
            start_ticks: u.start_ticks,
            name: u.comm.clone(),
            cmdline: u.cmdline.clone(),
            cpu_seconds: u.cpu_seconds,
            rss_peak_bytes: u.rss_peak_bytes,
            rss_mean_bytes: u.rss_mean_bytes,
            samples: u.samples,
            first_seen_unix_ms: u.first_seen_ns / MS,
            last_seen_unix_ms: u.last_seen_ns / MS,
        }
    }
}

/// The answer when there is no store to read.
pub fn unavailable(reason: impl Into<String>, from_ms: u64, to_ms: u64) -> ReportOut {
    ReportOut {
        reason: Some(reason.into()),
        source: "store",
        from_unix_ms: from_ms,
        to_unix_ms: to_ms,
        ..ReportOut::default()
    }
}

/// Folds `[from_ms, to_ms]` of the store in `dir`, decoding at most `budget` frames, into the
/// `top` processes by CPU, peak and mean RSS and the headline figures. Every problem lands in
/// the answer; none is an error.
pub fn read_report(dir: &Path, from_ms: u64, to_ms: u64, budget: usize, top: usize) -> ReportOut {
    let started = Instant::now();
    let budget = budget.max(1);
    let floor = to_ms.saturating_sub(MAX_SPAN.as_millis() as u64);
    let mut out = ReportOut {
        available: true,
        source: "store",
        dir: Some(dir.display().to_string()),
        from_unix_ms: from_ms.max(floor),
        to_unix_ms: to_ms,
        clamped: from_ms < floor,
        frame_budget: budget,
        ..ReportOut::default()
    };
    let mut reader = match Reader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            let mut answer =
                unavailable(format!("cannot read the store in {}: {e}", dir.display()), out.from_unix_ms, to_ms);
            answer.dir = out.dir;
            return answer;
        }
    };
    let (from_ns, to_ns) = (out.from_unix_ms.saturating_mul(MS), to_ms.saturating_mul(MS).saturating_add(MS - 1));
    let frames = match reader.frames(from_ns, to_ns) {
        Ok(f) => f,
        Err(e) => {
            out.problems.push(format!("cannot list the store's frames: {e}"));
            Vec::new()
        }
    };
    out.frames_in_range = frames.len();
    let (picked, stride_ms) = pick(&frames, out.from_unix_ms, to_ms, budget);
    out.stride_ms = stride_ms;
    // One bucket per series: its mean and max are the range's. Every process is kept (the
    // lists are cut here), so the mean-RSS list can be made from the same fold.
    let config = RangeConfig { from_ns, to_ns, max_points: 1, top: usize::MAX, keep_points: false };
    let mut builder = RangeBuilder::new(config);
    for frame in &picked {
        if let Some(sample) = reader.read_lean(frame) {
            out.frames_read += 1;
            builder.push(sample);
        }
    }
    let summary = builder.finish();
    fill(&mut out, &summary, top);
    let read_report = reader.report();
    out.bad_frames = read_report.bad_frames.len();
    out.damaged_segments = read_report.damaged_segments.len();
    for (path, offset, why) in read_report.bad_frames.iter().take(4) {
        out.problems.push(format!("skipped the frame at {}:{offset}: {why}", path.display()));
    }
    for (path, why) in read_report.damaged_segments.iter().take(4) {
        out.problems.push(format!("{} is damaged: {why}", path.display()));
    }
    out.note = note(&out);
    out.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    out
}

/// Every frame when they fit the budget; else one frame per cell of an epoch-aligned grid
/// whose step spreads the budget over the range (see [`store_history::one_per_cell`]).
fn pick(frames: &[StoredFrame], from_ms: u64, to_ms: u64, budget: usize) -> (Vec<StoredFrame>, u64) {
    if frames.len() <= budget {
        return (frames.to_vec(), 0);
    }
    // A range of n strides touches at most n + 1 cells, so n is one less than the budget.
    let cells = (budget as u64).saturating_sub(1).max(1);
    let stride_ms = to_ms.saturating_sub(from_ms).max(1).div_ceil(cells).max(1);
    (store_history::one_per_cell(frames, stride_ms * MS), stride_ms)
}

fn fill(out: &mut ReportOut, s: &RangeSummary, top: usize) {
    out.samples = s.samples;
    out.runs = s.runs;
    out.samples_with_rates = s.samples_with_rates;
    out.first_unix_ms = s.first_ns.map(|t| t / MS);
    out.last_unix_ms = s.last_ns.map(|t| t / MS);
    out.median_interval_ms = s.median_interval_ns.map(|t| t as f64 / 1e6);
    out.processes_seen = s.processes_seen;
    out.headline = s
        .series
        .iter()
        .filter_map(|series| {
            let p = series.points.first()?;
            Some(HeadlineOut {
                name: series.name,
                unit: series.unit,
                description: series.description,
                mean: p.mean,
                max: p.max,
                count: p.count,
            })
        })
        .collect();
    out.top_cpu = s.top_cpu.iter().take(top).map(ProcessOut::from).collect();
    out.top_rss_peak = s.top_memory.iter().take(top).map(ProcessOut::from).collect();
    let mut by_mean: Vec<&ProcessUsage> = s.top_memory.iter().filter(|u| u.rss_mean_bytes.is_some()).collect();
    by_mean.sort_by(|a, b| {
        let (ma, mb) = (a.rss_mean_bytes.unwrap_or(0.0), b.rss_mean_bytes.unwrap_or(0.0));
        mb.total_cmp(&ma).then((a.pid, a.start_ticks).cmp(&(b.pid, b.start_ticks)))
    });
    out.top_rss_mean = by_mean.into_iter().take(top).map(ProcessOut::from).collect();
}

/// What the figures rest on, in one sentence or two.
fn note(out: &ReportOut) -> String {
    if out.frames_in_range == 0 {
        return "the store holds no samples in this range".to_string();
    }
    let mut note = if out.stride_ms == 0 {
        format!("all {} samples in the range read from the agent's store", out.frames_in_range)
    } else {
        format!(
            "{} of the {} samples in the range read from the agent's store, one per {}: CPU seconds are exact for processes that lived through the read samples; one that lived only between two is missed, and RSS peaks and means are over the read samples",
            out.frames_read,
            out.frames_in_range,
            span_text(out.stride_ms)
        )
    };
    if out.clamped {
        note.push_str(&format!("; the range was cut to the last {} days", MAX_SPAN.as_secs() / 86_400));
    }
    if out.frames_read < out.frames_in_range.min(out.frame_budget) {
        note.push_str("; some frames could not be read (see problems)");
    }
    note
}

fn span_text(ms: u64) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms < 120_000 => format!("{:.0} s", ms as f64 / 1e3),
        ms if ms < 7_200_000 => format!("{:.0} min", ms as f64 / 60e3),
        ms => format!("{:.1} h", ms as f64 / 3600e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_text_picks_a_readable_unit() {
        assert_eq!(span_text(250), "250 ms");
        assert_eq!(span_text(12_000), "12 s");
        assert_eq!(span_text(288_000), "5 min");
        assert_eq!(span_text(10_800_000), "3.0 h");
    }
}
