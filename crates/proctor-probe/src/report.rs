//! The report over a set of [`RequestRecord`]s: HDR percentiles, a log-scale histogram, a
//! time-series strip, modes with near-integer ratios, per-phase medians and slowdown
//! probabilities, which phase carries each slow mode, and errors by class.
//!
//! Pure: records in, a serializable [`Report`] and its text out. The same code serves a live
//! run and `proctor probe analyze` over recorded (possibly merged) files. Latency statistics
//! cover requests that got a complete response (any status); failures without one are only
//! counted by class, because their "latency" is a timeout or a refusal, not a service time.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use proctor_modes::{find_modes_in_values, ModeConfig, ModeReport};
use serde::Serialize;

use crate::record::{RequestRecord, PHASE_NAMES};
use crate::server_timing;
pub use proctor_units::units::duration_ns;

/// Layout knobs; [`Default`] is what the CLI prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportConfig {
    /// Columns of the time-series strip.
    pub timeline_columns: usize,
    /// Rows per factor of ten in the histogram.
    pub histogram_bins_per_decade: u32,
    pub modes: ModeConfig,
}

impl Default for ReportConfig {
    fn default() -> Self {
        // Latencies are durations: a few requests that hold much of the time (timeouts) are
        // a mode even when they are rare.
        Self { timeline_columns: 60, histogram_bins_per_decade: 10, modes: ModeConfig::durations() }
    }
}

/// Everything the report says; serialized as is for `--format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Distinct run ids, in first-seen order (several after merging files).
    pub runs: Vec<String>,
    pub requests: u64,
    /// Requests with a complete HTTP response, whatever the status.
    pub responses: u64,
    /// Requests with a 1xx–3xx response.
    pub ok: u64,
    /// Counts by [`crate::record::ErrorClass`] name.
    pub errors: BTreeMap<String, u64>,
    /// The first message seen for each error class.
    pub error_examples: BTreeMap<String, String>,
    /// New connections opened (requests that did not reuse one and got past DNS).
    pub connections: u64,
    /// `https` runs: false when any record skipped certificate verification (`--insecure`),
    /// true when all verified; `null` when no record used TLS.
    pub tls_verified: Option<bool>,
    /// From the first intended send to the last response's end.
    pub span_ns: u64,
    /// `span_ns` in seconds, for the text and the plot; not in the JSON, which speaks
    /// nanoseconds only.
    #[serde(skip)]
    pub span_seconds: f64,
    pub requests_per_second: f64,
    pub latency: Option<Latency>,
    /// Coarse modes (a timer's ticks inside one lump are its fine structure, not modes).
    /// `proctor-modes` knows no units; the JSON names them (see [`ModesJson`]).
    #[serde(serialize_with = "modes_in_ns")]
    pub modes: Option<ModeReport>,
    /// "3 modes: 22.0 ms (33 %), …; 180 ms ≈ 2 × 90.0 ms"
    pub modes_summary: String,
    /// What a person should be told outright, in words: a mode's fine structure ("the 64.8 ms
    /// mode is quantized in 4.00 ms steps …"), the Nagle/delayed-ACK signature.
    pub notes: Vec<String>,
    /// Set when requests on reused connections show the Nagle/delayed-ACK signature.
    pub delayed_ack: Option<DelayedAck>,
    pub histogram: Vec<HistogramRow>,
    pub timeline: Vec<TimelineCell>,
    pub phases: Vec<PhaseSummary>,
    /// The server's own substeps from `Server-Timing` headers, named `server:NAME`, in the
    /// order first seen; summarized like `phases`. Empty when no response carried any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub substeps: Vec<SubstepSummary>,
    /// Distinct substep names past [`MAX_REPORT_SUBSTEPS`], not summarized.
    #[serde(skip_serializing_if = "is_zero")]
    pub substeps_left_out: u64,
    /// `Server-Timing` metrics the client did not keep (malformed, past 32 per response, a
    /// name over 64 bytes, or a `dur` that was no duration), summed over the requests.
    #[serde(skip_serializing_if = "is_zero")]
    pub server_timing_dropped: u64,
    pub attribution: Vec<ModeAttribution>,
    /// Set when filters chose the records: how many of how many matched (the report is over
    /// the matches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Which records a filtered report covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// Records that matched every filter.
    pub matched: u64,
    /// Records read.
    pub of: u64,
    /// The filters, as given (`--status 5xx`, `--phase server:db>50ms`).
    pub filters: Vec<String>,
}

/// Distinct `Server-Timing` names a report summarizes; a server that invents a name per
/// request cannot grow the report without bound.
pub const MAX_REPORT_SUBSTEPS: usize = 64;

/// One `Server-Timing` substep across the responses that reported it with a duration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubstepSummary {
    /// `server:` and the metric's name.
    pub name: String,
    /// The first `desc` seen for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
    /// Responses that reported it with a duration (several of one name in a response are
    /// summed: two queries are one `db` time).
    pub count: u64,
    pub median_ns: u64,
    pub p99_ns: u64,
    /// The phases' rule: slow is more than twice the median plus 1 ms.
    pub slow_threshold_ns: u64,
    pub slow_probability: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    pub percentiles: Vec<Percentile>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentile {
    pub label: &'static str,
    pub quantile: f64,
    /// HDR histogram value at the quantile (3 significant digits), within the exact min and max.
    pub value_ns: u64,
}

/// One histogram row: totals in `[low_ns, high_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HistogramRow {
    pub low_ns: u64,
    pub high_ns: u64,
    pub count: u64,
}

/// One column of the time-series strip.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelineCell {
    /// Start of the column, from the first send.
    pub offset_ns: u64,
    pub width_ns: u64,
    pub requests: u64,
    pub errors: u64,
    /// Median total of the column's responses.
    pub median_ns: Option<u64>,
    pub max_ns: Option<u64>,
}

/// One phase across all responses that went through it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseSummary {
    pub name: &'static str,
    /// Responses in which this phase happened.
    pub count: u64,
    pub median_ns: u64,
    pub p99_ns: u64,
    /// A phase is "slow" in a request when it took more than twice its median plus 1 ms.
    pub slow_threshold_ns: u64,
    /// Fraction of `count` above `slow_threshold_ns`: the probability of a slowdown here.
    pub slow_probability: f64,
}

/// Which phase makes a slow mode slow: the one whose median grew most against the fastest
/// mode's requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeAttribution {
    pub mode_ns: f64,
    pub requests: u64,
    /// Median total of this mode's requests minus the fastest mode's.
    pub extra_ns: f64,
    pub phase: &'static str,
    /// That phase's median here and in the fastest mode.
    pub phase_median_ns: u64,
    pub baseline_phase_median_ns: u64,
    /// The phase's growth over `extra_ns` (near 1: this phase is the whole difference).
    pub share: f64,
    /// The server's substep (`server:db`) whose median grew most, when it grew by at least
    /// half of `extra_ns`: what inside the server carries the mode. Absent otherwise, and
    /// when no response carried `Server-Timing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substep: Option<String>,
    /// That substep's median here and in the fastest mode, and its growth over `extra_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substep_median_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_substep_median_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substep_share: Option<f64>,
}

/// A substep is named as a slow mode's carrier when its median grew by at least this share of
/// the mode's extra time.
const SUBSTEP_CARRIER_SHARE: f64 = 0.5;

