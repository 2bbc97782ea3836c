//! The Graphite plaintext backend: names and lines exactly as Etsy statsd 0.9 writes them, and
//! a sender that survives a Graphite that is down.
//!
//! [`render`] is pure (flush data and naming in, text out) so the naming rules are tested on
//! strings. [`GraphiteBackend`] opens one TCP connection per flush, as Etsy does, with connect
//! and write timeouts; payloads that could not be sent wait in a bounded buffer and go out in
//! order with the next flush. When the buffer is full the oldest payload is dropped and its
//! lines counted. It does not speak the pickle protocol.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError};
use crate::flush::FlushData;
use crate::jsnum::js_format;

/// Etsy's `graphite.*` naming options and `prefixStats`, `flush_counts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphiteNaming {
    /// `graphite.legacyNamespace` (default true): `stats.KEY`, `stats_counts.KEY`,
    /// `stats.timers.KEY.…`; the prefixes below apply only when false.
    pub legacy_namespace: bool,
    pub global_prefix: String,
    pub prefix_counter: String,
    pub prefix_timer: String,
    pub prefix_gauge: String,
    pub prefix_set: String,
    /// `graphite.globalSuffix`, appended after a dot to every name, before tags.
    pub global_suffix: Option<String>,
    /// `prefixStats` (default `statsd`): the namespace of statsd's own counters.
    pub prefix_stats: String,
    /// `flush_counts` (default true): also send the raw count of every counter.
    pub flush_counts: bool,
}

impl Default for GraphiteNaming {
    fn default() -> Self {
        GraphiteNaming {
            legacy_namespace: true,
            global_prefix: "stats".to_owned(),
            prefix_counter: "counters".to_owned(),
            prefix_timer: "timers".to_owned(),
            prefix_gauge: "gauges".to_owned(),
            prefix_set: "sets".to_owned(),
            global_suffix: None,
            prefix_stats: "statsd".to_owned(),
            flush_counts: true,
        }
    }
}

/// The backend's own figures, sent as `…graphiteStats.*` lines like Etsy's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphiteStatus {
    /// Unix seconds of the last failed send, 0 if none.
    pub last_exception: u64,
    /// Unix seconds of the last successful send (the start time before the first).
    pub last_flush: u64,
    /// Milliseconds the last successful send took.
    pub flush_time_ms: u64,
    /// Bytes of the last successful payload.
    pub flush_length: u64,
}

struct Namespaces {
    global: Vec<String>,
    counter: Vec<String>,
    timer: Vec<String>,
    gauge: Vec<String>,
    set: Vec<String>,
}

impl GraphiteNaming {
    fn namespaces(&self) -> Namespaces {
        if self.legacy_namespace {
            let stats = || vec!["stats".to_owned()];
            let with = |part: &str| vec!["stats".to_owned(), part.to_owned()];
            return Namespaces {
                global: stats(),
                counter: stats(),
                timer: with("timers"),
                gauge: with("gauges"),
                set: with("sets"),
            };
        }
        let base: Vec<String> = [&self.global_prefix].into_iter().filter(|p| !p.is_empty()).cloned().collect();
        let with = |part: &str| {
            let mut ns = base.clone();
            if !part.is_empty() {
                ns.push(part.to_owned());
            }
            ns
        };
        Namespaces {
            global: base.clone(),
            counter: with(&self.prefix_counter),
            timer: with(&self.prefix_timer),
            gauge: with(&self.prefix_gauge),
            set: with(&self.prefix_set),
        }
    }

    fn suffix(&self) -> String {
        self.global_suffix.as_ref().map(|s| format!(".{s}")).unwrap_or_default()
    }
}

/// Etsy's `format(namespace, key, ...parts)`: tags (`;a=b`) move behind the suffix.
fn name(out: &mut String, namespace: &[String], key: &str, parts: &[&str], suffix: &str) {
    let (bare, tags) = match key.split_once(';') {
        Some((bare, tags)) => (bare, Some(tags)),
        None => (key, None),
    };
    for part in namespace {
        out.push_str(part);
        out.push('.');
    }
    out.push_str(bare);
    for part in parts {
        out.push('.');
        out.push_str(part);
    }
    out.push_str(suffix);
    if let Some(tags) = tags {
        out.push(';');
        out.push_str(tags);
    }
}

fn line(out: &mut String, value: f64, timestamp: u64) {
    out.push(' ');
    out.push_str(&js_format(value));
    out.push(' ');
    out.push_str(&timestamp.to_string());
    out.push('\n');
}

