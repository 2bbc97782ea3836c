//! proctor-report: what `proctor report` says about a recorded time range, as data and as
//! pictures.
//!
//! - [`range`] folds the stored samples of a range, in order, into host series (rates derived
//!   only between consecutive samples of one recorder run, downsampled to a bounded number of
//!   buckets that keep each bucket's mean *and* max, so a one-second spike survives a day's
//!   plot) and the top processes by CPU seconds used inside the range and by resident memory
//!   (the few with the highest peak also over time, in the same buckets, for the plot).
//! - [`correlate`] lines request latencies (probe results, statsd timer flushes) up against
//!   those series: which requests were slow, the series' values in the intervals that held slow
//!   requests against the rest, and a Spearman rank correlation with the number of requests
//!   it rests on. It computes no p-values and claims none.
//! - [`plot`] lays both out as `proctor-plot` shapes (SVG or PNG): panels on one time axis.
//!
//! Pure: samples and points in, summaries and file bytes out. No I/O, no clock, no threads.
//! Reading the store, parsing times and writing files belong to the caller (`proctor-cli`
//! now; `proctor-agent` folds stored ranges with it for `/api/v1/report`), which is why this is a crate of its own
//! rather than CLI code. It is not part of `proctor-model` because the model turns one sample
//! (and the one before it) into a view, while this folds many and carries statistics and
//! drawing (`proctor-modes`, `proctor-plot`) that the model's users do not need.

pub mod correlate;
pub mod groups;
pub mod plot;
pub mod points;
pub mod range;

pub use correlate::{correlate, Correlation, CorrelationConfig, LatencyPoint, SeriesCorrelation, SlowRule};
pub use groups::{group_series_index, group_values, GroupSelect, GroupSummary, GROUP_SERIES};
pub use range::{
    host_values, series_index, summarize, ExitedByName, ExitedSummary, Headline, HostPoint, ProcessUsage, RangeBuilder,
    RangeConfig, RangeSummary, Series, SeriesPoint, Unit, SERIES,
};
