//! statsd's figures as Prometheus families: which names, help texts, labels and units the
//! server's own metrics and the last flush's keys get, and how many keys per type are shown.
//!
//! The output is proctor-units' exposition families, which `proctor serve` renders with the
//! rest of `/metrics`. Names pass `promtool check metrics`: no family's name contains its own
//! type's name (`_counter_`, `_gauge`), and statsd counters are also a monotonic
//! `proctor_statsd_events_total{key}` (counts since the server started, summed over flushes, as
//! statsd_exporter exposes them), which survives a scrape missing a flush and an idle flush's 0. This module decides names and values only: it writes no exposition text
//! and knows nothing of HTTP. The cap bounds `/metrics`' cardinality: keys past it are counted
//! in `proctor_statsd_keys_not_exposed`, never shown.

use std::collections::BTreeMap;

use crate::flush::FlushData;
use crate::self_metrics::SelfMetrics;

pub use proctor_units::prom::{Family, Kind, Sample};

const SELF_HELP: &str = "proctor statsd server figure (see `proctor statsd --help`).";

/// The server's self metrics (one family per name, in the order [`SelfMetrics::series`] lists
/// them), then the counters' totals since start (`totals`, from `ServerHandle::counter_totals`),
/// the last flush's counters (rate per second), gauges, timers (time statistics in seconds,
/// Etsy's milliseconds divided by 1000, and sample counts) and sets, at most
/// `max_keys_per_type` keys of each type, then how many keys were left out.
pub fn families(
    metrics: &SelfMetrics,
    flush: Option<&FlushData>,
    totals: &BTreeMap<String, f64>,
    max_keys_per_type: usize,
) -> Vec<Family> {
    let max = max_keys_per_type;
    let mut out: Vec<Family> = Vec::new();
    for series in metrics.series() {
        let kind = if series.counter { Kind::Counter } else { Kind::Gauge };
        let base = if series.counter { series.name.strip_suffix("_total").unwrap_or(series.name) } else { series.name };
        match out.iter_mut().find(|family| family.name == base) {
            Some(family) => family.push(series.labels, series.value),
            None => {
                let mut family = Family::new(base, kind, SELF_HELP);
                family.push(series.labels, series.value);
                out.push(family);
            }
        }
    }
    let mut events = Family::new(
        "proctor_statsd_events",
        Kind::Counter,
        "statsd counters: counts received since the server started, summed over flushes (monotonic).",
    );
    for (key, total) in totals {
        if events.samples.len() < max {
            events.push(vec![("key", key.clone())], *total);
        }
    }
    out.push(events);
    let mut counters = Family::new(
        "proctor_statsd_events_per_second",
        Kind::Gauge,
        "statsd counters: rate over the last flush interval.",
    );
    let mut gauges = Family::new("proctor_statsd_value", Kind::Gauge, "statsd gauges: value at the last flush.");
    let mut timers = Family::new(
        "proctor_statsd_timer_seconds",
        Kind::Gauge,
        "statsd timers: statistics of the last flush interval.",
    );
    let mut timer_counts = Family::new(
        "proctor_statsd_timer_samples",
        Kind::Gauge,
        "statsd timers: values received in the last flush interval.",
    );
    let mut sets = Family::new(
        "proctor_statsd_set_members",
        Kind::Gauge,
        "statsd sets: distinct members in the last flush interval.",
    );
    let mut not_shown = 0u64;
    if let Some(flush) = flush {
        let key = |k: &str| vec![("key", k.to_owned())];
        for counter in &flush.counters {
            if counters.samples.len() < max {
                counters.push(key(&counter.key), counter.rate_per_second);
            } else {
                not_shown += 1;
            }
        }
        for gauge in &flush.gauges {
            if gauges.samples.len() < max {
                gauges.push(key(&gauge.key), gauge.value);
            } else {
                not_shown += 1;
            }
        }
        for set in &flush.sets {
            if sets.samples.len() < max {
                sets.push(key(&set.key), set.count);
            } else {
                not_shown += 1;
            }
        }
        for (shown, timer) in flush.timers.iter().enumerate() {
            if shown >= max {
                not_shown += 1;
                continue;
            }
            for (name, value) in &timer.stats {
                if name == "count" {
                    timer_counts.push(key(&timer.key), *value);
                } else if is_time_stat(name) {
                    timers.push(vec![("key", timer.key.clone()), ("stat", name.clone())], value / 1e3);
                }
            }
        }
    }
    out.extend([counters, gauges, timers, timer_counts, sets]);
    let mut hidden = Family::new(
        "proctor_statsd_keys_not_exposed",
        Kind::Gauge,
        "statsd keys left out of /metrics by --statsd-metrics-max.",
    );
    hidden.push(Vec::new(), not_shown as f64);
    out.push(hidden);
    out
}

