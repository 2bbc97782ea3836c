//! Which host series moved together with slow requests.
//!
//! Each request (a probe result, or one statsd flush's timer statistic) is matched to the
//! sample interval that holds its midpoint (sent time + half its latency), and takes that
//! interval's host values. Then, per series:
//!
//! - the **median in slow windows vs the rest**: a *window* is one sample interval within the
//!   requests' time span; it is slow when it holds at least one slow request. The medians of
//!   the series over slow windows and over the other windows, their difference and ratio;
//! - **Spearman's rank correlation** between latency and the series' value over all matched
//!   requests (ties get average ranks), with `n`, the requests it rests on.
//!
//! Slow means above the 95th percentile of the latencies, unless `proctor-modes` finds more
//! than one mode: then the requests in the slowest mode's basin. Series are ranked by the
//! size of their rank correlation. No p-value or significance is computed: requests in one
//! window share its value and are not independent, so `n` overstates the evidence, and the
//! table says what it measured and on how many, nothing more.

use proctor_modes::{find_modes_in_values, ModeConfig};
use serde::Serialize;

use crate::range::{HostPoint, Unit, SERIES};

/// One request: when it was sent and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyPoint {
    pub unix_ns: u64,
    pub latency_ns: f64,
}

impl LatencyPoint {
    /// The time a request is matched at: halfway through it.
    pub fn midpoint_ns(&self) -> u64 {
        self.unix_ns.saturating_add((self.latency_ns.max(0.0) / 2.0) as u64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorrelationConfig {
    /// Above this quantile is slow, when there are not several modes.
    pub quantile: f64,
    /// Look for modes with `proctor-modes`; the slowest of several is the slow set.
    pub use_modes: bool,
}

impl Default for CorrelationConfig {
    fn default() -> Self {
        CorrelationConfig { quantile: 0.95, use_modes: true }
    }
}

/// How "slow" was decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum SlowRule {
    /// Latency strictly above this quantile's value.
    Quantile { quantile: f64, threshold_ns: f64 },
    /// Latency at or above the lower edge of the slowest of several modes.
    SlowestMode { modes: usize, mode_ns: f64, threshold_ns: f64 },
}

impl SlowRule {
    pub fn threshold_ns(&self) -> f64 {
        match *self {
            SlowRule::Quantile { threshold_ns, .. } | SlowRule::SlowestMode { threshold_ns, .. } => threshold_ns,
        }
    }

    fn is_slow(&self, latency_ns: f64) -> bool {
        match *self {
            SlowRule::Quantile { threshold_ns, .. } => latency_ns > threshold_ns,
            SlowRule::SlowestMode { threshold_ns, .. } => latency_ns >= threshold_ns,
        }
    }
}

/// One series against the requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesCorrelation {
    pub name: &'static str,
    pub unit: Unit,
    /// Requests that had a value of this series (the `n` of `spearman`).
    pub n: u64,
    /// Spearman's rho between latency and the series; `None` with fewer than 3 requests or a
    /// series (or latency) that did not vary.
    pub spearman: Option<f64>,
    pub slow_windows: u64,
    pub other_windows: u64,
    pub median_slow: Option<f64>,
    pub median_other: Option<f64>,
    /// `median_slow − median_other`.
    pub difference: Option<f64>,
    /// `median_slow / median_other`; `None` when the other median is 0.
    pub ratio: Option<f64>,
}

/// A request as plotted: its time, latency, and whether it counted as slow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MarkedPoint {
    pub unix_ns: u64,
    pub latency_ns: f64,
    pub slow: bool,
    /// It fell inside a sample interval (else it is left out of the statistics).
    pub matched: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correlation {
    pub requests: u64,
    /// Requests whose midpoint fell inside a sample interval.
    pub matched: u64,
    pub slow: u64,
    pub slow_matched: u64,
    pub rule: Option<SlowRule>,
    /// Ranked: largest |rho| first; series without a rho last, in [`SERIES`] order.
    pub series: Vec<SeriesCorrelation>,
    pub points: Vec<MarkedPoint>,
}

/// Lines `latencies` up against the host `points` of a range (kept with
/// `RangeConfig::keep_points`, in time order).
pub fn correlate(latencies: &[LatencyPoint], points: &[HostPoint], config: &CorrelationConfig) -> Correlation {
    let values: Vec<f64> = latencies.iter().map(|l| l.latency_ns).filter(|v| v.is_finite()).collect();
    let rule = slow_rule(&values, config);
    // Which sample interval holds each request's midpoint: the first point at or after it,
    // if its interval started before it.
    let window_of = |t: u64| -> Option<usize> {
        let i = points.partition_point(|p| p.unix_ns < t);
        let p = points.get(i)?;
        p.interval_start_ns.filter(|start| *start < t).map(|_| i)
    };
    let mut marked = Vec::with_capacity(latencies.len());
    let mut matched: Vec<(usize, f64, bool)> = Vec::new();
    for l in latencies.iter().filter(|l| l.latency_ns.is_finite()) {
        let slow = rule.is_some_and(|r| r.is_slow(l.latency_ns));
        let window = window_of(l.midpoint_ns());
        marked.push(MarkedPoint { unix_ns: l.unix_ns, latency_ns: l.latency_ns, slow, matched: window.is_some() });
        if let Some(w) = window {
            matched.push((w, l.latency_ns, slow));
        }
    }
    // Windows in the requests' span: from the first matched request's window to the last's.
    let (first_window, last_window) = match (matched.iter().map(|m| m.0).min(), matched.iter().map(|m| m.0).max()) {
        (Some(a), Some(b)) => (a, b),
        _ => (1, 0),
    };
    let mut slow_window = vec![false; points.len()];
    for (w, _, slow) in &matched {
        slow_window[*w] |= *slow;
    }
    let mut series: Vec<SeriesCorrelation> = SERIES
        .iter()
        .enumerate()
        .map(|(s, (name, unit, _))| {
            let pairs: Vec<(f64, f64)> =
                matched.iter().filter_map(|(w, latency, _)| points[*w].values[s].map(|v| (*latency, v))).collect();
            let (mut in_slow, mut other) = (Vec::new(), Vec::new());
            for w in first_window..=last_window {
                // Windows without an interval (a run's first sample) hold no requests.
                if points[w].interval_start_ns.is_none() {
                    continue;
                }
                if let Some(v) = points[w].values[s] {
                    if slow_window[w] {
                        in_slow.push(v)
                    } else {
                        other.push(v)
                    }
                }
            }
            let median_slow = median(&mut in_slow);
            let median_other = median(&mut other);
            let difference = median_slow.zip(median_other).map(|(a, b)| a - b);
            let ratio = median_slow.zip(median_other).and_then(|(a, b)| (b != 0.0).then(|| a / b));
            SeriesCorrelation {
                name,
                unit: *unit,
                n: pairs.len() as u64,
                spearman: spearman(&pairs),
                slow_windows: in_slow.len() as u64,
                other_windows: other.len() as u64,
                median_slow,
                median_other,
                difference,
                ratio,
            }
        })
        .collect();
    // Stable: series without a rho keep SERIES order at the end.
    series.sort_by(|a, b| match (a.spearman, b.spearman) {
        (Some(x), Some(y)) => y.abs().total_cmp(&x.abs()),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    Correlation {
        requests: marked.len() as u64,
        matched: matched.len() as u64,
        slow: marked.iter().filter(|m| m.slow).count() as u64,
        slow_matched: matched.iter().filter(|m| m.2).count() as u64,
        rule,
        series,
        points: marked,
    }
}

fn slow_rule(values: &[f64], config: &CorrelationConfig) -> Option<SlowRule> {
    if values.is_empty() {
        return None;
    }
    if config.use_modes {
        let report = find_modes_in_values(values, &ModeConfig::default());
        if report.modes.len() > 1 {
            if let Some(slowest) = report.modes.iter().max_by(|a, b| a.value.total_cmp(&b.value)) {
                return Some(SlowRule::SlowestMode {
                    modes: report.modes.len(),
                    mode_ns: slowest.value,
                    threshold_ns: slowest.low,
                });
            }
        }
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let threshold_ns = quantile(&sorted, config.quantile);
    Some(SlowRule::Quantile { quantile: config.quantile, threshold_ns })
}

/// The `q` quantile of sorted values, linear between closest ranks.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(quantile(values, 0.5))
}

/// Average ranks (1-based), ties sharing the mean of their positions.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|a, b| values[*a].total_cmp(&values[*b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for k in &order[i..=j] {
            out[*k] = rank;
        }
        i = j + 1;
    }
    out
}

