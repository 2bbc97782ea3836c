//! The flush thread: on a fixed clock it takes every shard's window (under that shard's lock),
//! adds Etsy's own counters, computes the flush and hands it to each backend in turn.
//!
//! It owns the backends; a failing backend is counted and logged, never retried here (the
//! Graphite backend keeps its own bounded retry buffer). It does not read sockets.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::aggregate::{AggregatorDrops, ShardWindow};
use crate::backend::Backend;
use crate::flush::{self, FlushConfig};
use crate::server::shard;
use crate::server::state::{unix_seconds, Shared, INTERNAL_COUNTERS};
use crate::shutdown::Shutdown;

/// Owns the backends and the flush clock.
#[derive(Debug)]
pub(crate) struct Flusher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) config: FlushConfig,
    pub(crate) backends: Vec<Box<dyn Backend>>,
    pub(crate) previous_timestamp: u64,
}

impl Flusher {
    pub(crate) fn run(mut self, shutdown: &Shutdown) -> Flusher {
        let interval = Duration::from_millis(self.config.interval_ms.max(1));
        let started = self.shared.started;
        let mut tick: u32 = 1;
        loop {
            // Ticks are fixed points after start, so a slow flush does not shift later ones.
            let due = started + interval * tick;
            let wait = due.saturating_duration_since(Instant::now());
            if shutdown.wait_timeout(wait) {
                return self;
            }
            self.flush_once();
            let elapsed = started.elapsed();
            tick = (elapsed.as_millis() / interval.as_millis()).max(u128::from(tick)) as u32 + 1;
        }
    }

    pub(crate) fn flush_once(&mut self) {
        let started = Instant::now();
        let timestamp = unix_seconds();
        let mut windows = Vec::with_capacity(self.shared.shards.len() + 1);
        let mut keys = 0;
        let mut bytes = 0;
        let mut drops = AggregatorDrops::default();
        for one in &self.shared.shards {
            let report = shard::flush(one);
            keys += report.keys;
            bytes += report.bytes;
            drops.key_limit_metrics += report.drops.key_limit_metrics;
            drops.byte_limit_metrics += report.drops.byte_limit_metrics;
            drops.timer_samples_not_kept += report.drops.timer_samples_not_kept;
            drops.set_members += report.drops.set_members;
            windows.push(report.window);
        }
        windows.push(self.internal_window(timestamp));
        let mut data = flush::compute(windows, timestamp, &self.config);
        data.processing_time_ms = started.elapsed().as_millis() as f64;
        let counters = &self.shared.counters;
        counters.keys.store(keys as u64, Ordering::Relaxed);
        counters.key_limit_dropped_metrics.store(drops.key_limit_metrics, Ordering::Relaxed);
        counters.byte_limit_dropped_metrics.store(drops.byte_limit_metrics, Ordering::Relaxed);
        counters.aggregator_bytes.store(bytes as u64, Ordering::Relaxed);
        counters.timer_samples_not_kept.store(drops.timer_samples_not_kept, Ordering::Relaxed);
        counters.set_members_dropped.store(drops.set_members, Ordering::Relaxed);
        for backend in &mut self.backends {
            if let Err(err) = backend.flush(&data, timestamp) {
                // Counted every time; logged every time too, since flushes are seconds apart.
                counters.backend_errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("proctor statsd: flush failed: {}", error_chain(&err));
            }
        }
        let totals = {
            let before = self.shared.counter_totals.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let totals: std::collections::BTreeMap<String, f64> = data
                .counters
                .iter()
                .map(|c| (c.key.clone(), before.get(&c.key).copied().unwrap_or(0.0) + c.count))
                .collect();
            Arc::new(totals)
        };
        *self.shared.counter_totals.lock().unwrap_or_else(PoisonError::into_inner) = totals;
        counters.flushes.fetch_add(1, Ordering::Relaxed);
        counters.last_flush_micros.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        *self.shared.last_flush.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(data));
    }

    /// Etsy's own counters (`statsd.packets_received`, `metrics_received`, `bad_lines_seen`,
    /// per window) and its `timestamp_lag` gauge (from the second flush on).
    fn internal_window(&mut self, timestamp: u64) -> ShardWindow {
        let current = self.shared.internal_totals();
        let mut flushed = self.shared.flushed_internal.lock().unwrap_or_else(PoisonError::into_inner);
        let prefix = &self.shared.prefix_stats;
        let mut window = ShardWindow::default();
        for ((name, now), before) in INTERNAL_COUNTERS.iter().zip(current).zip(flushed.iter()) {
            window.counters.push((format!("{prefix}.{name}").into(), now.saturating_sub(*before) as f64));
        }
        *flushed = current;
        if self.previous_timestamp > 0 {
            let lag = timestamp as f64 - self.previous_timestamp as f64 - self.config.interval_ms as f64 / 1000.0;
            window.gauges.push((format!("{prefix}.timestamp_lag").into(), lag));
        }
        self.previous_timestamp = timestamp;
        window
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