/// Timer statistics that are times (Etsy's names, in milliseconds), as opposed to counts
/// (`count`, `count_90`, `count_ps`, histogram bins), which have no unit to convert, and
/// `sum_squares*` (ms², not a time: left out of the seconds family rather than mislabelled).
fn is_time_stat(name: &str) -> bool {
    if name.starts_with("sum_squares") {
        return false;
    }
    matches!(name, "mean" | "median" | "upper" | "lower" | "std" | "sum")
        || ["upper_", "mean_", "sum_"].iter().any(|p| name.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{families, is_time_stat, Family, Kind};
    use crate::flush::{CounterData, FlushData, GaugeData, SetData, TimerData};
    use crate::parse::BadLine;
    use crate::self_metrics::SelfMetrics;

    fn find<'a>(families: &'a [Family], name: &str) -> &'a Family {
        families.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no family {name}"))
    }

    fn flush() -> FlushData {
        let stats = |pairs: &[(&str, f64)]| pairs.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
        FlushData {
            timestamp_seconds: 100,
            interval_ms: 10_000,
            counters: ["c1", "c2", "c3"]
                .iter()
                .map(|k| CounterData { key: (*k).to_owned(), count: 20.0, rate_per_second: 2.0 })
                .collect(),
            timers: vec![
                TimerData {
                    key: "t1".to_owned(),
                    stats: stats(&[("count", 4.0), ("upper", 250.0), ("count_90", 3.0), ("mean_90", 40.0)]),
                    histogram: Vec::new(),
                    approximate: false,
                },
                TimerData {
                    key: "t2".to_owned(),
                    stats: stats(&[("count", 1.0)]),
                    histogram: Vec::new(),
                    approximate: false,
                },
            ],
            gauges: vec![GaugeData { key: "g".to_owned(), value: 7.0 }],
            sets: vec![SetData { key: "s".to_owned(), count: 3.0, approximate: false }],
            processing_time_ms: 0.0,
        }
    }

    #[test]
    fn self_metrics_become_one_family_per_name_without_total() {
        let metrics = SelfMetrics {
            packets_received: 5,
            bad_lines: vec![(BadLine::MissingType, 1), (BadLine::BadValue, 2)],
            rcvbuf_bytes: vec![4096, 8192],
            ..SelfMetrics::default()
        };
        let out = families(&metrics, None, &BTreeMap::new(), 10);
        let packets = find(&out, "proctor_statsd_packets_received");
        assert_eq!((packets.kind, packets.samples[0].value), (Kind::Counter, 5.0));
        let bad = find(&out, "proctor_statsd_bad_lines");
        assert_eq!(bad.samples.len(), 2);
        assert_eq!(bad.samples[1].labels, vec![("reason", "bad_value".to_owned())]);
        let buffers = find(&out, "proctor_statsd_socket_receive_buffer_bytes");
        assert_eq!((buffers.kind, buffers.samples.len()), (Kind::Gauge, 2));
        assert_eq!(find(&out, "proctor_statsd_uptime_seconds").kind, Kind::Gauge);
        // Without a flush the key families are announced empty, and nothing is hidden.
        assert!(find(&out, "proctor_statsd_events_per_second").samples.is_empty());
        assert!(find(&out, "proctor_statsd_events").samples.is_empty());
        assert_eq!(find(&out, "proctor_statsd_keys_not_exposed").samples[0].value, 0.0);
        assert_eq!(out.iter().filter(|f| f.name == "proctor_statsd_bad_lines").count(), 1);
    }

    #[test]
    fn flushed_keys_get_seconds_and_a_cap_per_type() {
        let totals: BTreeMap<String, f64> = [("c1".to_owned(), 60.0), ("c2".to_owned(), 20.0)].into();
        let out = families(&SelfMetrics::default(), Some(&flush()), &totals, 1);
        let events = find(&out, "proctor_statsd_events");
        assert_eq!(events.kind, Kind::Counter);
        assert_eq!(events.samples.len(), 1, "capped like the others");
        assert_eq!((events.samples[0].labels.clone(), events.samples[0].value), (vec![("key", "c1".to_owned())], 60.0));
        let counters = find(&out, "proctor_statsd_events_per_second");
        assert_eq!(counters.samples.len(), 1);
        assert_eq!(
            (counters.samples[0].labels.clone(), counters.samples[0].value),
            (vec![("key", "c1".to_owned())], 2.0)
        );
        let timers = find(&out, "proctor_statsd_timer_seconds");
        let shown: Vec<(String, f64)> = timers.samples.iter().map(|s| (s.labels[1].1.clone(), s.value)).collect();
        assert_eq!(shown, [("upper".to_owned(), 0.25), ("mean_90".to_owned(), 0.04)]);
        assert_eq!(timers.samples[0].labels[0], ("key", "t1".to_owned()));
        assert_eq!(find(&out, "proctor_statsd_timer_samples").samples[0].value, 4.0);
        assert_eq!(find(&out, "proctor_statsd_value").samples[0].value, 7.0);
        assert_eq!(find(&out, "proctor_statsd_set_members").samples[0].value, 3.0);
        // Two counters and one timer over the cap of one per type.
        assert_eq!(find(&out, "proctor_statsd_keys_not_exposed").samples[0].value, 3.0);
        let names: Vec<&str> = out.iter().rev().take(6).map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "proctor_statsd_keys_not_exposed",
                "proctor_statsd_set_members",
                "proctor_statsd_timer_samples",
                "proctor_statsd_timer_seconds",
                "proctor_statsd_value",
                "proctor_statsd_events_per_second",
            ]
        );
    }

    /// promtool's lint: a family's name must not contain its own type's name.
    #[test]
    fn no_family_names_its_own_type() {
        let metrics = SelfMetrics { packets_received: 1, ..SelfMetrics::default() };
        let totals: BTreeMap<String, f64> = [("c1".to_owned(), 1.0)].into();
        for family in families(&metrics, Some(&flush()), &totals, 10) {
            let kind = match family.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let name =
                if family.kind == Kind::Counter { format!("{}_total", family.name) } else { family.name.to_owned() };
            assert!(!name.contains(&format!("_{kind}_")) && !name.ends_with(&format!("_{kind}")), "{name} ({kind})");
        }
    }

    #[test]
    fn only_time_statistics_are_converted() {
        for name in ["mean", "median", "upper", "lower", "std", "sum", "upper_90", "mean_99", "sum_50"] {
            assert!(is_time_stat(name), "{name}");
        }
        for name in ["count", "count_90", "count_ps", "upper_", "bin_100"] {
            assert!(!is_time_stat(name), "{name}");
        }
        // `sum_squares` is ms², not a time: it is not put in the seconds family.
        assert!(!is_time_stat("sum_squares") && !is_time_stat("sum_squares_90"));
    }
}
