//! The report of a stored range: its headline figures and top processes, as `/api/v1/report`,
//! the dashboard's "top processes over this range" and `proctor report --format json` all give
//! it, from one [`Fold`] (`proctor_stored::range::fold_range`).

use proctor_report::{ProcessUsage, RangeSummary};
use proctor_stored::range::{Fold, ReadStats, MAX_SPAN};
use serde::Serialize;

/// The most processes a top list may ask for over HTTP.
pub const MAX_TOP: usize = 50;

const MS: u64 = 1_000_000;

/// A range's report. `available: false` (with `reason`) when there is no store to read:
/// recording is off, or the store cannot be opened.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReportOut {
    pub available: bool,
    pub reason: Option<String>,
    /// Where the figures come from: `"store"` (the agent's own recording, or `--dir`).
    pub source: &'static str,
    pub dir: Option<String>,
    /// The range folded (after clamping), Unix ms, both ends included.
    pub from_unix_ms: u64,
    pub to_unix_ms: u64,
    pub clamped: bool,
    /// Frames the store holds in the range, and how many of them were decoded and folded.
    pub frames_in_range: usize,
    pub frames_read: usize,
    pub frame_budget: usize,
    /// One frame in every `stride_frames` was read; 1 when every frame in the range was.
    pub stride_frames: u64,
    /// What the reading leaves out, in words (for a person, shown as is).
    pub note: String,
    /// Samples folded, recorder runs among them, and those with a previous sample to take
    /// rates against.
    pub samples: u64,
    pub runs: u64,
    pub samples_with_rates: u64,
    pub first_unix_ms: Option<u64>,
    pub last_unix_ms: Option<u64>,
    /// The median time between consecutive *read* samples of one run.
    pub median_interval_ms: Option<f64>,
    pub processes_seen: u64,
    /// Each host series over the whole range: the mean and max of its per-sample values.
    pub headline: Vec<HeadlineOut>,
    /// Highest CPU seconds used inside the range first.
    pub top_cpu: Vec<ProcessUsageOut>,
    /// Highest peak resident size first.
    pub top_rss_peak: Vec<ProcessUsageOut>,
    /// Highest mean resident size first.
    pub top_rss_mean: Vec<ProcessUsageOut>,
    /// Most network bytes (received and sent) inside the range first (recorded with `--net`).
    pub top_network: Vec<ProcessUsageOut>,
    pub bad_frames: usize,
    pub damaged_segments: usize,
    /// The first few problems, with their file.
    pub problems: Vec<String>,
    pub elapsed_ms: f64,
    /// The process groups asked for (`groups=`; `report --group`), each over the range: the
    /// groups the recording agent stored with its samples.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupUsageOut>,
    /// The rollup tier read for the part of the range older than the raw samples, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<TierOut>,
    /// Processes that ended in the range, by name (from the samples read whole; the recording
    /// agent's BPF process events list them, those between two samples too).
    pub exited: proctor_report::ExitedSummary,
}

/// One process group over a range.
#[derive(Debug, Clone, Serialize)]
pub struct GroupUsageOut {
    pub name: String,
    /// Samples the group had members in.
    pub samples: u64,
    /// Each group series over the range (processes, threads, cpu, rss, pss, swap,
    /// faults.minor, faults.major, io.read, io.write, started, exited): mean and max.
    pub headline: Vec<HeadlineOut>,
}

/// The rollup tier a range read.
#[derive(Debug, Clone, Serialize)]
pub struct TierOut {
    /// `1m` (a row per minute) or `1h`.
    pub tier: &'static str,
    pub rows: u64,
    pub first_unix_ms: Option<u64>,
    pub end_unix_ms: Option<u64>,
}

impl From<&proctor_stored::range::TierRead> for TierOut {
    fn from(t: &proctor_stored::range::TierRead) -> Self {
        TierOut {
            tier: t.tier,
            rows: t.rows,
            first_unix_ms: t.first_unix_s.map(|s| s * 1000),
            end_unix_ms: t.end_unix_s.map(|s| s * 1000),
        }
    }
}

/// One series over the whole range, as proctor-report states it (the same fields, so one type).
pub use proctor_report::Headline as HeadlineOut;

/// One process over a range. `pid`, `name` and `cmdline` mean what they mean in a snapshot's
/// process; the rest are the range's own figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessUsageOut {
    pub pid: u32,
    /// With `pid`, tells a process apart from a later one that reused its pid.
    pub start_ticks: u64,
    pub name: String,
    pub cmdline: Option<Vec<String>>,
    /// CPU time used inside the range.
    pub cpu_seconds: f64,
    pub rss_peak_bytes: Option<u64>,
    pub rss_mean_bytes: Option<f64>,
    /// IP bytes received and sent, and TCP segments retransmitted, inside the range (recorded
    /// with `--net`; `null` without).
    pub net_rx_bytes: Option<u64>,
    pub net_tx_bytes: Option<u64>,
    pub net_retransmits: Option<u64>,
    /// Read samples the process appeared in.
    pub samples: u64,
    pub first_seen_unix_ms: u64,
    pub last_seen_unix_ms: u64,
}

