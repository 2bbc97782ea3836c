//! Recording probe results and statsd flushes into a stream of the data directory
//! (`DATA/probe`, `DATA/statsd`) with `proctor-store`'s bounded [`Recorder`]: a thread of its own
//! owns the stream's writer, and producers hand it records with `try_send`, so a slow disk never
//! delays a probe's measurements or a statsd flush. A full queue drops the record and counts it;
//! the counts are printed when recording stops. Also the conversions from the probe's and the
//! statsd server's records into the stored events.

use std::path::{Path, PathBuf};

use anyhow::Context;
use proctor_model::{ProbeResult, StatsdFlush, StatsdTimer};
use proctor_probe::RequestRecord;
use proctor_statsd::{Backend, BackendError, FlushData};
use proctor_store::{stream_dir, Event, Recorder, RecorderSender, StoreConfig, Writer};

use crate::datadir::report_open;

/// Records queued at most; past it they are dropped and counted.
const QUEUE: usize = 16;

/// A stream's recorder, and what it prints when it stops.
#[derive(Debug)]
pub struct EventRecorder {
    recorder: Recorder<(u64, Event)>,
    pub dir: PathBuf,
    who: &'static str,
}

impl EventRecorder {
    /// Opens `DATA/stream` (creating the stream directory) and starts its recorder thread.
    pub fn start(data_dir: &Path, stream: &str, who: &'static str) -> anyhow::Result<EventRecorder> {
        let dir = stream_dir(data_dir, stream).with_context(|| format!("{who}: cannot record"))?;
        let (writer, report) =
            Writer::open(&dir, StoreConfig::default()).with_context(|| format!("{who}: cannot record"))?;
        report_open(who, writer.dir(), &report);
        let recorder = Recorder::spawn(&format!("{stream}-recorder"), writer, QUEUE)
            .context("cannot start the recorder thread")?;
        Ok(EventRecorder { recorder, dir, who })
    }

    /// A handle that only enqueues (for a statsd backend, which lives on the flush thread).
    pub fn sender(&self) -> Option<EventSender> {
        self.recorder.sender().map(|sender| EventSender { sender })
    }

    pub fn send(&self, unix_ns: u64, event: Event) {
        self.recorder.submit((unix_ns, event));
    }

    /// Drains the queue, waits for the thread and prints what was recorded.
    pub fn stop(self) {
        let stats = self.recorder.stop();
        eprintln!(
            "{}: wrote {} frame{} (a probe's batch of up to a second, or a statsd flush) into {} ({} dropped at a full queue, {} failed writes{})",
            self.who,
            stats.written,
            if stats.written == 1 { "" } else { "s" },
            self.dir.display(),
            stats.dropped,
            stats.write_errors,
            stats.last_write_error.map(|e| format!("; the last: {e}")).unwrap_or_default()
        );
    }
}

/// Enqueues without waiting; see [`EventRecorder`].
#[derive(Debug, Clone)]
pub struct EventSender {
    sender: RecorderSender<(u64, Event)>,
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
        self.sender.sender.submit((flush.unix_ns, Event::Statsd(flush)));
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

/// A stored result back as a probe record (for `proctor dump probe`): the store keeps only the
/// total, status, error class and the connect and wait phases, so the rest are `None`; the URL
/// is the batch's target, and a connection counts as reused when it had no connect.
pub fn request_record(batch: &proctor_model::ProbeBatch, result: &ProbeResult) -> RequestRecord {
    let error = result
        .error
        .as_deref()
        .and_then(|name| proctor_probe::ErrorClass::ALL.into_iter().find(|class| class.name() == name));
    let phases = proctor_probe::Phases { connect_ns: result.connect_ns, wait_ns: result.wait_ns, ..Default::default() };
    RequestRecord {
        run: batch.run.as_str().into(),
        seq: result.seq,
        burst: None,
        sent_unix_ns: result.sent_unix_ns,
        total_ns: result.total_ns,
        phases,
        reused: result.connect_ns.is_none(),
        tls_verified: None,
        status: result.status,
        body_bytes: 0,
        error,
        error_detail: None,
        url: Some(batch.target.as_str().into()),
        server_timing: Vec::new(),
        server_timing_dropped: 0,
    }
}
