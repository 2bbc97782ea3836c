//! State the server's threads share: the cumulative counters every thread adds to, the shards,
//! the last flush, and what the admin interface may read or change.
//!
//! It holds raw counters only (rates are derived by whoever reads two of them) and starts no
//! threads. The admin interface reaches it only through [`AdminView`], implemented here.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::admin::AdminView;
use crate::aggregate::{DumpValue, MetricType};
use crate::flush::FlushData;
use crate::graphite::GraphiteCounters;
use crate::net::{self, RcvbufOutcome};
use crate::parse::BadLine;
use crate::self_metrics::SelfMetrics;
use crate::server::shard::{self, Shard};

/// Cumulative counters shared by all threads (raw counters; rates are derived by readers).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub lines: AtomicU64,
    pub metrics: AtomicU64,
    pub bad: [AtomicU64; BadLine::ALL.len()],
    pub truncated_packets: AtomicU64,
    pub tcp_connections: AtomicU64,
    pub last_msg_seen: AtomicU64,
    pub flushes: AtomicU64,
    pub last_flush_micros: AtomicU64,
    pub backend_errors: AtomicU64,
    pub keys: AtomicU64,
    pub key_limit_dropped_metrics: AtomicU64,
    pub byte_limit_dropped_metrics: AtomicU64,
    pub aggregator_bytes: AtomicU64,
    pub timer_samples_not_kept: AtomicU64,
    pub set_members_dropped: AtomicU64,
}

/// State shared by the server's threads and its handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub counters: Counters,
    /// Inodes of the UDP sockets, to find their kernel drop counters in `/proc/net/udp`.
    pub udp_inodes: Vec<u64>,
    pub rcvbuf: Vec<RcvbufOutcome>,
    pub shards: Vec<Shard>,
    pub health_up: AtomicBool,
    pub last_flush: Mutex<Option<Arc<FlushData>>>,
    /// Counts received per counter key since the server started, summed over flushes, for
    /// Prometheus's monotonic `_total` (a flush's counts restart at zero each interval, as
    /// Etsy's do). A key leaves when the aggregator deletes it, so the map is bounded by the
    /// key cap. Replaced whole at each flush; readers clone the `Arc`.
    pub counter_totals: Mutex<Arc<BTreeMap<String, f64>>>,
    pub started: Instant,
    pub started_unix: u64,
    pub describe: Vec<(String, String)>,
    pub prefix_stats: String,
    pub graphite: Vec<Arc<GraphiteCounters>>,
    /// Internal counters as of the last flush, for Etsy's per-window `statsd.*` counters.
    pub flushed_internal: Mutex<[u64; 3]>,
}

impl Shared {
    pub(crate) fn self_metrics(&self) -> SelfMetrics {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let graphite_sum =
            |f: fn(&GraphiteCounters) -> &AtomicU64| -> u64 { self.graphite.iter().map(|g| load(f(g))).sum() };
        SelfMetrics {
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            packets_received: load(&c.packets),
            bytes_received: load(&c.bytes),
            lines_received: load(&c.lines),
            metrics_received: load(&c.metrics),
            bad_lines: BadLine::ALL.iter().map(|r| (*r, load(&c.bad[r.index()]))).collect(),
            kernel_dropped_packets: net::udp_drops(&self.udp_inodes).into_iter().flatten().sum(),
            truncated_packets: load(&c.truncated_packets),
            // No queue between threads is left to overflow (see `ingest`).
            ingress_dropped_packets: 0,
            shard_dropped_metrics: 0,
            key_limit_dropped_metrics: load(&c.key_limit_dropped_metrics),
            byte_limit_dropped_metrics: load(&c.byte_limit_dropped_metrics),
            aggregator_bytes: load(&c.aggregator_bytes),
            timer_samples_not_kept: load(&c.timer_samples_not_kept),
            set_members_dropped: load(&c.set_members_dropped),
            keys: load(&c.keys),
            tcp_connections: load(&c.tcp_connections),
            flushes: load(&c.flushes),
            last_flush_seconds: load(&c.last_flush_micros) as f64 / 1e6,
            backend_errors: load(&c.backend_errors),
            graphite_sent_lines: graphite_sum(|g| &g.sent_lines),
            graphite_dropped_lines: graphite_sum(|g| &g.dropped_lines),
            graphite_failed_sends: graphite_sum(|g| &g.failed_sends),
            graphite_pending_bytes: graphite_sum(|g| &g.pending_bytes),
            rcvbuf_bytes: self.rcvbuf.iter().map(|r| r.applied_bytes as u64).collect(),
            last_msg_seen_unix: load(&c.last_msg_seen),
        }
    }

    /// Totals behind Etsy's own counters: packets, lines (`metrics_received`) and bad lines.
    pub(crate) fn internal_totals(&self) -> [u64; 3] {
        let counters = &self.counters;
        let bad: u64 = counters.bad.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        [counters.packets.load(Ordering::Relaxed), counters.lines.load(Ordering::Relaxed), bad]
    }
}

/// The names of Etsy's own counters, in the order of [`Shared::internal_totals`].
pub(crate) const INTERNAL_COUNTERS: [&str; 3] = ["packets_received", "metrics_received", "bad_lines_seen"];

impl AdminView for Shared {
    fn describe(&self) -> &[(String, String)] {
        &self.describe
    }

    fn health_up(&self) -> bool {
        self.health_up.load(Ordering::Relaxed)
    }

    fn set_health_up(&self, up: bool) {
        self.health_up.store(up, Ordering::Relaxed);
    }

    fn self_metrics(&self) -> SelfMetrics {
        Shared::self_metrics(self)
    }

    fn started_unix(&self) -> u64 {
        self.started_unix
    }

    fn graphite(&self) -> &[Arc<GraphiteCounters>] {
        &self.graphite
    }

    fn own_counters(&self) -> Vec<(String, f64)> {
        let current = self.internal_totals();
        let flushed = *self.flushed_internal.lock().unwrap_or_else(PoisonError::into_inner);
        INTERNAL_COUNTERS
            .iter()
            .zip(current)
            .zip(flushed)
            .map(|((name, now), before)| (format!("{}.{name}", self.prefix_stats), now.saturating_sub(before) as f64))
            .collect()
    }

    fn dump(&self, kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
        shard::dump_all(&self.shards, kind)
    }

    fn delete(&self, kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
        shard::delete_all(&self.shards, kind, patterns)
    }
}

pub(crate) fn unix_seconds() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // JavaScript's Math.round(Date.now() / 1000), which Etsy uses for every timestamp.
    (now.as_millis() as u64 + 500) / 1000
}
