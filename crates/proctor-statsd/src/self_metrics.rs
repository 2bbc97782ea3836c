//! The server's own figures as plain data: what it received, what it lost and why, and how its
//! flushes and backends are doing, cumulative since start.
//!
//! This module only names and holds the figures; the server reads them from its counters
//! (`server::state`), the admin `stats` command prints them and `prom` lays them out
//! for Prometheus. It reads no counters, sockets or clocks itself.

use crate::parse::BadLine;

/// One self-metric series: `proctor_statsd_<name>_<unit>[_total]`, optional labels, a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    /// True for counters (cumulative since start), false for gauges.
    pub counter: bool,
}

/// The server's own figures, cumulative since start: what `proctor serve` will expose on
/// `/metrics` and what the admin `stats` command prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfMetrics {
    pub uptime_seconds: f64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub lines_received: u64,
    pub metrics_received: u64,
    pub bad_lines: Vec<(BadLine, u64)>,
    /// Sum over UDP sockets of the kernel's drop counter (`/proc/net/udp`, `drops`).
    pub kernel_dropped_packets: u64,
    pub truncated_packets: u64,
    /// Datagrams dropped between a reader and a parser thread. Always 0 since ingest threads
    /// parse their own datagrams (no queue left to overflow); kept so the series stays.
    pub ingress_dropped_packets: u64,
    /// Metrics dropped between a parser and a shard thread: always 0 for the same reason.
    pub shard_dropped_metrics: u64,
    pub key_limit_dropped_metrics: u64,
    /// New keys and set members refused because the aggregator held `max_bytes`.
    pub byte_limit_dropped_metrics: u64,
    /// Bytes of keys and set members held at the end of the last flush window.
    pub aggregator_bytes: u64,
    pub timer_samples_not_kept: u64,
    pub set_members_dropped: u64,
    pub keys: u64,
    pub tcp_connections: u64,
    pub flushes: u64,
    pub last_flush_seconds: f64,
    pub backend_errors: u64,
    pub graphite_sent_lines: u64,
    pub graphite_dropped_lines: u64,
    pub graphite_failed_sends: u64,
    pub graphite_pending_bytes: u64,
    /// Applied `SO_RCVBUF` of each UDP socket as the kernel reports it.
    pub rcvbuf_bytes: Vec<u64>,
    pub last_msg_seen_unix: u64,
}

impl SelfMetrics {
    /// The figures as named series, ready for a Prometheus renderer.
    pub fn series(&self) -> Vec<Series> {
        let counter = |name, value: u64| Series { name, labels: Vec::new(), value: value as f64, counter: true };
        let gauge = |name, value: f64| Series { name, labels: Vec::new(), value, counter: false };
        let mut out = vec![
            gauge("proctor_statsd_uptime_seconds", self.uptime_seconds),
            counter("proctor_statsd_packets_received_total", self.packets_received),
            counter("proctor_statsd_received_bytes_total", self.bytes_received),
            counter("proctor_statsd_lines_received_total", self.lines_received),
            counter("proctor_statsd_metrics_received_total", self.metrics_received),
            counter("proctor_statsd_kernel_dropped_packets_total", self.kernel_dropped_packets),
            counter("proctor_statsd_truncated_packets_total", self.truncated_packets),
            counter("proctor_statsd_queue_dropped_packets_total", self.ingress_dropped_packets),
            counter("proctor_statsd_shard_queue_dropped_metrics_total", self.shard_dropped_metrics),
            counter("proctor_statsd_key_limit_dropped_metrics_total", self.key_limit_dropped_metrics),
            counter("proctor_statsd_byte_limit_dropped_metrics_total", self.byte_limit_dropped_metrics),
            gauge("proctor_statsd_aggregator_bytes", self.aggregator_bytes as f64),
            counter("proctor_statsd_timer_samples_not_kept_total", self.timer_samples_not_kept),
            counter("proctor_statsd_set_members_dropped_total", self.set_members_dropped),
            gauge("proctor_statsd_keys", self.keys as f64),
            counter("proctor_statsd_tcp_connections_total", self.tcp_connections),
            counter("proctor_statsd_flushes_total", self.flushes),
            gauge("proctor_statsd_last_flush_duration_seconds", self.last_flush_seconds),
            counter("proctor_statsd_backend_errors_total", self.backend_errors),
            counter("proctor_statsd_graphite_sent_lines_total", self.graphite_sent_lines),
            counter("proctor_statsd_graphite_dropped_lines_total", self.graphite_dropped_lines),
            counter("proctor_statsd_graphite_failed_sends_total", self.graphite_failed_sends),
            gauge("proctor_statsd_graphite_pending_bytes", self.graphite_pending_bytes as f64),
        ];
        for (reason, count) in &self.bad_lines {
            out.push(Series {
                name: "proctor_statsd_bad_lines_total",
                labels: vec![("reason", reason.as_str().to_owned())],
                value: *count as f64,
                counter: true,
            });
        }
        for (socket, bytes) in self.rcvbuf_bytes.iter().enumerate() {
            out.push(Series {
                name: "proctor_statsd_socket_receive_buffer_bytes",
                labels: vec![("socket", socket.to_string())],
                value: *bytes as f64,
                counter: false,
            });
        }
        out
    }
}