/// The JSON of the modes: [`ModeReport`] with nanoseconds named (`proctor-modes` knows no
/// units, so it has no public shape of its own).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModesJson {
    /// Coarse modes by increasing value.
    pub modes: Vec<ModeJson>,
    /// The spikes inside coarse modes that have more than one (a timer's ticks).
    pub fine_structure: Vec<FineStructureJson>,
    /// `modes[upper] ≈ multiple × modes[lower]`.
    pub near_multiples: Vec<NearMultipleJson>,
    /// Responses the modes were found in, and their summed latency.
    pub count: u64,
    pub total_ns: f64,
    /// Hartigan's dip of the log-scale distribution (0 to 0.25).
    pub dip: f64,
    /// One mode before dropping small ones and grouping fine structure.
    pub unimodal: bool,
    /// KDE bandwidth of the first split on the natural-log scale (a ratio, not a duration).
    pub bandwidth_log: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModeJson {
    /// Where the density peaks.
    pub value_ns: f64,
    /// The basin the mode owns.
    pub low_ns: f64,
    pub high_ns: f64,
    /// Responses in the basin, and their share of all responses.
    pub count: u64,
    pub fraction: f64,
    /// Their summed latency, and its share of all responses' latency.
    pub total_ns: f64,
    pub time_fraction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FineStructureJson {
    /// Index into `modes`.
    pub mode: usize,
    pub spikes_ns: Vec<f64>,
    /// The spikes' spacing when they are evenly spaced.
    pub step_ns: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NearMultipleJson {
    pub lower: usize,
    pub upper: usize,
    pub multiple: u32,
    /// The exact ratio `upper / lower`.
    pub ratio: f64,
}

impl ModesJson {
    pub fn new(report: &ModeReport) -> Self {
        let mode = |mode: &proctor_modes::Mode| ModeJson {
            value_ns: mode.value,
            low_ns: mode.low,
            high_ns: mode.high,
            count: mode.count,
            fraction: mode.fraction,
            total_ns: mode.total,
            time_fraction: mode.total_fraction,
        };
        ModesJson {
            modes: report.modes.iter().map(mode).collect(),
            fine_structure: report
                .fine_structure
                .iter()
                .map(|fine| FineStructureJson {
                    mode: fine.mode,
                    spikes_ns: fine.spikes.iter().map(|spike| spike.value).collect(),
                    step_ns: fine.step,
                })
                .collect(),
            near_multiples: report
                .near_multiples
                .iter()
                .map(|near| NearMultipleJson {
                    lower: near.lower,
                    upper: near.upper,
                    multiple: near.multiple,
                    ratio: near.ratio,
                })
                .collect(),
            count: report.count,
            total_ns: report.total,
            dip: report.dip,
            unimodal: report.unimodal,
            bandwidth_log: report.bandwidth_log,
        }
    }
}

fn modes_in_ns<S: serde::Serializer>(modes: &Option<ModeReport>, serializer: S) -> Result<S::Ok, S::Error> {
    modes.as_ref().map(ModesJson::new).serialize(serializer)
}

/// The Nagle/delayed-ACK signature: (nearly) every response on a reused connection spent about
/// the same 40–200 ms in `transfer`, though its body is small, while responses on new
/// connections did not. The server wrote its response in more than one small piece without
/// `TCP_NODELAY`; Nagle's algorithm held the later piece until the first was acknowledged, and
/// the client's kernel delayed that ACK (Linux: 40 ms at least, 200 ms at most). A new
/// connection starts in quick-ACK mode, which is why its first exchange does not pay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DelayedAck {
    /// Responses on reused connections.
    pub reused_responses: u64,
    /// Of those, the ones whose transfer was near the median below.
    pub delayed_responses: u64,
    /// Median transfer of the reused connections' responses.
    pub transfer_median_ns: u64,
    /// Smallest and largest transfer of the delayed responses.
    pub transfer_min_ns: u64,
    pub transfer_max_ns: u64,
    /// Median transfer of responses on new connections, when there were any.
    pub new_connection_transfer_median_ns: Option<u64>,
}

/// Delayed-ACK timers: Linux's is 40 ms at least (`TCP_DELACK_MIN`), 200 ms at most
/// (`TCP_DELACK_MAX`, also Windows' default); the band leaves room for timer ticks.
const DELAYED_ACK_BAND_NS: (u64, u64) = (35_000_000, 220_000_000);
/// Fewer reused responses than this say nothing about "every request".
const DELAYED_ACK_MIN_REUSED: usize = 5;
/// A response counts as delayed when its transfer is within this factor of the median.
const DELAYED_ACK_SPREAD: (f64, f64) = (0.7, 1.5);
/// Share of reused responses that must be delayed.
const DELAYED_ACK_SHARE: f64 = 0.9;
/// Bodies larger than this may take 40 ms to arrive for good reasons.
const DELAYED_ACK_MAX_BODY_BYTES: u64 = 64 * 1024;

const PERCENTILES: [(&str, f64); 5] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0)];

/// Builds the report. Records may come in any order and from several runs.
pub fn build(records: &[RequestRecord], config: &ReportConfig) -> Report {
    let mut runs: Vec<String> = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut error_examples: BTreeMap<String, String> = BTreeMap::new();
    for record in records {
        let run: &str = &record.run;
        if runs.last().map(String::as_str) != Some(run) && !runs.iter().any(|known| known == run) {
            runs.push(run.to_string());
        }
        if let Some(class) = record.error {
            *errors.entry(class.name().to_string()).or_default() += 1;
            if let Some(detail) = &record.error_detail {
                error_examples.entry(class.name().to_string()).or_insert_with(|| detail.clone());
            }
        }
    }
    let responses: Vec<&RequestRecord> = records.iter().filter(|record| record.has_response()).collect();
    let totals: Vec<u64> = responses.iter().map(|record| record.total_ns).collect();
    let first_send = records.iter().map(|record| record.sent_unix_ns).min().unwrap_or(0);
    let last_end = records.iter().map(|record| record.sent_unix_ns.saturating_add(record.total_ns)).max().unwrap_or(0);
    let span_ns = last_end.saturating_sub(first_send);
    let span_seconds = span_ns as f64 / 1e9;
    let modes = (!totals.is_empty()).then(|| {
        let values: Vec<f64> = totals.iter().map(|&total| total as f64).collect();
        find_modes_in_values(&values, &config.modes)
    });
    let (substep_names, substeps_left_out) = substep_names(&responses);
    let attribution = modes.as_ref().map_or_else(Vec::new, |modes| attribute(&responses, modes, &substep_names));
    let delayed_ack = delayed_ack(&responses);
    let mut notes = modes.as_ref().map_or_else(Vec::new, mode_notes);
    notes.extend(delayed_ack.as_ref().map(delayed_ack_note));
    let server_timing_dropped: u64 = records.iter().map(|record| u64::from(record.server_timing_dropped)).sum();
    if server_timing_dropped > 0 {
        notes.push(format!(
            "{server_timing_dropped} Server-Timing metric{} not kept (malformed, more than {} in a response, a name \
             over {} bytes, or a dur that is not a duration)",
            if server_timing_dropped == 1 { " was" } else { "s were" },
            server_timing::MAX_SUBSTEPS,
            server_timing::MAX_NAME_BYTES
        ));
    }
    if substeps_left_out > 0 {
        notes.push(format!(
            "{substeps_left_out} more Server-Timing names past the first {MAX_REPORT_SUBSTEPS} were not summarized"
        ));
    }
    Report {
        runs,
        requests: records.len() as u64,
        responses: responses.len() as u64,
        ok: records.iter().filter(|record| record.has_response() && record.error.is_none()).count() as u64,
        errors,
        error_examples,
        connections: records.iter().filter(|record| !record.reused && record.phases.connect_ns.is_some()).count()
            as u64,
        // One unverified record taints a merged analysis: its latencies may come from a server
        // that was not the one named.
        tls_verified: records.iter().filter_map(|record| record.tls_verified).reduce(|all, this| all && this),
        span_ns,
        span_seconds,
        requests_per_second: if span_seconds > 0.0 { records.len() as f64 / span_seconds } else { 0.0 },
        latency: latency(&totals),
        modes_summary: modes.as_ref().map_or_else(|| "no responses".to_string(), summarize_modes),
        modes,
        notes,
        delayed_ack,
        histogram: histogram(&totals, config.histogram_bins_per_decade),
        timeline: timeline(records, first_send, span_ns, config.timeline_columns),
        phases: phases(&responses),
        substeps: substeps(&responses, &substep_names),
        substeps_left_out,
        server_timing_dropped,
        attribution,
        selection: None,
    }
}

