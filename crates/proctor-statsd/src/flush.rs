//! Flush arithmetic: shard windows in, the numbers every backend sends out.
//!
//! This is Etsy statsd's `process_metrics`, reproduced operation by operation so the doubles
//! come out bit-identical (sorted samples, running cumulative sums, `Math.round` of the
//! percentile index). It is pure: the timestamp and interval are passed in, nothing is sent.
//! Where Etsy would produce `NaN` (a `-100` percentile, a percentile above 100) it clamps the
//! index instead.

use serde::Serialize;

use crate::aggregate::{saturate, ShardWindow, TimerExact, TimerWindow};
use crate::jsnum::js_format;

/// Etsy's `histogram` config: the first entry whose `metric` is a substring of a timer's key
/// gives that timer's bins. A sample lands in the first bin whose upper bound exceeds it;
/// samples above the last finite bound are not counted unless the last bin is `inf`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramSpec {
    pub metric: String,
    pub bins: Vec<Bin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Bin {
    Below(f64),
    Inf,
}

impl Bin {
    fn name(self) -> String {
        match self {
            Bin::Inf => "bin_inf".to_owned(),
            Bin::Below(bound) => format!("bin_{}", js_format(bound).replacen('.', "_", 1)),
        }
    }

    fn contains(self, value: f64) -> bool {
        match self {
            Bin::Inf => true,
            Bin::Below(bound) => value < bound,
        }
    }
}

/// What shapes the numbers of a flush.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushConfig {
    pub interval_ms: u64,
    /// Etsy's `percentThreshold`; negative values are "top" percentiles.
    pub percent_thresholds: Vec<f64>,
    pub histograms: Vec<HistogramSpec>,
}

