//! The user-space cost of one packet without sockets: parse and aggregate the 64 packets
//! `statsd_blast` sends (half counters, half timers), cycled, on one thread, and print the
//! nanoseconds per packet (the median of 5 rounds). What the server adds on top is the kernel's
//! receive path; `bench/statsd/run.sh` measures the whole.
//!
//! cargo run --release -p proctor-statsd --example parse_cost -- [PACKETS_PER_ROUND]

use std::time::Instant;

use proctor_statsd::aggregate::{Aggregator, AggregatorConfig};
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

fn main() {
    let packets: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(2_000_000);
    // The blaster's payloads, byte for byte.
    let payloads: Vec<Vec<u8>> = (0..64u32)
        .map(|k| {
            if k % 2 == 0 {
                format!("bench.c{k}:1|c").into_bytes()
            } else {
                format!("bench.t{k}:{}|ms", k * 3).into_bytes()
            }
        })
        .collect();
    let mut parser = LineParser::new(ParseOptions::default());
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let mut aggregator = Aggregator::new(AggregatorConfig::default());
        let started = Instant::now();
        let mut metrics = 0;
        for packet in payloads.iter().cycle().take(packets) {
            metrics += parser.parse_packet(packet, &mut Apply { aggregator: &mut aggregator }).metrics;
        }
        let nanos = started.elapsed().as_nanos() as f64 / packets as f64;
        assert_eq!(metrics, packets as u64, "every packet is one metric");
        rounds.push(nanos);
        // A flush per round keeps the timers' sample vectors from growing across rounds.
        let _ = aggregator.flush();
    }
    rounds.sort_by(f64::total_cmp);
    println!("{{\"packets_per_round\":{packets},\"ns_per_packet_median\":{:.1},\"rounds\":{rounds:?}}}", rounds[2]);
}