impl From<&ProcessUsage> for ProcessUsageOut {
    fn from(u: &ProcessUsage) -> Self {
        ProcessUsageOut {
            pid: u.pid,
            start_ticks: u.start_ticks,
            name: u.comm.clone(),
            cmdline: u.cmdline.clone(),
            cpu_seconds: u.cpu_seconds,
            rss_peak_bytes: u.rss_peak_bytes,
            rss_mean_bytes: u.rss_mean_bytes,
            net_rx_bytes: u.net_rx_bytes,
            net_tx_bytes: u.net_tx_bytes,
            net_retransmits: u.net_retransmits,
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

/// The report of `fold` (read from the store in `dir`), with `top` processes per list. `store`
/// names the store in the note (`"the agent's store"` for serve, `"the store"` for `--dir`).
pub fn report(fold: &Fold, dir: &str, top: usize, store: &str) -> ReportOut {
    let stats = &fold.stats;
    let mut out = ReportOut {
        available: true,
        source: "store",
        dir: Some(dir.to_string()),
        from_unix_ms: stats.from_ns / MS,
        to_unix_ms: stats.to_ns / MS,
        clamped: stats.clamped,
        frames_in_range: stats.frames_in_range,
        frames_read: stats.frames_read,
        frame_budget: stats.frame_budget,
        stride_frames: stats.stride,
        bad_frames: stats.bad_frames,
        damaged_segments: stats.damaged_segments,
        problems: stats.problems.clone(),
        elapsed_ms: stats.elapsed_ms,
        ..ReportOut::default()
    };
    fill(&mut out, &fold.summary, top);
    out.note = note(stats, store);
    out
}

fn fill(out: &mut ReportOut, s: &RangeSummary, top: usize) {
    out.samples = s.samples;
    out.runs = s.runs;
    out.samples_with_rates = s.samples_with_rates;
    out.first_unix_ms = s.first_ns.map(|t| t / MS);
    out.last_unix_ms = s.last_ns.map(|t| t / MS);
    out.median_interval_ms = s.median_interval_ns.map(|t| t as f64 / 1e6);
    out.processes_seen = s.processes_seen;
    out.headline = s.headline.clone();
    out.exited = s.exited.clone();
    out.top_cpu = s.top_cpu.iter().take(top).map(ProcessUsageOut::from).collect();
    out.top_rss_peak = s.top_memory.iter().take(top).map(ProcessUsageOut::from).collect();
    out.top_network = s.top_network.iter().take(top).map(ProcessUsageOut::from).collect();
    let mut by_mean: Vec<&ProcessUsage> = s.top_memory.iter().filter(|u| u.rss_mean_bytes.is_some()).collect();
    by_mean.sort_by(|a, b| {
        let (ma, mb) = (a.rss_mean_bytes.unwrap_or(0.0), b.rss_mean_bytes.unwrap_or(0.0));
        mb.total_cmp(&ma).then((a.pid, a.start_ticks).cmp(&(b.pid, b.start_ticks)))
    });
    out.top_rss_mean = by_mean.into_iter().take(top).map(ProcessUsageOut::from).collect();
    out.groups = s
        .groups
        .iter()
        .map(|g| GroupUsageOut { name: g.name.clone(), samples: g.samples, headline: g.headline.clone() })
        .collect();
}

/// What the figures rest on, in a sentence or two: only what happened.
pub fn note(stats: &ReadStats, store: &str) -> String {
    if stats.frames_in_range == 0 {
        return "the store holds no samples in this range".to_string();
    }
    let mut note = if stats.stride <= 1 {
        format!("all {} samples in the range read from {store}", stats.frames_in_range)
    } else {
        format!(
            "{} of the {} samples in the range read from {store}, one in every {}: CPU seconds are exact for processes that lived through the read samples; one that lived only between two is missed, and RSS peaks and means are over the read samples",
            stats.frames_read, stats.frames_in_range, stats.stride
        )
    };
    if stats.clamped {
        note.push_str(&format!("; the range was cut to the last {} days", MAX_SPAN.as_secs() / 86_400));
    }
    if stats.bad_frames > 0 {
        note.push_str(&format!("; {} frames could not be read (see problems)", stats.bad_frames));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_speaks_only_of_what_happened() {
        let all = ReadStats { frames_in_range: 430, frames_read: 430, stride: 1, ..ReadStats::default() };
        assert_eq!(note(&all, "the store"), "all 430 samples in the range read from the store");
        let strided = ReadStats { frames_in_range: 86_400, frames_read: 720, stride: 120, ..ReadStats::default() };
        assert!(note(&strided, "the store")
            .starts_with("720 of the 86400 samples in the range read from the store, one in every 120"));
        let bad = ReadStats { frames_in_range: 10, frames_read: 8, stride: 1, bad_frames: 2, ..ReadStats::default() };
        assert!(note(&bad, "the store").ends_with("; 2 frames could not be read (see problems)"));
        assert_eq!(note(&ReadStats::default(), "the store"), "the store holds no samples in this range");
    }
}