impl Report {
    /// "no request succeeded (3 sent): 3 refused" when no request got a 1xx–3xx response
    /// (failures without a response, 4xx and 5xx alike), `None` when one did.
    pub fn none_succeeded(&self) -> Option<String> {
        if self.ok > 0 {
            return None;
        }
        if self.requests == 0 {
            return Some("no request finished".to_string());
        }
        let classes: Vec<String> = self.errors.iter().map(|(class, count)| format!("{count} {class}")).collect();
        Some(format!("no request succeeded ({} sent): {}", self.requests, classes.join(", ")))
    }
}

fn latency(totals: &[u64]) -> Option<Latency> {
    let min_ns = *totals.iter().min()?;
    let max_ns = *totals.iter().max()?;
    // Three significant digits, auto-resizing: ~0.1 % error at any magnitude, memory
    // bounded by the range rather than the count.
    let mut hdr = Histogram::<u64>::new(3).ok()?;
    for &total in totals {
        // `record` grows the histogram to fit (auto-resize); `saturating_record` would clamp
        // to its current top instead.
        if hdr.record(total).is_err() {
            hdr.saturating_record(total);
        }
    }
    // HDR answers with the highest value its bucket stands for, which can lie above the
    // largest value recorded ("p99.9 10.6 ms, max 10.5 ms"): no percentile is reported outside
    // the exact min and max.
    let percentiles = PERCENTILES
        .iter()
        .map(|&(label, quantile)| Percentile {
            label,
            quantile,
            value_ns: if quantile >= 1.0 { max_ns } else { hdr.value_at_quantile(quantile).clamp(min_ns, max_ns) },
        })
        .collect();
    let mean_ns = totals.iter().map(|&total| total as f64).sum::<f64>() / totals.len() as f64;
    Some(Latency { min_ns, mean_ns, max_ns, percentiles })
}

/// "3 modes: 22.0 ms (33 %), 90.0 ms (33 %), 180 ms (33 %); 180 ms ≈ 2 × 90.0 ms"
pub fn summarize_modes(report: &ModeReport) -> String {
    let count = report.modes.len();
    let mut text = format!("{count} mode{}: ", if count == 1 { "" } else { "s" });
    let parts: Vec<String> = report
        .modes
        .iter()
        .map(|mode| format!("{} ({:.0} %)", duration_ns(mode.value), mode.fraction * 100.0))
        .collect();
    text.push_str(&parts.join(", "));
    if !report.near_multiples.is_empty() {
        let ratios: Vec<String> = report
            .near_multiples
            .iter()
            .map(|near| {
                format!(
                    "{} ≈ {} × {}",
                    duration_ns(report.modes[near.upper].value),
                    near.multiple,
                    duration_ns(report.modes[near.lower].value)
                )
            })
            .collect();
        text.push_str("; ");
        text.push_str(&ratios.join(", "));
    }
    text
}

/// "the 64.8 ms mode is quantized in 4.00 ms steps (60.1 ms, 64.0 ms, 67.9 ms, 72.0 ms)": the
/// spikes a timer's ticks make inside one coarse mode, said once instead of as modes.
fn mode_notes(report: &ModeReport) -> Vec<String> {
    report
        .fine_structure
        .iter()
        .filter_map(|fine| {
            let mode = report.modes.get(fine.mode)?;
            let spikes: Vec<String> = fine.spikes.iter().map(|spike| duration_ns(spike.value)).collect();
            Some(match fine.step {
                Some(step) => format!(
                    "the {} mode is quantized in {} steps ({})",
                    duration_ns(mode.value),
                    duration_ns(step),
                    spikes.join(", ")
                ),
                None => format!("the {} mode has spikes at {}", duration_ns(mode.value), spikes.join(", ")),
            })
        })
        .collect()
}

/// The Nagle/delayed-ACK signature (see [`DelayedAck`]), or `None`.
fn delayed_ack(responses: &[&RequestRecord]) -> Option<DelayedAck> {
    let (reused, new): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
        responses.iter().copied().partition(|record| record.reused);
    let mut transfers: Vec<u64> = reused.iter().filter_map(|record| record.phases.transfer_ns).collect();
    if transfers.len() < DELAYED_ACK_MIN_REUSED || transfers.len() < reused.len() {
        return None;
    }
    let median_ns = median(&mut transfers)?;
    if !(DELAYED_ACK_BAND_NS.0..=DELAYED_ACK_BAND_NS.1).contains(&median_ns) {
        return None;
    }
    let mut bodies: Vec<u64> = reused.iter().map(|record| record.body_bytes).collect();
    if median(&mut bodies).unwrap_or(0) > DELAYED_ACK_MAX_BODY_BYTES {
        return None;
    }
    let (low, high) = (median_ns as f64 * DELAYED_ACK_SPREAD.0, median_ns as f64 * DELAYED_ACK_SPREAD.1);
    let delayed: Vec<u64> =
        transfers.iter().copied().filter(|&transfer| (low..=high).contains(&(transfer as f64))).collect();
    if (delayed.len() as f64) < DELAYED_ACK_SHARE * transfers.len() as f64 {
        return None;
    }
    let mut fresh: Vec<u64> = new.iter().filter_map(|record| record.phases.transfer_ns).collect();
    let new_connection_transfer_median_ns = median(&mut fresh);
    // New connections start in quick-ACK mode: if they paid the same, it is not this.
    if new_connection_transfer_median_ns.is_some_and(|fresh| fresh as f64 > low) {
        return None;
    }
    Some(DelayedAck {
        reused_responses: transfers.len() as u64,
        delayed_responses: delayed.len() as u64,
        transfer_median_ns: median_ns,
        transfer_min_ns: delayed.iter().copied().min().unwrap_or(median_ns),
        transfer_max_ns: delayed.iter().copied().max().unwrap_or(median_ns),
        new_connection_transfer_median_ns,
    })
}