/// Spearman's rho: Pearson's correlation of the ranks (exact with ties).
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let a = ranks(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let b = ranks(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(&b) {
        cov += (x - ma) * (y - mb);
        va += (x - ma) * (x - ma);
        vb += (y - mb) * (y - mb);
    }
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::series_index;

    const S: u64 = 1_000_000_000;

    /// 60 one-second intervals; `cpu.user` is 80 in seconds 20..30 and 10 elsewhere;
    /// `memory.used` counts up regardless; `disk.read` is noise unrelated to anything.
    fn points() -> Vec<HostPoint> {
        let user = series_index("host.cpu.user_percent").expect("series");
        let memory = series_index("host.memory.used_bytes").expect("series");
        let disk = series_index("host.disk.read_bytes_per_sec").expect("series");
        (0..60u64)
            .map(|t| {
                let mut values = [None; proctor_model::series::N];
                values[user] = Some(if (20..30).contains(&t) { 80.0 } else { 10.0 });
                values[memory] = Some(1000.0 + t as f64);
                values[disk] = Some(((t * 7919) % 13) as f64);
                HostPoint { unix_ns: (t + 1) * S, interval_start_ns: (t > 0).then_some(t * S), values }
            })
            .collect()
    }

    /// Four requests per second from t = 1 s, 50 ms when `slow(second)` and 5 ms otherwise,
    /// each spread over 10 % so latencies are distinct.
    fn requests(slow: impl Fn(u64) -> bool) -> Vec<LatencyPoint> {
        (4..240u64)
            .map(|i| {
                let t = i * S / 4;
                let base = if slow(t / S) { 50e6 } else { 5e6 };
                LatencyPoint { unix_ns: t, latency_ns: base * (1.0 + ((i * 7919) % 1000) as f64 / 1e4) }
            })
            .collect()
    }

    #[test]
    fn the_series_that_moved_with_the_slow_requests_ranks_first() {
        let c = correlate(&requests(|s| (20..30).contains(&s)), &points(), &CorrelationConfig::default());
        assert_eq!(c.requests, 236);
        assert!(matches!(c.rule, Some(SlowRule::SlowestMode { modes: 2, .. })), "{:?}", c.rule);
        assert_eq!(c.slow, 40);
        let top = &c.series[0];
        assert_eq!(top.name, "host.cpu.user_percent");
        // A two-valued series that separates the requests perfectly still cannot reach 1: its
        // ties share ranks. For 40 of 236 (latency ranks 1..=236 against two tied groups) rho
        // is 0.64985, computed independently with the same formula in Python.
        let rho = top.spearman.expect("rho");
        assert!((rho - 0.6498).abs() < 1e-3, "{top:?}");
        assert_eq!((top.median_slow, top.median_other), (Some(80.0), Some(10.0)));
        assert_eq!(top.ratio, Some(8.0));
        assert_eq!((top.slow_windows, top.other_windows), (10, 49));
        // Memory rises through the run: it correlates less and its medians barely differ.
        let memory = c.series.iter().find(|s| s.name == "host.memory.used_bytes").expect("memory");
        assert!(memory.spearman.expect("rho").abs() < top.spearman.expect("rho"));
        // Series with no values have no rho and come last.
        assert!(c.series.last().expect("last").spearman.is_none());
    }

    #[test]
    fn with_slowness_unrelated_to_the_host_no_series_stands_out() {
        // Slow in seconds 40..50, while cpu.user is flat there: its rho is negative-ish and
        // small, and its slow-window median equals the rest's.
        let c = correlate(&requests(|s| (40..50).contains(&s)), &points(), &CorrelationConfig::default());
        let user = c.series.iter().find(|s| s.name == "host.cpu.user_percent").expect("user");
        assert!(user.spearman.expect("rho") < 0.0, "{user:?}");
        assert_eq!(user.median_slow, Some(10.0));
        assert_eq!(user.median_other, Some(10.0));
    }

    #[test]
    fn a_single_mode_falls_back_to_the_95th_percentile() {
        let latencies: Vec<LatencyPoint> = (1..=100u64)
            .map(|i| LatencyPoint { unix_ns: 2 * S + i * 10_000_000, latency_ns: 1e6 + i as f64 })
            .collect();
        let c = correlate(&latencies, &points(), &CorrelationConfig::default());
        match c.rule {
            Some(SlowRule::Quantile { threshold_ns, .. }) => assert!((threshold_ns - (1e6 + 95.05)).abs() < 1e-6),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.slow, 5);
    }

    #[test]
    fn requests_outside_any_interval_are_not_matched() {
        // Before the first interval (t < 1 s) and after the last point.
        let latencies =
            [LatencyPoint { unix_ns: S / 2, latency_ns: 1.0 }, LatencyPoint { unix_ns: 100 * S, latency_ns: 1.0 }];
        let c = correlate(&latencies, &points(), &CorrelationConfig::default());
        assert_eq!((c.requests, c.matched), (2, 0));
        assert!(c.series.iter().all(|s| s.spearman.is_none() && s.n == 0));
        assert_eq!(correlate(&[], &points(), &CorrelationConfig::default()).rule, None);
    }

    #[test]
    fn spearman_handles_ties_and_monotone_data() {
        assert_eq!(spearman(&[(1.0, 10.0), (2.0, 20.0), (3.0, 1000.0)]), Some(1.0));
        assert_eq!(spearman(&[(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]), Some(-1.0));
        assert_eq!(spearman(&[(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]), None);
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 5.0]), vec![2.0, 3.5, 3.5, 1.0]);
        let rho = spearman(&[(1.0, 1.0), (2.0, 1.0), (3.0, 2.0), (4.0, 2.0)]).expect("rho");
        assert!((rho - 0.894_427_190_999_915_9).abs() < 1e-12, "{rho}");
    }
}
