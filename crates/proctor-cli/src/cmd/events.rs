//! Recording probe results and statsd flushes into a stream of the data directory
//! (`DATA/probe`, `DATA/statsd`): a thread of its own owns the stream's `Writer`, and producers
//! hand it records over a bounded queue with `try_send`, so a slow disk never delays a probe's
//! measurements or a statsd flush. A full queue drops the record and counts it; the count is
//! reported when recording stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use proctor_model::{ProbeResult, StatsdFlush, StatsdTimer};
use proctor_probe::RequestRecord;
use proctor_statsd::{Backend, BackendError, FlushData};
use proctor_store::{stream_dir, Event, StoreConfig, Writer};

use crate::datadir::report_open;

/// Records queued at most; past it they are dropped and counted.
const QUEUE: usize = 16;

/// Counts shared between the producer and the recorder thread.
#[derive(Debug, Default)]
pub struct EventCounts {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub failed: AtomicU64,
}

/// The producer's end of a stream recorder.
#[derive(Debug)]
pub struct EventRecorder {
    /// `None` once stopped; dropping it ends the recorder thread after the queue drains.
    queue: Option<SyncSender<(u64, Event)>>,
    thread: Option<JoinHandle<()>>,
    pub counts: Arc<EventCounts>,
    pub dir: PathBuf,
    who: &'static str,
}

impl EventRecorder {
    /// Opens `DATA/stream` (creating the stream directory) and starts its recorder thread.
    pub fn start(data_dir: &Path, stream: &str, who: &'static str) -> anyhow::Result<EventRecorder> {
        let dir = stream_dir(data_dir, stream).with_context(|| format!("{who}: cannot record"))?;
        let (mut writer, report) =
            Writer::open(&dir, StoreConfig::default()).with_context(|| format!("{who}: cannot record"))?;
        report_open(who, writer.dir(), &report);
        let counts = Arc::new(EventCounts::default());
        let thread_counts = Arc::clone(&counts);
        let (queue, records) = sync_channel::<(u64, Event)>(QUEUE);
        let thread = std::thread::Builder::new()
            .name(format!("{stream}-recorder"))
            .spawn(move || {
                for (unix_ns, event) in records {
                    match writer.append_event(unix_ns, &event) {
                        Ok(_) => thread_counts.written.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            if thread_counts.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                                eprintln!("{who}: cannot record: {e} (counting further failures)");
                            }
                            0
                        }
                    };
                }
            })
            .context("cannot start the recorder thread")?;
        Ok(EventRecorder { queue: Some(queue), thread: Some(thread), counts, dir, who })
    }

    /// A handle that only enqueues (for a statsd backend, which lives on the flush thread).
    pub fn sender(&self) -> Option<EventSender> {
        Some(EventSender { queue: self.queue.clone()?, counts: Arc::clone(&self.counts) })
    }

    pub fn send(&self, unix_ns: u64, event: Event) {
        if let Some(queue) = &self.queue {
            try_send(queue, &self.counts, unix_ns, event);
        }
    }

    /// Drains the queue, waits for the thread and prints what was recorded.
    pub fn stop(mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let c = &self.counts;
        eprintln!(
            "{}: recorded {} records into {} ({} dropped at a full queue, {} failed writes)",
            self.who,
            c.written.load(Ordering::Relaxed),
            self.dir.display(),
            c.dropped.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed)
        );
    }
}

fn try_send(queue: &SyncSender<(u64, Event)>, counts: &EventCounts, unix_ns: u64, event: Event) {
    match queue.try_send((unix_ns, event)) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Enqueues without waiting; see [`EventRecorder`].
#[derive(Debug, Clone)]
pub struct EventSender {
    queue: SyncSender<(u64, Event)>,
    counts: Arc<EventCounts>,
}

/// A statsd backend that hands every flush to a stream recorder. It runs on the flush thread
/// and never waits: converting a flush copies its keys and values, and `try_send` either
/// queues it or counts it dropped.
#[derive(Debug)]
pub struct RecordBackend {
    pub sender: EventSender,
}

impl Backend for RecordBackend {
    fn name(&self) -> &'static str {
        "record"
    }

    fn flush(&mut self, data: &FlushData, _now_seconds: u64) -> Result<(), BackendError> {
        let mut flush = statsd_flush(data);
        // The flush's own timestamp is whole seconds, rounded as Etsy's `Math.round(Date.now()
        // / 1000)` is: up to half a second off either way, as much as a short flush interval.
        // This backend runs right after the flush is computed, so the clock read here is the
        // flush's time to the microsecond.
        if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            flush.unix_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        }
        try_send(&self.sender.queue, &self.sender.counts, flush.unix_ns, Event::Statsd(flush));
        Ok(())
    }
}

pub fn statsd_flush(data: &FlushData) -> StatsdFlush {
    StatsdFlush {
        unix_ns: data.timestamp_seconds.saturating_mul(1_000_000_000),
        interval_ms: data.interval_ms,
        timers: data.timers.iter().map(|t| StatsdTimer { key: t.key.clone(), stats: t.stats.clone() }).collect(),
        counters: data.counters.iter().map(|c| (c.key.clone(), c.count, c.rate_per_second)).collect(),
        gauges: data.gauges.iter().map(|g| (g.key.clone(), g.value)).collect(),
    }
}

pub fn probe_result(record: &RequestRecord) -> ProbeResult {
    ProbeResult {
        seq: record.seq,
        sent_unix_ns: record.sent_unix_ns,
        total_ns: record.total_ns,
        status: record.status,
        error: record.error.map(|e| e.name().to_string()),
        has_response: record.has_response(),
        connect_ns: record.phases.connect_ns,
        wait_ns: record.phases.wait_ns,
    }
}