fn delayed_ack_note(found: &DelayedAck) -> String {
    let who = if found.delayed_responses == found.reused_responses {
        format!("every request on a reused connection ({} of {})", found.delayed_responses, found.reused_responses)
    } else {
        format!("{} of {} requests on reused connections", found.delayed_responses, found.reused_responses)
    };
    let against = found
        .new_connection_transfer_median_ns
        .map(|fresh| format!(" against {} on new connections", duration_ns(fresh as f64)))
        .unwrap_or_default();
    format!(
        "{who} spent {}–{} in transfer (median {}){against}: the Nagle/delayed-ACK signature. The server \
         writes its response in more than one small piece without TCP_NODELAY; the later piece waits for \
         this client's delayed ACK of the first (40 ms at least on Linux). Fix it in the server: one write \
         per response (writev, or TCP_CORK), or TCP_NODELAY",
        duration_ns(found.transfer_min_ns as f64),
        duration_ns(found.transfer_max_ns as f64),
        duration_ns(found.transfer_median_ns as f64),
    )
}

fn histogram(totals: &[u64], bins_per_decade: u32) -> Vec<HistogramRow> {
    let per_decade = f64::from(bins_per_decade.max(1));
    let bin_of = |value: u64| ((value.max(1) as f64).log10() * per_decade).floor() as i64;
    let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
    for &total in totals {
        *counts.entry(bin_of(total)).or_default() += 1;
    }
    let (Some((&first, _)), Some((&last, _))) = (counts.first_key_value(), counts.last_key_value()) else {
        return Vec::new();
    };
    let edge = |bin: i64| 10f64.powf(bin as f64 / per_decade).round() as u64;
    (first..=last)
        .map(|bin| HistogramRow {
            low_ns: edge(bin),
            high_ns: edge(bin + 1),
            count: counts.get(&bin).copied().unwrap_or(0),
        })
        .collect()
}

fn timeline(records: &[RequestRecord], first_send: u64, span_ns: u64, columns: usize) -> Vec<TimelineCell> {
    if records.is_empty() || columns == 0 {
        return Vec::new();
    }
    let columns = columns.min(records.len());
    // Whole nanoseconds, rounded up so the last send falls inside the last column.
    let width_ns = span_ns.div_ceil(columns as u64).max(1);
    let mut cells: Vec<(u64, u64, Vec<u64>)> = vec![(0, 0, Vec::new()); columns];
    for record in records {
        let offset = record.sent_unix_ns.saturating_sub(first_send);
        let column = ((offset / width_ns) as usize).min(columns - 1);
        let cell = &mut cells[column];
        cell.0 += 1;
        if record.has_response() {
            cell.2.push(record.total_ns);
        } else {
            cell.1 += 1;
        }
    }
    cells
        .into_iter()
        .enumerate()
        .map(|(column, (requests, errors, mut totals))| TimelineCell {
            offset_ns: column as u64 * width_ns,
            width_ns,
            requests,
            errors,
            median_ns: median(&mut totals),
            max_ns: totals.iter().max().copied(),
        })
        .collect()
}

fn median(values: &mut [u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    Some(values[(values.len() - 1) / 2])
}

fn quantile_sorted(sorted: &[u64], q: f64) -> u64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(index).copied().unwrap_or(0)
}

/// A phase's or substep's median, p99, and how often it was slow (longer than twice its
/// median plus 1 ms).
struct Spread {
    median_ns: u64,
    p99_ns: u64,
    slow_threshold_ns: u64,
    slow_probability: f64,
}

impl Spread {
    /// `values` is sorted in place; it must not be empty.
    fn of(values: &mut [u64]) -> Spread {
        values.sort_unstable();
        let median_ns = quantile_sorted(values, 0.5);
        let slow_threshold_ns = median_ns.saturating_mul(2).saturating_add(1_000_000);
        let slow = values.len() - values.partition_point(|&value| value <= slow_threshold_ns);
        Spread {
            median_ns,
            p99_ns: quantile_sorted(values, 0.99),
            slow_threshold_ns,
            slow_probability: slow as f64 / values.len().max(1) as f64,
        }
    }
}

fn phases(responses: &[&RequestRecord]) -> Vec<PhaseSummary> {
    let mut summaries = Vec::new();
    for (index, name) in PHASE_NAMES.iter().enumerate() {
        let mut values: Vec<u64> = responses.iter().filter_map(|record| record.phases.values()[index]).collect();
        if values.is_empty() {
            continue;
        }
        let spread = Spread::of(&mut values);
        summaries.push(PhaseSummary {
            name,
            count: values.len() as u64,
            median_ns: spread.median_ns,
            p99_ns: spread.p99_ns,
            slow_threshold_ns: spread.slow_threshold_ns,
            slow_probability: spread.slow_probability,
        });
    }
    summaries
}

/// The distinct substep names with a duration, in first-seen order, at most
/// [`MAX_REPORT_SUBSTEPS`]; and how many more there were.
fn substep_names(responses: &[&RequestRecord]) -> (Vec<(String, Option<String>)>, u64) {
    let mut names: Vec<(String, Option<String>)> = Vec::new();
    let mut more: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for step in responses.iter().flat_map(|record| &record.server_timing).filter(|step| step.dur_ns.is_some()) {
        if names.iter().any(|(name, _)| *name == step.name) {
            continue;
        }
        if names.len() < MAX_REPORT_SUBSTEPS {
            names.push((step.name.clone(), step.desc.clone()));
        } else if more.len() < 100_000 {
            more.insert(&step.name);
        }
    }
    (names, more.len() as u64)
}

fn substeps(responses: &[&RequestRecord], names: &[(String, Option<String>)]) -> Vec<SubstepSummary> {
    let mut summaries = Vec::new();
    for (name, desc) in names {
        let mut values: Vec<u64> = responses.iter().filter_map(|record| record.substep_ns(name)).collect();
        if values.is_empty() {
            continue;
        }
        let spread = Spread::of(&mut values);
        summaries.push(SubstepSummary {
            name: server_timing::report_name(name),
            desc: desc.clone(),
            count: values.len() as u64,
            median_ns: spread.median_ns,
            p99_ns: spread.p99_ns,
            slow_threshold_ns: spread.slow_threshold_ns,
            slow_probability: spread.slow_probability,
        });
    }
    summaries
}

