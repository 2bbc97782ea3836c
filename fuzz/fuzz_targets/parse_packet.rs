//! Fuzz target: arbitrary bytes into `LineParser::parse_packet`, the one entry point the
//! server's parser threads call for UDP, TCP and Unix input alike.
//!
//! It checks the parser's documented promises, not its answers (those are the unit tests'
//! and the Etsy comparison's job): it never panics; every non-empty line yields one outcome
//! per value, each either a metric or exactly one bad line with a reason; the tallies match
//! what the sink saw; nothing produced is `NaN` or infinite; sanitised keys hold only Etsy's
//! allowed characters. Each packet is parsed twice, with and without key sanitising, and once
//! more line by line, so state left in the reused key buffers would show as a difference.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proctor_statsd::parse::{
    BadLine, LineParser, Metric, MetricSink, MetricValue, PacketCounts, ParseOptions,
};

/// One outcome of one value, owned, so the outcomes of two parses can be compared.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Metric(String, Value),
    Bad(BadLine, String),
}

/// `MetricValue` with the set member owned; floats compared by bits so `-0.0` and `0.0` differ.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Counter { value: u64, sample_rate: u64 },
    Gauge { value: u64, delta: bool },
    Timer { value: u64, sample_rate: u64 },
    Set { member: String },
}

#[derive(Default)]
struct Checked {
    sanitize_keys: bool,
    outcomes: Vec<Outcome>,
}

impl MetricSink for Checked {
    fn metric(&mut self, metric: Metric<'_>) {
        let key = metric.key;
        assert!(!key.is_empty(), "a metric with an empty key");
        if self.sanitize_keys {
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.;=".contains(&b)),
                "sanitised key {key:?} has a character Etsy's sanitizeKeyName removes"
            );
        }
        let value = match metric.value {
            MetricValue::Counter { value, sample_rate } => {
                assert!(value.is_finite(), "counter value {value}");
                check_rate(sample_rate);
                assert!(
                    (value / sample_rate).is_finite(),
                    "counter {value} @{sample_rate} is not finite once scaled"
                );
                Value::Counter {
                    value: value.to_bits(),
                    sample_rate: sample_rate.to_bits(),
                }
            }
            MetricValue::Gauge { value, delta } => {
                assert!(value.is_finite(), "gauge value {value}");
                Value::Gauge {
                    value: value.to_bits(),
                    delta,
                }
            }
            MetricValue::Timer { value, sample_rate } => {
                assert!(
                    value.is_finite() && value >= 0.0,
                    "timer value {value} must be finite and not negative"
                );
                check_rate(sample_rate);
                Value::Timer {
                    value: value.to_bits(),
                    sample_rate: sample_rate.to_bits(),
                }
            }
            MetricValue::Set { member } => {
                assert!(!member.is_empty(), "an empty set member (Etsy's is \"0\")");
                assert!(!member.contains('\n'), "a set member spans lines");
                Value::Set {
                    member: member.to_owned(),
                }
            }
        };
        self.outcomes.push(Outcome::Metric(key.to_owned(), value));
    }

    fn bad_line(&mut self, reason: BadLine, line: &str) {
        assert!(!line.is_empty(), "an empty line reported bad ({reason:?})");
        assert!(!line.contains('\n'), "a bad line spans lines: {line:?}");
        self.outcomes.push(Outcome::Bad(reason, line.to_owned()));
    }
}

/// Sample rates reach the aggregator as divisors (`1 / rate`): positive, and small enough
/// that the reciprocal is finite too.
fn check_rate(sample_rate: f64) {
    assert!(
        sample_rate > 0.0 && sample_rate.is_finite(),
        "sample rate {sample_rate}"
    );
    assert!(
        (1.0 / sample_rate).is_finite(),
        "sample rate {sample_rate} has no finite reciprocal"
    );
}

/// How many outcomes a line must have: one per `:`-separated value of the part before the first
/// `|#` (tags), or one for a bare key, which Etsy reads as the value "1" with no type.
fn values_on(line: &str) -> usize {
    let head = line.split("|#").next().unwrap_or(line);
    head.matches(':').count().max(1)
}

fn parse(parser: &mut LineParser, sanitize_keys: bool, bytes: &[u8]) -> (PacketCounts, Checked) {
    let mut sink = Checked {
        sanitize_keys,
        outcomes: Vec::new(),
    };
    let counts = parser.parse_packet(bytes, &mut sink);
    // The tallies are what the server counts; they must agree with what the sink was handed.
    let metrics = sink
        .outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Metric(..)))
        .count() as u64;
    assert_eq!(counts.metrics, metrics, "metrics tally");
    for reason in BadLine::ALL {
        let seen = sink
            .outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Bad(r, _) if *r == reason))
            .count() as u64;
        assert_eq!(counts.bad[reason.index()], seen, "bad tally for {reason:?}");
    }
    (counts, sink)
}

fuzz_target!(|packet: &[u8]| {
    let text = String::from_utf8_lossy(packet);
    let lines: Vec<&str> = text.split('\n').filter(|line| !line.is_empty()).collect();
    let expected_outcomes: usize = lines.iter().map(|line| values_on(line)).sum();

    for sanitize_keys in [true, false] {
        let mut parser = LineParser::new(ParseOptions { sanitize_keys, ..ParseOptions::default() });
        let (counts, whole) = parse(&mut parser, sanitize_keys, packet);
        assert_eq!(counts.lines, lines.len() as u64, "non-empty lines");
        assert_eq!(
            counts.metrics + counts.bad_total(),
            expected_outcomes as u64,
            "every value is a metric or exactly one bad line"
        );
        for outcome in &whole.outcomes {
            if let Outcome::Bad(_, line) = outcome {
                assert!(
                    lines.contains(&line.as_str()),
                    "bad line {line:?} is not a line of the packet"
                );
            }
        }

        // The same parser, line by line: the outcomes must be the same, in order, so nothing
        // carries over from one line to the next through the reused buffers.
        let mut one_by_one = Vec::with_capacity(whole.outcomes.len());
        for line in &lines {
            let (line_counts, sink) = parse(&mut parser, sanitize_keys, line.as_bytes());
            assert_eq!(line_counts.lines, 1);
            assert_eq!(
                (line_counts.metrics + line_counts.bad_total()) as usize,
                values_on(line),
                "outcomes of line {line:?}"
            );
            one_by_one.extend(sink.outcomes);
        }
        assert_eq!(whole.outcomes, one_by_one, "packet vs line by line");
    }
});
