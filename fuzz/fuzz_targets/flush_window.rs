//! Fuzz target: arbitrary bytes through the whole pure pipeline, parse → aggregate → flush
//! arithmetic → Graphite text, as one shard of the server would run it.
//!
//! The input is split into flush windows at each NUL byte. The aggregator runs with tiny caps,
//! so key limits, timer reservoirs and set caps are reached by short inputs. The promises
//! checked: no panic; every number in the flush data is finite (the crate's "nothing sent
//! downstream is Infinity or NaN"); no Graphite line has either word as its value; percentile
//! counts stay within the samples seen.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proctor_statsd::aggregate::{Aggregator, AggregatorConfig, IdlePolicy};
use proctor_statsd::flush::{self, Bin, FlushConfig, FlushData, HistogramSpec};
use proctor_statsd::graphite::{self, GraphiteNaming, GraphiteStatus};
use proctor_statsd::parse::{BadLine, LineParser, Metric, MetricSink, ParseOptions};

struct Apply<'a> {
    aggregator: &'a mut Aggregator,
}

impl MetricSink for Apply<'_> {
    fn metric(&mut self, metric: Metric<'_>) {
        self.aggregator.apply(&metric);
    }
    fn bad_line(&mut self, _reason: BadLine, _line: &str) {}
}

fn check_finite(data: &FlushData) {
    for counter in &data.counters {
        assert!(counter.count.is_finite(), "counter {counter:?}");
        assert!(counter.rate_per_second.is_finite(), "counter {counter:?}");
    }
    for timer in &data.timers {
        for (stat, value) in timer.stats.iter().chain(timer.histogram.iter()) {
            assert!(
                value.is_finite(),
                "timer {} stat {stat} = {value}",
                timer.key
            );
        }
    }
    for gauge in &data.gauges {
        assert!(gauge.value.is_finite(), "gauge {gauge:?}");
    }
    for set in &data.sets {
        assert!(set.count.is_finite(), "set {set:?}");
    }
}

fuzz_target!(|input: &[u8]| {
    let mut aggregator = Aggregator::new(AggregatorConfig {
        max_keys: 8,
        max_samples_per_timer: 4,
        max_samples_total: 12,
        max_set_members: 4,
        max_bytes: 4096,
        idle: IdlePolicy {
            counters: 1,
            timers: 2,
            sets: 1,
            gauges: 3,
        },
    });
    let config = FlushConfig {
        interval_ms: 10_000,
        // Etsy's default, a top percentile, both ends, and the out-of-range ones Etsy turns
        // into NaN.
        percent_thresholds: vec![90.0, -10.0, 50.0, 100.0, -100.0, 150.0, 0.5],
        histograms: vec![HistogramSpec {
            metric: "t".to_owned(),
            bins: vec![Bin::Below(0.5), Bin::Below(100.0), Bin::Inf],
        }],
    };
    let naming = GraphiteNaming::default();
    let mut parser = LineParser::new(ParseOptions::default());
    // One more empty window at the end, so kept gauges and idle expiry are flushed too.
    for (timestamp, window) in input.split(|b| *b == 0).chain([&[][..]]).enumerate() {
        parser.parse_packet(
            window,
            &mut Apply {
                aggregator: &mut aggregator,
            },
        );
        let data = flush::compute(vec![aggregator.flush()], timestamp as u64, &config);
        check_finite(&data);
        let text = graphite::render(&data, &naming, &GraphiteStatus::default(), 0.0);
        // Keys may spell `Infinity` (`a.Infinity:1|c` is a fine key); values must not.
        for line in text.lines() {
            let mut fields = line.rsplitn(3, ' ');
            let (_timestamp, value) = (fields.next(), fields.next().unwrap_or(""));
            assert!(
                !value.contains("NaN") && !value.contains("Infinity"),
                "Graphite line {line:?} in payload:\n{text}"
            );
        }
    }
});