/// The plaintext payload of one flush, in Etsy's order: counters, timers, gauges, sets,
/// statsd's own figures, then the backend's status lines.
pub fn render(data: &FlushData, naming: &GraphiteNaming, status: &GraphiteStatus, calculation_time_ms: f64) -> String {
    let ns = naming.namespaces();
    let suffix = naming.suffix();
    let ts = data.timestamp_seconds;
    let mut out = String::with_capacity(64 * (data.key_count() + 8));
    for counter in &data.counters {
        if naming.legacy_namespace {
            name(&mut out, &ns.counter, &counter.key, &[], &suffix);
            line(&mut out, counter.rate_per_second, ts);
            if naming.flush_counts {
                name(&mut out, &["stats_counts".to_owned()], &counter.key, &[], &suffix);
                line(&mut out, counter.count, ts);
            }
        } else {
            name(&mut out, &ns.counter, &counter.key, &["rate"], &suffix);
            line(&mut out, counter.rate_per_second, ts);
            if naming.flush_counts {
                name(&mut out, &ns.counter, &counter.key, &["count"], &suffix);
                line(&mut out, counter.count, ts);
            }
        }
    }
    for timer in &data.timers {
        for (stat, value) in &timer.stats {
            name(&mut out, &ns.timer, &timer.key, &[stat], &suffix);
            line(&mut out, *value, ts);
        }
        for (bin, value) in &timer.histogram {
            name(&mut out, &ns.timer, &timer.key, &["histogram", bin], &suffix);
            line(&mut out, *value, ts);
        }
    }
    for gauge in &data.gauges {
        name(&mut out, &ns.gauge, &gauge.key, &[], &suffix);
        line(&mut out, gauge.value, ts);
    }
    for set in &data.sets {
        name(&mut out, &ns.set, &set.key, &["count"], &suffix);
        line(&mut out, set.count, ts);
    }
    let prefix_stats = naming.prefix_stats.as_str();
    let key_count = data.key_count() as f64;
    if naming.legacy_namespace {
        out.push_str(&format!("{prefix_stats}.numStats{suffix}"));
        line(&mut out, key_count, ts);
        out.push_str(&format!("stats.{prefix_stats}.graphiteStats.calculationtime{suffix}"));
        line(&mut out, calculation_time_ms, ts);
        out.push_str(&format!("stats.{prefix_stats}.processing_time{suffix}"));
        line(&mut out, data.processing_time_ms, ts);
    } else {
        name(&mut out, &ns.global, prefix_stats, &["numStats"], &suffix);
        line(&mut out, key_count, ts);
        name(&mut out, &ns.global, prefix_stats, &["graphiteStats", "calculationtime"], &suffix);
        line(&mut out, calculation_time_ms, ts);
        name(&mut out, &ns.global, prefix_stats, &["processing_time"], &suffix);
        line(&mut out, data.processing_time_ms, ts);
    }
    let mut status_ns = ns.global.clone();
    status_ns.push(prefix_stats.to_owned());
    let status_prefix = status_ns.join(".");
    let status_lines = [
        ("last_exception", status.last_exception),
        ("last_flush", status.last_flush),
        ("flush_time", status.flush_time_ms),
        ("flush_length", status.flush_length),
    ];
    for (stat, value) in status_lines {
        out.push_str(&format!("{status_prefix}.graphiteStats.{stat}{suffix}"));
        line(&mut out, value as f64, ts);
    }
    out
}

/// Where the Graphite backend sends and how much it keeps while Graphite is away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphiteConfig {
    /// `HOST:PORT`, resolved at every flush so a Graphite that moves is followed.
    pub address: String,
    pub naming: GraphiteNaming,
    /// Bytes of unsent payloads kept for the next attempt.
    pub max_pending_bytes: usize,
    pub connect_timeout: Duration,
    pub write_timeout: Duration,
}

impl GraphiteConfig {
    pub fn new(address: String) -> Self {
        GraphiteConfig {
            address,
            naming: GraphiteNaming::default(),
            max_pending_bytes: 8 << 20,
            connect_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(5),
        }
    }
}

/// Counters the Graphite backend shares with the server's self metrics.
#[derive(Debug, Default)]
pub struct GraphiteCounters {
    pub sent_lines: AtomicU64,
    pub dropped_lines: AtomicU64,
    pub failed_sends: AtomicU64,
    pub pending_bytes: AtomicU64,
    /// Mirrors of [`GraphiteStatus`], for the admin `stats` command.
    pub last_flush: AtomicU64,
    pub last_exception: AtomicU64,
    pub flush_time_ms: AtomicU64,
    pub flush_length: AtomicU64,
}

/// The Graphite plaintext backend.
#[derive(Debug)]
pub struct GraphiteBackend {
    config: GraphiteConfig,
    status: GraphiteStatus,
    /// Payloads not yet delivered, oldest first, with their line counts.
    pending: VecDeque<(String, u64)>,
    pending_bytes: usize,
    counters: Arc<GraphiteCounters>,
}

impl GraphiteBackend {
    pub fn new(config: GraphiteConfig, start_seconds: u64) -> Self {
        GraphiteBackend {
            config,
            status: GraphiteStatus { last_flush: start_seconds, ..GraphiteStatus::default() },
            pending: VecDeque::new(),
            pending_bytes: 0,
            counters: Arc::new(GraphiteCounters::default()),
        }
    }

    pub fn counters(&self) -> Arc<GraphiteCounters> {
        self.publish_status();
        Arc::clone(&self.counters)
    }

    fn publish_status(&self) {
        let counters = &self.counters;
        counters.last_flush.store(self.status.last_flush, Ordering::Relaxed);
        counters.last_exception.store(self.status.last_exception, Ordering::Relaxed);
        counters.flush_time_ms.store(self.status.flush_time_ms, Ordering::Relaxed);
        counters.flush_length.store(self.status.flush_length, Ordering::Relaxed);
    }

