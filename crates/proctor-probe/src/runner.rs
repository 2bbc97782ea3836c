//! Runs a probe: worker threads, each with its own [`Client`], following a [`Pacing`], a
//! [`Limit`] and optional [`Bursts`]; every finished request goes to the caller over a
//! bounded channel as a [`RequestRecord`].
//!
//! This module owns the clock and the threads; it does no network I/O itself. It never
//! drops a record: a worker whose channel is full waits (in open loop that wait is charged
//! to the following requests, as any other delay is). Failed requests are records like any
//! other, so a run never stops because requests fail.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::client::{nanos, Client, ClientConfig};
use crate::record::RequestRecord;
use crate::schedule::{Bursts, Limit, Pacing};

/// A probe run's settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub client: Arc<ClientConfig>,
    pub pacing: Pacing,
    /// The whole run's limit, or each burst's when `bursts` is set (its `count` is then the
    /// burst size).
    pub limit: Limit,
    pub bursts: Option<Bursts>,
    /// Written into every record, so merged result files keep runs apart.
    pub run_id: String,
    /// Written into every record as its `url` (the URL as the user gave it).
    pub url: Option<String>,
}

/// A run in progress. Records arrive on `records`; it disconnects when the run is over.
#[derive(Debug)]
pub struct RunHandle {
    pub records: Receiver<RequestRecord>,
    stop: Arc<AtomicBool>,
    coordinator: Option<JoinHandle<()>>,
}

impl RunHandle {
    /// Asks every worker to stop after its current request; requests in flight finish (or
    /// time out) and are still sent.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// A flag that stops the run when set (for a signal thread).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Waits for the threads to end (after the records channel disconnected, or after
    /// [`RunHandle::stop`] plus at most one request timeout).
    pub fn join(mut self) {
        if let Some(coordinator) = self.coordinator.take() {
            let _ = coordinator.join();
        }
    }

    /// A run driven by another module's thread (the WebSocket probe's).
    pub(crate) fn from_parts(
        records: Receiver<RequestRecord>,
        stop: Arc<AtomicBool>,
        coordinator: JoinHandle<()>,
    ) -> Self {
        Self { records, stop, coordinator: Some(coordinator) }
    }
}

/// Records waiting for the caller; a full channel makes workers wait, it never drops.
pub(crate) const CHANNEL_CAPACITY: usize = 4096;

/// Starts the run on a coordinator thread that spawns the workers.
pub fn start(config: RunConfig) -> std::io::Result<RunHandle> {
    let (sender, records) = sync_channel(CHANNEL_CAPACITY);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_for_thread = Arc::clone(&stop);
    let coordinator = std::thread::Builder::new()
        .name("probe-run".into())
        .spawn(move || coordinate(&config, &sender, &stop_for_thread))?;
    Ok(RunHandle { records, stop, coordinator: Some(coordinator) })
}

/// Wall-clock anchor: `Instant`s become Unix times as `unix_at_start + (t - start)`, so a
/// wall-clock step during a long watch does not bend the time axis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) start: Instant,
    unix_ns_at_start: u64,
}

impl Clock {
    pub(crate) fn now() -> Self {
        let unix_ns_at_start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
        Self { start: Instant::now(), unix_ns_at_start }
    }

    pub(crate) fn unix_ns(&self, at: Instant) -> u64 {
        self.unix_ns_at_start.saturating_add(nanos(at.saturating_duration_since(self.start)))
    }
}

fn coordinate(config: &RunConfig, sender: &SyncSender<RequestRecord>, stop: &AtomicBool) {
    let clock = Clock::now();
    let Some(bursts) = config.bursts else {
        run_phase(config, sender, stop, &clock, clock.start, None, 0);
        return;
    };
    for burst in 0..bursts.count() {
        let burst_start = clock.start + bursts.offset(burst);
        if !sleep_until(burst_start, stop) {
            return;
        }
        run_phase(config, sender, stop, &clock, burst_start, Some(burst), burst * bursts.requests);
    }
}

/// One closed or open loop from `phase_start` until its limit, `stop`, or a closed channel.
fn run_phase(
    config: &RunConfig,
    sender: &SyncSender<RequestRecord>,
    stop: &AtomicBool,
    clock: &Clock,
    phase_start: Instant,
    burst: Option<u64>,
    first_seq: u64,
) {
    let next = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for worker in 0..config.pacing.workers() {
            let next = &next;
            let spawned = std::thread::Builder::new().name(format!("probe-{worker}")).spawn_scoped(scope, move || {
                let mut client = Client::new(Arc::clone(&config.client));
                let (run, url): (Arc<str>, Option<Arc<str>>) =
                    (config.run_id.as_str().into(), config.url.as_deref().map(Arc::from));
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let (intended, queued) = match config.pacing.intended_offset(index) {
                        Some(offset) => {
                            if !config.limit.allows(index, offset) {
                                break;
                            }
                            let due = phase_start + offset;
                            if !sleep_until(due, stop) {
                                break;
                            }
                            (due, true)
                        }
                        None => {
                            let now = Instant::now();
                            if !config.limit.allows(index, now - phase_start) {
                                break;
                            }
                            (now, false)
                        }
                    };
                    let started = Instant::now();
                    let outcome = client.request();
                    let mut phases = outcome.phases;
                    if queued {
                        phases.queue_ns = Some(nanos(started.saturating_duration_since(intended)));
                    }
                    let (error, error_detail) = match outcome.error {
                        Some((class, detail)) => (Some(class), Some(detail)),
                        None => (None, None),
                    };
                    let record = RequestRecord {
                        run: Arc::clone(&run),
                        seq: first_seq + index,
                        burst,
                        sent_unix_ns: clock.unix_ns(intended),
                        total_ns: nanos(outcome.end.saturating_duration_since(intended)),
                        phases,
                        reused: outcome.reused,
                        tls_verified: outcome.tls_verified,
                        status: outcome.status,
                        body_bytes: outcome.body_bytes,
                        error,
                        error_detail,
                        url: url.clone(),
                        server_timing: outcome.server_timing,
                        server_timing_dropped: outcome.server_timing_dropped,
                    };
                    if sender.send(record).is_err() {
                        break;
                    }
                }
            });
            if spawned.is_err() {
                // Fewer workers than asked for: the run goes on with those that started.
                break;
            }
        }
    });
}

/// Sleeps until `when` in slices, so `stop` is noticed within 50 ms. False: stopped.
fn sleep_until(when: Instant, stop: &AtomicBool) -> bool {
    const SLICE: Duration = Duration::from_millis(50);
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = when.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(SLICE));
    }
}