impl Default for FlushConfig {
    fn default() -> Self {
        FlushConfig { interval_ms: 10_000, percent_thresholds: vec![90.0], histograms: Vec::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterData {
    pub key: String,
    pub count: f64,
    pub rate_per_second: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimerData {
    pub key: String,
    /// Etsy's timer_data names (`std`, `upper`, …, `mean_90`) in Etsy's order.
    pub stats: Vec<(String, f64)>,
    /// `bin_…` names and counts, empty when no histogram matches.
    pub histogram: Vec<(String, f64)>,
    /// Percentiles, median and histogram come from a uniform sample of the window, not all of it.
    pub approximate: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GaugeData {
    pub key: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetData {
    pub key: String,
    pub count: f64,
    /// Members were dropped at the cap, so `count` is a lower bound.
    pub approximate: bool,
}

/// One flush, as every backend sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlushData {
    pub timestamp_seconds: u64,
    pub interval_ms: u64,
    pub counters: Vec<CounterData>,
    pub timers: Vec<TimerData>,
    pub gauges: Vec<GaugeData>,
    pub sets: Vec<SetData>,
    /// Etsy's `statsd_metrics.processing_time`: how long this computation took.
    pub processing_time_ms: f64,
}

impl FlushData {
    /// Etsy's `numStats`: one per key of any type.
    pub fn key_count(&self) -> usize {
        self.counters.len() + self.timers.len() + self.gauges.len() + self.sets.len()
    }
}

/// Computes a flush from shard windows. The windows' key sets are disjoint.
pub fn compute(windows: Vec<ShardWindow>, timestamp_seconds: u64, config: &FlushConfig) -> FlushData {
    let interval_seconds = config.interval_ms as f64 / 1000.0;
    let mut data = FlushData {
        timestamp_seconds,
        interval_ms: config.interval_ms,
        counters: Vec::new(),
        timers: Vec::new(),
        gauges: Vec::new(),
        sets: Vec::new(),
        processing_time_ms: 0.0,
    };
    for window in windows {
        for (key, count) in window.counters {
            let rate_per_second = saturate(count / interval_seconds);
            data.counters.push(CounterData { key: key.into(), count, rate_per_second });
        }
        for (key, timer) in window.timers {
            let timer_data = timer_stats(&key, timer, interval_seconds, config);
            data.timers.push(timer_data);
        }
        for (key, value) in window.gauges {
            data.gauges.push(GaugeData { key: key.into(), value });
        }
        for (key, count, approximate) in window.sets {
            data.sets.push(SetData { key: key.into(), count: count as f64, approximate });
        }
    }
    data
}

fn percentile_name(pct: f64) -> String {
    js_format(pct).replacen('.', "_", 1).replacen('-', "top", 1)
}

fn timer_stats(key: &str, timer: TimerWindow, interval_seconds: f64, config: &FlushConfig) -> TimerData {
    let TimerWindow { mut samples, count: weighted_count, overflow } = timer;
    let mut out = TimerData { key: key.to_owned(), stats: Vec::new(), histogram: Vec::new(), approximate: false };
    let count_ps = saturate(weighted_count / interval_seconds);
    if samples.is_empty() {
        out.stats.push(("count".to_owned(), weighted_count));
        out.stats.push(("count_ps".to_owned(), count_ps));
        return out;
    }
    samples.sort_by(f64::total_cmp);
    let kept = samples.len();
    // Running sums in sorted order, as Etsy builds them: the order of additions decides the
    // last bits of every sum and mean.
    let mut cumulative = Vec::with_capacity(kept);
    let mut cumulative_squares = Vec::with_capacity(kept);
    let mut sum = 0.0;
    let mut sum_squares = 0.0;
    for (index, value) in samples.iter().enumerate() {
        if index == 0 {
            sum = *value;
            // A finite sample can still square past f64::MAX (`2e200`).
            sum_squares = saturate(value * value);
        } else {
            sum = saturate(sum + value);
            sum_squares = saturate(sum_squares + value * value);
        }
        cumulative.push(sum);
        cumulative_squares.push(sum_squares);
    }
    let range_sum = |from: usize, to: usize, sums: &[f64]| -> f64 {
        // Sum of samples[from..to].
        let upto = sums[to - 1];
        if from == 0 {
            upto
        } else {
            upto - sums[from - 1]
        }
    };
    let (total, min, max) = match overflow {
        Some(exact) => (exact.seen as usize, exact.min, exact.max),
        None => (kept, samples[0], samples[kept - 1]),
    };
    // Scale from the kept sample to the whole window (1 when nothing overflowed).
    let scale = total as f64 / kept as f64;
    for pct in &config.percent_thresholds {
        let pct = *pct;
        let (mut in_threshold, mut boundary, mut pct_sum, mut pct_squares, mut mean) =
            (total, max, samples[0], cumulative_squares[0], samples[0]);
        if total > 1 {
            in_threshold = ((pct.abs() / 100.0 * total as f64).round() as usize).min(total);
            if in_threshold == 0 {
                continue;
            }
            // The same count of kept samples; equal to `in_threshold` unless overflowed.
            let kept_in = ((in_threshold as f64 / scale).round() as usize).clamp(1, kept);
            if pct > 0.0 {
                boundary = samples[kept_in - 1];
                pct_sum = range_sum(0, kept_in, &cumulative);
                pct_squares = range_sum(0, kept_in, &cumulative_squares);
            } else {
                boundary = samples[kept - kept_in];
                pct_sum = range_sum(kept - kept_in, kept, &cumulative);
                pct_squares = range_sum(kept - kept_in, kept, &cumulative_squares);
            }
            if overflow.is_some() {
                pct_sum = saturate(pct_sum * in_threshold as f64 / kept_in as f64);
                pct_squares = saturate(pct_squares * in_threshold as f64 / kept_in as f64);
            }
            mean = pct_sum / in_threshold as f64;
        }
        let name = percentile_name(pct);
        out.stats.push((format!("count_{name}"), in_threshold as f64));
        out.stats.push((format!("mean_{name}"), mean));
        let bound_name = if pct > 0.0 { "upper" } else { "lower" };
        out.stats.push((format!("{bound_name}_{name}"), boundary));
        out.stats.push((format!("sum_{name}"), pct_sum));
        out.stats.push((format!("sum_squares_{name}"), pct_squares));
    }
    let (sum, sum_squares, std) = match overflow {
        None => {
            let sum = cumulative[kept - 1];
            let mean = sum / kept as f64;
            let mut sum_of_diffs = 0.0;
            for value in &samples {
                sum_of_diffs += (value - mean) * (value - mean);
            }
            (sum, cumulative_squares[kept - 1], saturate((sum_of_diffs / kept as f64).sqrt()))
        }
        Some(TimerExact { seen, sum, sum_squares, .. }) => {
            let mean = sum / seen as f64;
            let variance = (sum_squares / seen as f64 - mean * mean).max(0.0);
            (sum, sum_squares, saturate(variance.sqrt()))
        }
    };
    let mid = kept / 2;
    let median = if kept % 2 == 1 {
        samples[mid]
    } else {
        // Etsy's `(a + b) / 2`, bit for bit, unless the sum overflows (two samples above
        // f64::MAX / 2): then halve first, which is the true midpoint rather than Infinity.
        let sum = samples[mid - 1] + samples[mid];
        if sum.is_finite() {
            sum / 2.0
        } else {
            samples[mid - 1] / 2.0 + samples[mid] / 2.0
        }
    };
    out.stats.push(("std".to_owned(), std));
    out.stats.push(("upper".to_owned(), max));
    out.stats.push(("lower".to_owned(), min));
    out.stats.push(("count".to_owned(), weighted_count));
    out.stats.push(("count_ps".to_owned(), count_ps));
    out.stats.push(("sum".to_owned(), sum));
    out.stats.push(("sum_squares".to_owned(), sum_squares));
    out.stats.push(("mean".to_owned(), saturate(sum / total as f64)));
    out.stats.push(("median".to_owned(), median));
    if let Some(spec) = config.histograms.iter().find(|spec| key.contains(spec.metric.as_str())) {
        let mut index = 0;
        for bin in &spec.bins {
            let mut frequency = 0usize;
            while index < kept && bin.contains(samples[index]) {
                frequency += 1;
                index += 1;
            }
            let frequency = if overflow.is_some() { (frequency as f64 * scale).round() } else { frequency as f64 };
            out.histogram.push((bin.name(), frequency));
        }
    }
    out.approximate = overflow.is_some();
    out
}

#[cfg(test)]
mod tests {
    use super::{compute, Bin, FlushConfig, HistogramSpec};
    use crate::aggregate::{ShardWindow, TimerWindow};

    fn timer(samples: &[f64], config: &FlushConfig) -> Vec<(String, f64)> {
        let window = ShardWindow {
            timers: vec![(
                "t".into(),
                TimerWindow { samples: samples.to_vec(), count: samples.len() as f64, overflow: None },
            )],
            ..ShardWindow::default()
        };
        let data = compute(vec![window], 0, config);
        let timer = &data.timers[0];
        timer.stats.iter().chain(timer.histogram.iter()).cloned().collect()
    }

    fn get(stats: &[(String, f64)], name: &str) -> f64 {
        stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or(f64::NAN)
    }

    #[test]
    fn timer_stats_match_etsy_definitions() {
        let config = FlushConfig {
            interval_ms: 10_000,
            percent_thresholds: vec![90.0, -10.0, 50.5],
            histograms: vec![HistogramSpec { metric: "t".into(), bins: vec![Bin::Below(3.0), Bin::Inf] }],
        };
        let samples: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let stats = timer(&samples, &config);
        assert_eq!(get(&stats, "count_90"), 9.0);
        assert_eq!(get(&stats, "upper_90"), 9.0);
        assert_eq!(get(&stats, "sum_90"), 45.0);
        assert_eq!(get(&stats, "mean_90"), 5.0);
        assert_eq!(get(&stats, "count_top10"), 1.0);
        assert_eq!(get(&stats, "lower_top10"), 10.0);
        assert_eq!(get(&stats, "count_50_5"), 5.0);
        assert_eq!(get(&stats, "median"), 5.5);
        assert_eq!(get(&stats, "sum_squares"), 385.0);
        assert_eq!(get(&stats, "std"), 8.25_f64.sqrt());
        assert_eq!(get(&stats, "count_ps"), 1.0);
        assert_eq!(get(&stats, "bin_3"), 2.0);
        assert_eq!(get(&stats, "bin_inf"), 8.0);
    }

    #[test]
    fn extreme_percentiles_stay_finite() {
        let config = FlushConfig { percent_thresholds: vec![-100.0, 150.0], ..FlushConfig::default() };
        let stats = timer(&[1.0, 2.0, 3.0], &config);
        assert_eq!(get(&stats, "sum_top100"), 6.0);
        assert_eq!(get(&stats, "count_150"), 3.0);
        assert!(stats.iter().all(|(_, v)| v.is_finite()));
    }

    /// Found by the `flush_window` fuzz target: `t:2e200|ms` squared to Infinity in
    /// `sum_squares` and every `sum_squares_<pct>`, and two samples near `f64::MAX` averaged to
    /// an Infinity median. Etsy sends `Infinity` for both; proctor's promise is never to.
    #[test]
    fn huge_timer_samples_do_not_square_or_average_to_infinity() {
        let config = FlushConfig { percent_thresholds: vec![90.0, -10.0, 50.0], ..FlushConfig::default() };
        for samples in [&[2e200][..], &[2e200, 3e200], &[1.5e308, 1.5e308], &[1.0, 1e300]] {
            let stats = timer(samples, &config);
            let infinite: Vec<_> = stats.iter().filter(|(_, v)| !v.is_finite()).collect();
            assert!(infinite.is_empty(), "samples {samples:?}: {infinite:?}");
            assert_eq!(get(&stats, "sum_squares"), f64::MAX, "samples {samples:?}");
        }
        // The median of two huge samples is still their true midpoint, not a pinned value.
        assert_eq!(get(&timer(&[1.5e308, 1.7e308], &config), "median"), 1.6e308);
        // Ordinary samples keep Etsy's `(a + b) / 2` to the bit.
        assert_eq!(get(&timer(&[0.1, 0.2], &config), "median"), (0.1 + 0.2) / 2.0);
    }

    #[test]
    fn an_emptied_timer_reports_only_counts() {
        let stats = timer(&[], &FlushConfig::default());
        assert_eq!(stats, vec![("count".to_owned(), 0.0), ("count_ps".to_owned(), 0.0)]);
    }
}