/// For each mode after the fastest: which phase's median grew the most. A phase that did
/// not happen in a request (no connect on a reused connection) counts as zero there, so a
/// mode made of new connections is attributed to `connect` or `tls`.
///
/// Then, among the server's substeps (a substep missing from a response counts as zero there,
/// as a phase does), the one whose median grew most, named when it grew by at least
/// [`SUBSTEP_CARRIER_SHARE`] of the mode's extra time. Substeps are not candidates for `phase`:
/// they happen inside `wait`, so they name what in the server the `wait` was spent on.
fn attribute(
    responses: &[&RequestRecord],
    modes: &ModeReport,
    substep_names: &[(String, Option<String>)],
) -> Vec<ModeAttribution> {
    let Some(fastest) = modes.modes.first() else {
        return Vec::new();
    };
    let in_mode = |low: f64, high: f64| -> Vec<&RequestRecord> {
        responses
            .iter()
            .copied()
            .filter(|record| (record.total_ns as f64) >= low && (record.total_ns as f64) <= high)
            .collect()
    };
    let phase_medians = |members: &[&RequestRecord]| -> ([u64; PHASE_NAMES.len()], u64) {
        let mut medians = [0u64; PHASE_NAMES.len()];
        for (index, slot) in medians.iter_mut().enumerate() {
            let mut values: Vec<u64> =
                members.iter().map(|record| record.phases.values()[index].unwrap_or(0)).collect();
            *slot = median(&mut values).unwrap_or(0);
        }
        let mut totals: Vec<u64> = members.iter().map(|record| record.total_ns).collect();
        (medians, median(&mut totals).unwrap_or(0))
    };
    let substep_medians = |members: &[&RequestRecord]| -> Vec<u64> {
        substep_names
            .iter()
            .map(|(name, _)| {
                let mut values: Vec<u64> = members.iter().map(|record| record.substep_ns(name).unwrap_or(0)).collect();
                median(&mut values).unwrap_or(0)
            })
            .collect()
    };
    let baseline_members = in_mode(fastest.low, fastest.high);
    if baseline_members.is_empty() {
        return Vec::new();
    }
    let (baseline, baseline_total) = phase_medians(&baseline_members);
    let baseline_substeps = substep_medians(&baseline_members);
    let mut out = Vec::new();
    for mode in modes.modes.iter().skip(1) {
        let members = in_mode(mode.low, mode.high);
        if members.is_empty() {
            continue;
        }
        let (medians, total) = phase_medians(&members);
        let extra_ns = total as f64 - baseline_total as f64;
        let Some((index, growth)) = medians
            .iter()
            .zip(baseline.iter())
            .map(|(&here, &base)| here as f64 - base as f64)
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            continue;
        };
        let here_substeps = substep_medians(&members);
        let carrier = here_substeps
            .iter()
            .zip(&baseline_substeps)
            .map(|(&here, &base)| here as f64 - base as f64)
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|&(_, growth)| extra_ns > 0.0 && growth > 0.0 && growth >= SUBSTEP_CARRIER_SHARE * extra_ns);
        out.push(ModeAttribution {
            mode_ns: mode.value,
            requests: members.len() as u64,
            extra_ns,
            phase: PHASE_NAMES[index],
            phase_median_ns: medians[index],
            baseline_phase_median_ns: baseline[index],
            share: if extra_ns > 0.0 { growth / extra_ns } else { 0.0 },
            substep: carrier.map(|(at, _)| server_timing::report_name(&substep_names[at].0)),
            substep_median_ns: carrier.map(|(at, _)| here_substeps[at]),
            baseline_substep_median_ns: carrier.map(|(at, _)| baseline_substeps[at]),
            substep_share: carrier.map(|(_, growth)| growth / extra_ns),
        });
    }
    out
}

/// The report for people. `title` is the first line (the URL or the files analyzed).
pub fn render_text(report: &Report, title: &str) -> String {
    let mut out = String::new();
    let failed = report.requests - report.ok;
    let _ = writeln!(
        out,
        "{title}\n  {} requests in {:.2} s ({:.1}/s): {} ok, {} failed; {} connections opened{}",
        report.requests,
        report.span_seconds,
        report.requests_per_second,
        report.ok,
        failed,
        report.connections,
        if report.runs.len() > 1 { format!("; {} runs merged", report.runs.len()) } else { String::new() }
    );
    if report.tls_verified == Some(false) {
        let _ = writeln!(out, "  TLS: certificates NOT verified (insecure): the server's identity was not checked");
    }
    if let Some(selection) = &report.selection {
        let _ = writeln!(
            out,
            "  matched {} of {} requests ({}); the report is over the matches only",
            selection.matched,
            selection.of,
            selection.filters.join(" ")
        );
    }
    let Some(latency) = &report.latency else {
        let _ = writeln!(out, "\nno complete responses: no latency to report");
        render_errors(&mut out, report);
        return out;
    };
    let _ = writeln!(out, "\nlatency of {} responses (requests without a response excluded)", report.responses);
    let mut line = String::from(" ");
    for percentile in &latency.percentiles {
        let _ = write!(line, " {} {}", percentile.label, duration_ns(percentile.value_ns as f64));
    }
    let _ =
        writeln!(out, "{line}   (min {}, mean {})", duration_ns(latency.min_ns as f64), duration_ns(latency.mean_ns));
    let _ = writeln!(out, "\nmodes: {}", report.modes_summary);
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    render_histogram(&mut out, report);
    render_timeline(&mut out, report);
    let title = if report.substeps.is_empty() { "phases" } else { "phases, then the server's own (Server-Timing)" };
    let _ = writeln!(out, "\n{title} (slow = longer than 2 × median + 1 ms)");
    let rows = report
        .phases
        .iter()
        .map(|phase| (phase.name, phase.count, phase.median_ns, phase.p99_ns, phase.slow_probability))
        .chain(
            report
                .substeps
                .iter()
                .map(|step| (step.name.as_str(), step.count, step.median_ns, step.p99_ns, step.slow_probability)),
        );
    let width = report.substeps.iter().map(|step| step.name.chars().count()).max().unwrap_or(0).max(9);
    let _ = writeln!(out, "  {:<width$} {:>9} {:>10} {:>10} {:>8}", "phase", "requests", "median", "p99", "P(slow)");
    for (name, count, median_ns, p99_ns, slow_probability) in rows {
        let _ = writeln!(
            out,
            "  {:<width$} {:>9} {:>10} {:>10} {:>7.1}%",
            name,
            count,
            duration_ns(median_ns as f64),
            duration_ns(p99_ns as f64),
            slow_probability * 100.0
        );
    }
    if !report.attribution.is_empty() {
        let _ = writeln!(out, "\nwhat makes the slower modes slow (against the fastest mode)");
        for blame in &report.attribution {
            let _ = write!(
                out,
                "  {} ({} requests, +{}): {} {} → {} ({:.0} % of the difference)",
                duration_ns(blame.mode_ns),
                blame.requests,
                duration_ns(blame.extra_ns.max(0.0)),
                blame.phase,
                duration_ns(blame.baseline_phase_median_ns as f64),
                duration_ns(blame.phase_median_ns as f64),
                blame.share * 100.0
            );
            if let (Some(name), Some(here), Some(base), Some(share)) =
                (&blame.substep, blame.substep_median_ns, blame.baseline_substep_median_ns, blame.substep_share)
            {
                let _ = write!(
                    out,
                    "; in the server: {name} {} → {} ({:.0} %)",
                    duration_ns(base as f64),
                    duration_ns(here as f64),
                    share * 100.0
                );
            }
            let _ = writeln!(out);
        }
    }
    render_errors(&mut out, report);
    out
}

fn render_histogram(out: &mut String, report: &Report) {
    const BAR: usize = 40;
    let most = report.histogram.iter().map(|row| row.count).max().unwrap_or(0).max(1);
    let _ = writeln!(out, "\nhistogram (log scale)");
    for row in &report.histogram {
        let width = ((row.count as f64 / most as f64) * BAR as f64).round() as usize;
        let width = if row.count > 0 { width.max(1) } else { 0 };
        let _ = writeln!(
            out,
            "  {:>9} – {:<9} {:<BAR$} {:>7} {:>5.1}%",
            duration_ns(row.low_ns as f64),
            duration_ns(row.high_ns as f64),
            "█".repeat(width),
            row.count,
            row.count as f64 * 100.0 / report.responses.max(1) as f64
        );
    }
}

