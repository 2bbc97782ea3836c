//! Rollups: what the long-term tiers keep of many samples. One row per minute (or hour) with,
//! per series, the minimum, mean, maximum and last value of the samples behind it and their
//! count, so a coarser row folds finer ones exactly ([`Stat::merge`]) and a reader's bucket
//! mean stays the mean of the samples.
//!
//! Series are named: `host.cpu.user` (proctor-report's host series), `container.cpu`,
//! `container.memory`, and `group.NAME.SERIES` (its group series). Pure data.

use serde::Serialize;

/// One series over a row's span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    /// The value of the row's last sample that had one.
    pub last: f64,
    /// Values behind the row (a rate has none at a run's first sample).
    pub n: u32,
}

impl Stat {
    pub fn one(v: f64) -> Stat {
        Stat { min: v, mean: v, max: v, last: v, n: 1 }
    }

    /// Adds a later value.
    pub fn push(&mut self, v: f64) {
        self.merge(&Stat::one(v));
    }

    /// Folds in `later`, which covers the time after `self`.
    pub fn merge(&mut self, later: &Stat) {
        if later.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *later;
            return;
        }
        let n = self.n.saturating_add(later.n);
        self.mean = (self.mean * f64::from(self.n) + later.mean * f64::from(later.n)) / f64::from(n);
        self.min = self.min.min(later.min);
        self.max = self.max.max(later.max);
        self.last = later.last;
        self.n = n;
    }
}

/// One row of a tier: `[start, start + span)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RollupRow {
    pub start_unix_s: u64,
    pub span_s: u32,
    /// Samples behind the row.
    pub samples: u32,
    /// Aligned with the block's names; `None` where the series had no value in the span.
    pub values: Vec<Option<Stat>>,
}

/// Consecutive rows of one tier sharing one list of series names: the unit a tier stores
/// (an hour of minutes, a day of hours).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RollupBlock {
    pub span_s: u32,
    pub names: Vec<String>,
    /// In time order.
    pub rows: Vec<RollupRow>,
}

impl RollupBlock {
    /// The time after the block's last row, or its start when it has none.
    pub fn end_unix_s(&self) -> Option<u64> {
        self.rows.last().map(|r| r.start_unix_s + u64::from(r.span_s))
    }
}