    fn send(&self, payload: &[u8]) -> std::io::Result<()> {
        let mut last_error = None;
        for address in self.config.address.to_socket_addrs()? {
            match TcpStream::connect_timeout(&address, self.config.connect_timeout) {
                Ok(mut stream) => {
                    stream.set_write_timeout(Some(self.config.write_timeout))?;
                    stream.write_all(payload)?;
                    return stream.flush();
                }
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| std::io::Error::other("address resolved to nothing")))
    }
}

impl Backend for GraphiteBackend {
    fn name(&self) -> &'static str {
        "graphite"
    }

    fn flush(&mut self, data: &FlushData, now_seconds: u64) -> Result<(), BackendError> {
        let started = Instant::now();
        let payload = render(data, &self.config.naming, &self.status, 0.0);
        let lines = payload.lines().count() as u64;
        self.pending_bytes += payload.len();
        self.pending.push_back((payload, lines));
        while self.pending_bytes > self.config.max_pending_bytes && self.pending.len() > 1 {
            if let Some((old, old_lines)) = self.pending.pop_front() {
                self.pending_bytes -= old.len();
                self.counters.dropped_lines.fetch_add(old_lines, Ordering::Relaxed);
            }
        }
        let joined: String = self.pending.iter().map(|(payload, _)| payload.as_str()).collect();
        let result = self.send(joined.as_bytes());
        match result {
            Ok(()) => {
                let sent: u64 = self.pending.iter().map(|(_, lines)| lines).sum();
                self.counters.sent_lines.fetch_add(sent, Ordering::Relaxed);
                self.pending.clear();
                self.pending_bytes = 0;
                self.status.last_flush = now_seconds;
                self.status.flush_time_ms = started.elapsed().as_millis() as u64;
                self.status.flush_length = joined.len() as u64;
            }
            Err(_) => {
                self.status.last_exception = now_seconds;
                self.counters.failed_sends.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.counters.pending_bytes.store(self.pending_bytes as u64, Ordering::Relaxed);
        self.publish_status();
        result.map_err(|source| BackendError::Send {
            backend: "graphite",
            address: self.config.address.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{render, GraphiteNaming, GraphiteStatus};
    use crate::flush::{CounterData, FlushData, GaugeData, SetData, TimerData};

    fn data() -> FlushData {
        FlushData {
            timestamp_seconds: 100,
            interval_ms: 10_000,
            counters: vec![CounterData { key: "hits;env=prod".into(), count: 5.0, rate_per_second: 0.5 }],
            timers: vec![TimerData {
                key: "lat".into(),
                stats: vec![("mean".into(), 1.5)],
                histogram: vec![("bin_10".into(), 2.0)],
                approximate: false,
            }],
            gauges: vec![GaugeData { key: "temp".into(), value: -3.0 }],
            sets: vec![SetData { key: "users".into(), count: 2.0, approximate: false }],
            processing_time_ms: 0.0,
        }
    }

    #[test]
    fn legacy_names() {
        let text = render(&data(), &GraphiteNaming::default(), &GraphiteStatus::default(), 0.0);
        let expected = "\
stats.hits;env=prod 0.5 100
stats_counts.hits;env=prod 5 100
stats.timers.lat.mean 1.5 100
stats.timers.lat.histogram.bin_10 2 100
stats.gauges.temp -3 100
stats.sets.users.count 2 100
statsd.numStats 4 100
stats.statsd.graphiteStats.calculationtime 0 100
stats.statsd.processing_time 0 100
stats.statsd.graphiteStats.last_exception 0 100
stats.statsd.graphiteStats.last_flush 0 100
stats.statsd.graphiteStats.flush_time 0 100
stats.statsd.graphiteStats.flush_length 0 100
";
        assert_eq!(text, expected);
    }

    #[test]
    fn non_legacy_names_with_prefixes_and_suffix() {
        let naming = GraphiteNaming {
            legacy_namespace: false,
            global_prefix: "app".into(),
            prefix_counter: "".into(),
            global_suffix: Some("host1".into()),
            ..GraphiteNaming::default()
        };
        let text = render(&data(), &naming, &GraphiteStatus::default(), 0.0);
        let lines: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap_or("")).collect();
        assert_eq!(
            lines,
            [
                "app.hits.rate.host1;env=prod",
                "app.hits.count.host1;env=prod",
                "app.timers.lat.mean.host1",
                "app.timers.lat.histogram.bin_10.host1",
                "app.gauges.temp.host1",
                "app.sets.users.count.host1",
                "app.statsd.numStats.host1",
                "app.statsd.graphiteStats.calculationtime.host1",
                "app.statsd.processing_time.host1",
                "app.statsd.graphiteStats.last_exception.host1",
                "app.statsd.graphiteStats.last_flush.host1",
                "app.statsd.graphiteStats.flush_time.host1",
                "app.statsd.graphiteStats.flush_length.host1",
            ]
        );
    }
}