fn render_timeline(out: &mut String, report: &Report) {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let medians: Vec<u64> = report.timeline.iter().filter_map(|cell| cell.median_ns).collect();
    let (Some(&low), Some(&high)) = (medians.iter().min(), medians.iter().max()) else {
        return;
    };
    let (low, high) = ((low.max(1) as f64).ln(), (high.max(1) as f64).ln());
    let strip: String = report
        .timeline
        .iter()
        .map(|cell| match cell.median_ns {
            None if cell.errors > 0 => 'x',
            None => ' ',
            Some(median) => {
                let position = if high > low { ((median.max(1) as f64).ln() - low) / (high - low) } else { 0.0 };
                LEVELS[((position * 7.0).round() as usize).min(7)]
            }
        })
        .collect();
    let width = report.timeline.first().map_or(0.0, |cell| cell.width_ns as f64 / 1e9);
    let _ = writeln!(
        out,
        "\nover time ({:.3} s per column; height: median on a log scale from {} to {}; x: only errors)\n  |{strip}|",
        width,
        duration_ns(low.exp()),
        duration_ns(high.exp())
    );
}

fn render_errors(out: &mut String, report: &Report) {
    if report.errors.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nerrors by class");
    for (class, count) in &report.errors {
        let example = report.error_examples.get(class).map_or("", String::as_str);
        let _ = writeln!(out, "  {class:<12} {count:>7}  {example}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorClass, Phases};

    fn record(seq: u64, wait_ms: u64, transfer_ms: u64, error: Option<ErrorClass>) -> RequestRecord {
        let ms = 1_000_000;
        let phases = Phases {
            queue_ns: None,
            dns_ns: None,
            connect_ns: None,
            tls_ns: None,
            upgrade_ns: None,
            write_ns: Some(10_000),
            wait_ns: Some(wait_ms * ms + seq * 1000),
            transfer_ns: Some(transfer_ms * ms),
        };
        let response = error.is_none_or(ErrorClass::has_response);
        RequestRecord {
            run: "r".into(),
            seq,
            burst: None,
            sent_unix_ns: 1_000_000_000 + seq * 100 * ms,
            total_ns: 10_000 + (wait_ms + transfer_ms) * ms + seq * 1000,
            phases,
            reused: seq > 0,
            tls_verified: None,
            status: response.then_some(200),
            body_bytes: 0,
            error,
            error_detail: error.map(|class| format!("{} happened", class.name())),
            url: None,
            server_timing: Vec::new(),
            server_timing_dropped: 0,
        }
    }

    #[test]
    fn a_slow_transfer_mode_is_blamed_on_transfer() {
        // 40 fast requests (5 ms wait), 20 with a 40 ms transfer on top, 3 timeouts.
        let mut records: Vec<RequestRecord> = (0..40).map(|seq| record(seq, 5, 0, None)).collect();
        records.extend((40..60).map(|seq| record(seq, 5, 40, None)));
        records.extend((60..63).map(|seq| record(seq, 0, 0, Some(ErrorClass::Timeout))));
        let report = build(&records, &ReportConfig::default());
        assert_eq!((report.requests, report.responses, report.ok), (63, 60, 60));
        assert_eq!(report.errors.get("timeout"), Some(&3));
        assert_eq!(report.modes.as_ref().map(|modes| modes.modes.len()), Some(2), "{}", report.modes_summary);
        assert!(report.modes_summary.starts_with("2 modes: 5."), "{}", report.modes_summary);
        assert_eq!(report.attribution.len(), 1);
        assert_eq!(report.attribution[0].phase, "transfer");
        assert!(report.attribution[0].share > 0.95, "{:?}", report.attribution);
        let transfer = report.phases.iter().find(|phase| phase.name == "transfer").expect("transfer");
        assert!((transfer.slow_probability - 20.0 / 60.0).abs() < 1e-9, "{transfer:?}");
        let latency = report.latency.as_ref().expect("latency");
        assert_eq!(latency.percentiles.last().map(|p| p.value_ns), Some(latency.max_ns));
        let p50 = latency.percentiles[0].value_ns as f64;
        assert!((5.0e6..5.2e6).contains(&p50), "p50 {p50}");
        assert_eq!(report.histogram.iter().map(|row| row.count).sum::<u64>(), 60);
        assert_eq!(report.timeline.iter().map(|cell| cell.requests).sum::<u64>(), 63);
        let text = render_text(&report, "t");
        assert!(text.contains("transfer") && text.contains("timeout") && text.contains("timeout happened"), "{text}");
    }

    #[test]
    fn no_responses_is_a_report_not_a_panic() {
        let records = vec![record(0, 0, 0, Some(ErrorClass::Refused))];
        let report = build(&records, &ReportConfig::default());
        assert!(report.latency.is_none() && report.modes.is_none());
        assert!(render_text(&report, "t").contains("no complete responses"));
        assert!(build(&[], &ReportConfig::default()).timeline.is_empty());
    }

    #[test]
    fn a_run_without_one_success_says_so() {
        let refused: Vec<RequestRecord> = (0..3).map(|seq| record(seq, 0, 0, Some(ErrorClass::Refused))).collect();
        let report = build(&refused, &ReportConfig::default());
        assert_eq!(report.none_succeeded().as_deref(), Some("no request succeeded (3 sent): 3 refused"));
        // Complete responses that are all errors are no success either.
        let mut mixed: Vec<RequestRecord> = (0..4).map(|seq| record(seq, 1, 0, Some(ErrorClass::Http5xx))).collect();
        mixed.push(record(4, 0, 0, Some(ErrorClass::Timeout)));
        let report = build(&mixed, &ReportConfig::default());
        assert_eq!(report.responses, 4);
        assert_eq!(report.none_succeeded().as_deref(), Some("no request succeeded (5 sent): 4 http_5xx, 1 timeout"));
        mixed.push(record(5, 1, 0, None));
        assert_eq!(build(&mixed, &ReportConfig::default()).none_succeeded(), None);
        assert_eq!(build(&[], &ReportConfig::default()).none_succeeded().as_deref(), Some("no request finished"));
    }

    #[test]
    fn one_unverified_tls_record_marks_the_whole_report_unverified() {
        let with = |verified: &[Option<bool>]| {
            let records: Vec<RequestRecord> = verified
                .iter()
                .enumerate()
                .map(|(seq, &tls_verified)| RequestRecord { tls_verified, ..record(seq as u64, 5, 0, None) })
                .collect();
            build(&records, &ReportConfig::default())
        };
        assert_eq!(with(&[None, None]).tls_verified, None);
        assert_eq!(with(&[Some(true), None, Some(true)]).tls_verified, Some(true));
        let merged = with(&[Some(true), Some(false), Some(true)]);
        assert_eq!(merged.tls_verified, Some(false));
        assert!(render_text(&merged, "t").contains("certificates NOT verified"));
        assert!(!render_text(&with(&[Some(true)]), "t").contains("NOT verified"));
        let json = serde_json::to_value(&merged).expect("json");
        assert_eq!(json["tls_verified"], serde_json::Value::Bool(false));
    }

    /// A reused-connection response that waited `wait_us` and transferred for `transfer_us`.
    fn timed(seq: u64, wait_us: u64, transfer_us: u64, reused: bool) -> RequestRecord {
        let mut record = record(seq, 0, 0, None);
        record.phases.wait_ns = Some(wait_us * 1000);
        record.phases.transfer_ns = Some(transfer_us * 1000);
        record.phases.connect_ns = (!reused).then_some(50_000);
        record.total_ns = 10_000 + (wait_us + transfer_us) * 1000;
        record.reused = reused;
        record
    }

    /// The issue's run: 300 requests whose server waits end on 4 ms timer ticks. The 64 ms
    /// lump lands on 60, 64, 68 and 72 ms; by count alone that was "6 modes: 59.9, 63.9, 68.2,
    /// 72.0, 132, 224 ms" where the histogram shows three.
    fn tick_quantized_run() -> Vec<RequestRecord> {
        let mut totals_us: Vec<u64> = Vec::new();
        for (tick_ms, count) in [(60u64, 40u64), (64, 70), (68, 55), (72, 15), (132, 90), (224, 30)] {
            // Up to ±0.3 ms of jitter around each tick, spread deterministically.
            totals_us.extend((0..count).map(|index| tick_ms * 1000 - 300 + (index * 7919) % 600));
        }
        totals_us.iter().enumerate().map(|(seq, &total)| timed(seq as u64, total, 20, seq > 0)).collect()
    }

    #[test]
    fn timer_ticks_inside_a_mode_are_a_note_not_modes() {
        let records = tick_quantized_run();
        let report = build(&records, &ReportConfig::default());
        let modes = report.modes.as_ref().expect("modes");
        let values: Vec<f64> = modes.modes.iter().map(|mode| mode.value / 1e6).collect();
        assert_eq!(values.len(), 3, "{}", report.modes_summary);
        for (found, want) in values.iter().zip([64.0, 132.0, 224.0]) {
            assert!((found / want - 1.0).abs() < 0.05, "{}", report.modes_summary);
        }
        assert!(report.modes_summary.starts_with("3 modes: 6"), "{}", report.modes_summary);
        assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
        let note = &report.notes[0];
        assert!(note.starts_with("the 6") && note.contains(" mode is quantized in 4.0"), "{note}");
        assert!(note.contains("60.0 ms") && note.contains("72.0 ms"), "{note}");
        let text = render_text(&report, "t");
        assert!(text.contains(&format!("modes: {}\nnote: {note}\n", report.modes_summary)), "{text}");
        // The slower modes are compared against the whole coarse mode, not its first spike.
        assert_eq!(report.attribution.len(), 2, "{:?}", report.attribution);
        let baseline = report.attribution[0].baseline_phase_median_ns;
        assert!((63_000_000..66_000_000).contains(&baseline), "{:?}", report.attribution);
    }

    #[test]
    fn every_reused_request_paying_40_ms_in_transfer_is_named() {
        // One new connection (quick ACK: no wait), then 30 reused ones paying the delayed ACK,
        // on 4 ms ticks.
        let mut records = vec![timed(0, 150, 40, false)];
        records.extend((1..31).map(|seq| timed(seq, 60, 40_000 + (seq % 4) * 4_000, true)));
        let report = build(&records, &ReportConfig::default());
        let found = report.delayed_ack.as_ref().unwrap_or_else(|| panic!("{}", render_text(&report, "t")));
        assert_eq!((found.reused_responses, found.delayed_responses), (30, 30));
        assert_eq!((found.transfer_min_ns, found.transfer_max_ns), (40_000_000, 52_000_000));
        assert_eq!(found.new_connection_transfer_median_ns, Some(40_000));
        let note = report.notes.iter().find(|note| note.contains("Nagle/delayed-ACK")).expect("a note");
        assert!(note.starts_with("every request on a reused connection (30 of 30) spent 40.0 ms–52.0 ms"), "{note}");
        assert!(note.contains("against 40.0 µs on new connections") && note.contains("TCP_NODELAY"), "{note}");
        assert!(render_text(&report, "t").contains(note.as_str()));

        // Not the signature: a fast transfer; too few reused requests; new connections paying
        // the same; a large body; a transfer that varies.
        let fast: Vec<RequestRecord> = (0..31).map(|seq| timed(seq, 60, 900, seq > 0)).collect();
        let few: Vec<RequestRecord> = records[..4].to_vec();
        let fresh_too: Vec<RequestRecord> = (0..31).map(|seq| timed(seq, 60, 40_000, seq % 2 == 0)).collect();
        let mut large = records.clone();
        large.iter_mut().for_each(|record| record.body_bytes = 1 << 20);
        let varied: Vec<RequestRecord> = (0..31).map(|seq| timed(seq, 60, 5_000 + seq * 3_000, seq > 0)).collect();
        for (name, records) in
            [("fast", fast), ("few", few), ("fresh", fresh_too), ("large", large), ("varied", varied)]
        {
            let report = build(&records, &ReportConfig::default());
            assert_eq!(report.delayed_ack, None, "{name}");
            assert!(report.notes.iter().all(|note| !note.contains("Nagle")), "{name}: {:?}", report.notes);
        }
    }

    /// Two requests at the maximum, 10.549 ms: HDR's bucket for it reaches 10.551 ms, which
    /// printed as "p99.9 10.6 ms max 10.5 ms".
    #[test]
    fn percentiles_never_exceed_the_max() {
        let mut records: Vec<RequestRecord> = (0..998).map(|seq| timed(seq, 1_000, 0, seq > 0)).collect();
        records.extend((998..1000).map(|seq| timed(seq, 10_539, 0, true)));
        let report = build(&records, &ReportConfig::default());
        let latency = report.latency.as_ref().expect("latency");
        assert_eq!(latency.max_ns, 10_549_000);
        for percentile in &latency.percentiles {
            assert!(percentile.value_ns <= latency.max_ns && percentile.value_ns >= latency.min_ns, "{percentile:?}");
        }
        let text = render_text(&report, "t");
        assert!(text.contains("p99.9 10.5 ms max 10.5 ms"), "{text}");
    }

    /// Numbers in `value` whose key is neither a known count, share or ratio nor ends with
    /// `suffix`: durations without their unit in their name. Children of `maps` (keyed by
    /// error class) are counts.
    fn unitless_numbers(value: &serde_json::Value, path: &str, not_durations: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        match value {
            serde_json::Value::Object(fields) => {
                for (key, child) in fields {
                    let here = format!("{path}.{key}");
                    let numeric = child.is_number()
                        || child
                            .as_array()
                            .is_some_and(|items| items.first().is_some_and(serde_json::Value::is_number));
                    if numeric && !key.ends_with("_ns") && !not_durations.contains(&key.as_str()) {
                        found.push(here.clone());
                    }
                    if key != "errors" {
                        found.extend(unitless_numbers(child, &here, not_durations));
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    found.extend(unitless_numbers(item, &format!("{path}[{index}]"), not_durations));
                }
            }
            _ => {}
        }
        found
    }

    /// Every duration in the JSON is named `<what>_ns`: one unit for the whole document, the
    /// one the recorded requests (`--out`) use.
    #[test]
    fn every_duration_in_the_json_is_named_in_nanoseconds() {
        let mut records: Vec<RequestRecord> = tick_quantized_run()
            .into_iter()
            .map(|record| {
                let db_ms = record.total_ns * 3 / 4_000_000;
                with_steps(record, &[("db", Some(db_ms)), ("miss", None)])
            })
            .collect();
        records.push(record(300, 0, 0, Some(ErrorClass::Refused)));
        records.extend((301..331).map(|seq| timed(seq, 60, 40_000 + (seq % 4) * 4_000, true)));
        let mut report = build(&records, &ReportConfig::default());
        assert!(report.delayed_ack.is_none(), "not every reused request paid here");
        assert!(report.attribution.iter().any(|blame| blame.substep.is_some()), "{:?}", report.attribution);
        report.selection = Some(Selection { matched: 3, of: 4, filters: vec!["--slow 1ms".into()] });
        let json = serde_json::to_value(&report).expect("serializes");
        let not_durations = [
            "requests",
            "responses",
            "ok",
            "connections",
            "requests_per_second",
            "count",
            "fraction",
            "time_fraction",
            "quantile",
            "dip",
            "bandwidth_log",
            "lower",
            "upper",
            "multiple",
            "ratio",
            "mode",
            "errors",
            "slow_probability",
            "share",
            "reused_responses",
            "delayed_responses",
            "substep_share",
            "substeps_left_out",
            "server_timing_dropped",
            "matched",
            "of",
        ];
        assert_eq!(unitless_numbers(&json, "", &not_durations), Vec::<String>::new(), "{json:#}");
        // The renamed ones, by name.
        assert!(json["span_ns"].as_u64().is_some_and(|span| span > 0) && json.get("span_seconds").is_none());
        assert!(json["latency"]["percentiles"][0]["value_ns"].is_u64(), "{json:#}");
        let first_mode = &json["modes"]["modes"][0];
        let in_ms = |key: &str| first_mode[key].as_f64().map_or(0.0, |ns| ns / 1e6);
        assert!(in_ms("low_ns") < in_ms("value_ns") && in_ms("value_ns") < in_ms("high_ns"), "{first_mode}");
        assert!((60.0..70.0).contains(&in_ms("value_ns")) && in_ms("total_ns") > 1000.0, "{first_mode}");
        assert!(json["modes"]["fine_structure"][0]["step_ns"].as_f64().is_some_and(|step| (step - 4e6).abs() < 0.1e6));
        assert!(json["timeline"][0]["width_ns"].as_u64().is_some_and(|width| width > 0));
        assert!(json["notes"][0].as_str().is_some_and(|note| note.contains("quantized")), "{json:#}");
        // With the signature, its figures too.
        let mut nagle = vec![timed(0, 150, 40, false)];
        nagle.extend((1..31).map(|seq| timed(seq, 60, 40_000 + (seq % 4) * 4_000, true)));
        let json = serde_json::to_value(build(&nagle, &ReportConfig::default())).expect("serializes");
        assert_eq!(json["delayed_ack"]["transfer_median_ns"], 44_000_000, "{json:#}");
        assert_eq!(unitless_numbers(&json, "", &not_durations), Vec::<String>::new(), "{json:#}");
    }

    fn with_steps(mut record: RequestRecord, steps: &[(&str, Option<u64>)]) -> RequestRecord {
        record.server_timing = steps
            .iter()
            .map(|&(name, dur_ms)| crate::Substep {
                name: name.to_string(),
                dur_ns: dur_ms.map(|ms| ms * 1_000_000),
                desc: None,
            })
            .collect();
        record
    }

    #[test]
    fn the_substep_that_grew_carries_the_slow_mode_and_no_other() {
        // 40 requests: db 2 ms, render 1 ms inside a 5 ms wait; every 5th renders 40 ms
        // longer (and waits as much longer). One response repeats db (two queries: summed).
        let records: Vec<RequestRecord> = (0..40)
            .map(|seq| {
                let slow = seq % 5 == 4;
                let record = record(seq, if slow { 45 } else { 5 }, 0, None);
                let render = if slow { 41 } else { 1 };
                let mut steps = vec![("db", Some(2)), ("render", Some(render)), ("auth", Some(1)), ("cache", None)];
                if seq == 0 {
                    steps.push(("db", Some(4)));
                }
                with_steps(record, &steps)
            })
            .collect();
        let report = build(&records, &ReportConfig::default());
        let names: Vec<&str> = report.substeps.iter().map(|step| step.name.as_str()).collect();
        assert_eq!(names, ["server:db", "server:render", "server:auth"]);
        let render = &report.substeps[1];
        assert_eq!((render.count, render.median_ns, render.p99_ns), (40, 1_000_000, 41_000_000));
        assert!((render.slow_probability - 0.2).abs() < 1e-9);
        assert_eq!(report.substeps[0].p99_ns, 6_000_000, "a repeated name is summed");
        assert_eq!(report.substeps[0].slow_probability, 0.025);
        assert_eq!(report.attribution.len(), 1, "{:?}", report.attribution);
        let blame = &report.attribution[0];
        assert_eq!((blame.phase, blame.substep.as_deref()), ("wait", Some("server:render")));
        assert_eq!((blame.baseline_substep_median_ns, blame.substep_median_ns), (Some(1_000_000), Some(41_000_000)));
        let text = render_text(&report, "t");
        assert!(text.contains("phases, then the server's own (Server-Timing)"), "{text}");
        assert!(text.contains("in the server: server:render 1.00 ms → 41.0 ms"), "{text}");
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["attribution"][0]["substep"], "server:render");
        assert_eq!(json["substeps"][1]["median_ns"], 1_000_000);

        // A slow mode the server did not report (a slow transfer): no substep is named.
        let transfer: Vec<RequestRecord> = (0..40)
            .map(|seq| with_steps(record(seq, 5, if seq % 5 == 4 { 40 } else { 0 }, None), &[("db", Some(2))]))
            .collect();
        let report = build(&transfer, &ReportConfig::default());
        assert_eq!(report.attribution.len(), 1);
        assert_eq!((report.attribution[0].phase, report.attribution[0].substep.as_deref()), ("transfer", None));
        // Without Server-Timing, the JSON is what it was.
        let plain = serde_json::to_value(build(&records[..0], &ReportConfig::default())).expect("json");
        assert!(plain.get("substeps").is_none() && plain.get("selection").is_none(), "{plain}");
    }

    #[test]
    fn substep_names_are_bounded_and_drops_are_told() {
        let records: Vec<RequestRecord> = (0..100)
            .map(|seq| {
                let mut record = with_steps(record(seq, 5, 0, None), &[(&format!("n{seq}"), Some(1))]);
                record.server_timing_dropped = 2;
                record
            })
            .collect();
        let report = build(&records, &ReportConfig::default());
        assert_eq!(report.substeps.len(), MAX_REPORT_SUBSTEPS);
        assert_eq!(report.substeps_left_out, 100 - MAX_REPORT_SUBSTEPS as u64);
        assert_eq!(report.server_timing_dropped, 200);
        assert!(report.notes.iter().any(|note| note.starts_with("200 Server-Timing metrics were not kept")));
        assert!(report.notes.iter().any(|note| note.starts_with("36 more Server-Timing names")));
    }
}
