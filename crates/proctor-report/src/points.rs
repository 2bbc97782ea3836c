//! What a fold gives for each series, host or group: its unit, its buckets, its headline, and
//! the accumulator that makes both. Its own module so that the host fold ([`crate::range`]) and
//! the group fold ([`crate::groups`]) share them without using each other.

use serde::Serialize;

/// What a series measures, for axis labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Percent of all CPUs' time (CPU shares) or of wall time (PSI, disk busy).
    Percent,
    Bytes,
    BytesPerSecond,
    /// Things: processes, threads (group series).
    Count,
    /// A plain number (a load average).
    Number,
    /// Events per second: page faults (group series).
    PerSecond,
}

impl Unit {
    /// A catalog unit as the report's plots and tables write it.
    pub fn of(unit: proctor_units::units::Unit) -> Unit {
        use proctor_units::units::Unit as U;
        match unit {
            U::Percent => Unit::Percent,
            U::Bytes => Unit::Bytes,
            U::BytesPerSec => Unit::BytesPerSecond,
            U::PerSec => Unit::PerSecond,
            U::Count => Unit::Count,
            _ => Unit::Number,
        }
    }
}

/// One bucket of a series: the mean and max of the values that fell into it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// Which bucket (0-based), so a plot can tell adjacent buckets from a gap.
    pub bucket: u32,
    /// The bucket's start and end, Unix ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub mean: f64,
    pub max: f64,
    /// Values that fell into the bucket.
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub name: &'static str,
    pub unit: Unit,
    pub description: &'static str,
    /// Non-empty buckets only, in time order.
    pub points: Vec<SeriesPoint>,
}

/// One series over the whole range: the mean and max of its per-sample values, whatever the
/// bucketing (every surface that states a range's figures states these).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    pub name: &'static str,
    pub unit: Unit,
    pub description: &'static str,
    pub mean: f64,
    pub max: f64,
    /// Per-sample values behind the mean and max.
    pub count: u32,
}

/// A bucket's values so far: their sum, max and count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Acc {
    pub(crate) sum: f64,
    pub(crate) max: f64,
    pub(crate) count: u32,
}

impl Acc {
    /// Adds `n` values whose mean is `mean` and max `max` (a sample's value: (v, v, 1); a
    /// rollup row's: its mean, max and sample count), so a bucket's mean stays the mean of
    /// the samples behind it.
    pub(crate) fn add(&mut self, mean: f64, max: f64, n: u32) {
        self.max = if self.count == 0 { max } else { self.max.max(max) };
        self.sum += mean * f64::from(n);
        self.count += n;
    }
}
