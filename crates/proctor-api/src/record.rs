//! Recording inside `proctor serve`: every published snapshot's raw [`Sample`] appended to a
//! `proctor-store` directory, on a thread of its own.
//!
//! The agent thread hands each snapshot to the recorder as an `Arc` (nothing is copied) over a
//! bounded queue with `try_send`: when the store falls behind (a stalled disk), the sample is
//! dropped and counted, never waited for. Storing a sample with ~600 processes costs about a
//! quarter of what sampling it does (encode ~0.6 ms + compress ~0.45 ms, see ARCHITECTURE.md),
//! so it does not run on the sampling thread, and no HTTP handler ever touches the store.
//!
//! What this module does not do: decide where the store is, create the directory or open it.
//! `proctor serve` does that and passes an open [`Writer`] or the reason there is none
//! ([`Recording`]); a store that cannot be opened is reported, never a reason to stop serving.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use proctor_model::Sample;
use proctor_procfs::system::thread_cpu_ns;
use proctor_store::{AppendCost, Writer};

use crate::agent::Snapshot;

/// Snapshots the queue holds while the store is slow. Each is one sample's memory (a few hundred
/// KiB with ~600 processes), so the bound is small: at a 1 s interval it rides out a 4 s stall.
pub const QUEUE_CAPACITY: usize = 4;

/// What the agent does with each raw sample besides serving it.
#[derive(Debug, Default)]
pub enum Recording {
    /// Not asked for (`--no-record`, and in-process use unless configured).
    #[default]
    Off,
    /// Asked for, but the store could not be opened (or there was no directory to open):
    /// serve anyway and say why.
    Failed { dir: Option<PathBuf>, error: String },
    /// Append every sample to this store (boxed: a writer is large beside the other cases).
    On(Box<Writer>),
}

/// The recorder's figures, cumulative since start. Copied into every snapshot, so they lag the
/// snapshot that carries them by one sample (that one is still on its way to the store).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordingStatus {
    /// Samples are being written (a store is open).
    pub enabled: bool,
    /// The data directory asked for; `None` when recording is off.
    pub dir: Option<PathBuf>,
    /// Why nothing is recorded although it was asked for (the store could not be opened).
    pub error: Option<String>,
    pub frames_written: u64,
    pub key_frames: u64,
    /// What the store's files grew by: frame headers plus compressed payloads.
    pub bytes_written: u64,
    /// Samples not recorded because the queue was full (the store fell behind).
    pub dropped: u64,
    pub write_errors: u64,
    pub last_write_error: Option<String>,
    /// CPU of the recorder thread: encoding, compressing and writing.
    pub write_cpu_ns: u64,
}

/// Where samples go. A trait so tests can stand in for a store that stalls or fails.
trait Sink: Send + 'static {
    fn append(&mut self, sample: &Sample) -> Result<AppendCost, String>;
}

impl Sink for Writer {
    fn append(&mut self, sample: &Sample) -> Result<AppendCost, String> {
        Writer::append(self, sample).map_err(|e| e.to_string())
    }
}

/// Counters the recorder thread bumps and the agent thread reads, without a lock on the path
/// that counts a write (the error text alone sits behind a mutex, taken only on errors).
#[derive(Debug, Default)]
struct Counters {
    frames: AtomicU64,
    key_frames: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    write_errors: AtomicU64,
    write_cpu_ns: AtomicU64,
    last_write_error: Mutex<Option<String>>,
}

/// The agent thread's handle on the recorder thread.
#[derive(Debug)]
pub(crate) struct Recorder {
    dir: Option<PathBuf>,
    error: Option<String>,
    /// The sending half of the queue. The recorder thread owns the receiving half and ends once
    /// this is dropped and the queue is drained.
    queue: Option<SyncSender<Arc<Snapshot>>>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    pub(crate) fn start(recording: Recording) -> std::io::Result<Recorder> {
        match recording {
            Recording::Off => Ok(Recorder::idle(None, None)),
            Recording::Failed { dir, error } => Ok(Recorder::idle(dir, Some(error))),
            Recording::On(writer) => {
                let dir = writer.dir().to_owned();
                Recorder::spawn(*writer, dir, QUEUE_CAPACITY)
            }
        }
    }

    fn idle(dir: Option<PathBuf>, error: Option<String>) -> Recorder {
        Recorder { dir, error, queue: None, counters: Arc::default(), thread: None }
    }

    fn spawn(sink: impl Sink, dir: PathBuf, capacity: usize) -> std::io::Result<Recorder> {
        let (queue, receiver) = sync_channel(capacity);
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("proctor-record".into())
            .spawn(move || record(sink, &receiver, &thread_counters))?;
        Ok(Recorder { dir: Some(dir), error: None, queue: Some(queue), counters, thread: Some(thread) })
    }

    /// Queues `snapshot`'s sample for the store; never waits. A full queue drops it (counted).
    pub(crate) fn submit(&self, snapshot: &Arc<Snapshot>) {
        let Some(queue) = &self.queue else { return };
        match queue.try_send(Arc::clone(snapshot)) {
            Ok(()) => {}
            // Disconnected only if the recorder thread panicked: its samples are lost too.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn status(&self) -> RecordingStatus {
        let c = &self.counters;
        RecordingStatus {
            enabled: self.queue.is_some(),
            dir: self.dir.clone(),
            error: self.error.clone(),
            frames_written: c.frames.load(Ordering::Relaxed),
            key_frames: c.key_frames.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            last_write_error: c.last_write_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            write_cpu_ns: c.write_cpu_ns.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Recorder {
    /// Closes the queue and waits for the recorder to write what it holds (at most
    /// [`QUEUE_CAPACITY`] samples), so the store's lock is released when the agent stops.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The recorder thread: appends until the queue closes. A failed write is counted and the next
/// sample tried again (a full disk may get space back); the store starts a new segment after a
/// failed write, so a torn frame never has good frames after it.
fn record(mut sink: impl Sink, queue: &Receiver<Arc<Snapshot>>, counters: &Counters) {
    while let Ok(snapshot) = queue.recv() {
        let before = thread_cpu_ns();
        let result = sink.append(&snapshot.sample);
        // Freed here rather than after the bookkeeping: the snapshot may be the last reference.
        drop(snapshot);
        counters.write_cpu_ns.fetch_add(thread_cpu_ns().saturating_sub(before), Ordering::Relaxed);
        match result {
            Ok(cost) => {
                counters.frames.fetch_add(1, Ordering::Relaxed);
                counters.key_frames.fetch_add(u64::from(cost.key_frame), Ordering::Relaxed);
                counters.bytes.fetch_add(cost.frame_bytes, Ordering::Relaxed);
            }
            Err(error) => {
                counters.write_errors.fetch_add(1, Ordering::Relaxed);
                *counters.last_write_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Sender};
    use std::time::Duration;

    /// A sink that reports each sample's seq and then waits for permission before returning,
    /// like a store on a stalled disk.
    struct Gate {
        seen: Sender<u64>,
        permits: Receiver<Result<(), String>>,
    }

    impl Sink for Gate {
        fn append(&mut self, sample: &Sample) -> Result<AppendCost, String> {
            let _ = self.seen.send(sample.seq);
            self.permits.recv().map_err(|_| "gate closed".to_string())??;
            Ok(AppendCost { frame_bytes: 100, key_frame: sample.seq == 0, ..AppendCost::default() })
        }
    }

    /// A host-only snapshot of this machine with the given seq.
    fn snapshot(seq: u64) -> Arc<Snapshot> {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            processes: false,
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let mut sample = sampler.sample();
        sample.seq = seq;
        Arc::new(Snapshot {
            host: proctor_model::host_view(&sample, None),
            truth: proctor_model::container_truth(&sample),
            sample,
            interval_secs: None,
            rows: Vec::new(),
            container_cpu_cores: None,
            disk: None,
            agent: crate::agent::AgentSelf::default(),
        })
    }

    #[test]
    fn a_stalled_store_drops_and_counts_without_blocking_the_sender() {
        let (seen_tx, seen) = channel();
        let (permit, permits) = channel();
        let recorder = Recorder::spawn(Gate { seen: seen_tx, permits }, PathBuf::from("/d"), 2).expect("thread");
        let counters = Arc::clone(&recorder.counters);
        recorder.submit(&snapshot(0));
        // The recorder is inside sample 0's stalled write; the queue takes two more, and the
        // rest are dropped at once (a blocking send would hang this test).
        assert_eq!(seen.recv_timeout(Duration::from_secs(10)), Ok(0));
        for seq in 1..=5 {
            recorder.submit(&snapshot(seq));
        }
        let status = recorder.status();
        assert!(status.enabled);
        assert_eq!(status.dropped, 3, "{status:?}");
        assert_eq!(status.frames_written, 0);
        permit.send(Ok(())).expect("gate");
        permit.send(Err("disk full".to_string())).expect("gate");
        permit.send(Ok(())).expect("gate");
        // Dropping the recorder drains the queue and joins its thread.
        drop(recorder);
        assert_eq!(seen.try_iter().collect::<Vec<_>>(), vec![1, 2]);
        let status = Recorder { dir: None, error: None, queue: None, counters, thread: None }.status();
        assert_eq!(status.frames_written, 2);
        assert_eq!(status.key_frames, 1);
        assert_eq!(status.bytes_written, 200);
        assert_eq!(status.write_errors, 1);
        assert_eq!(status.last_write_error.as_deref(), Some("disk full"));
        assert_eq!(status.dropped, 3);
    }

    #[test]
    fn a_store_that_could_not_be_opened_is_reported_not_enabled() {
        let recorder = Recorder::start(Recording::Failed { dir: Some(PathBuf::from("/nope")), error: "gone".into() })
            .expect("no thread");
        recorder.submit(&snapshot(0));
        let status = recorder.status();
        assert!(!status.enabled);
        assert_eq!(status.dir, Some(PathBuf::from("/nope")));
        assert_eq!(status.error.as_deref(), Some("gone"));
        assert_eq!(status.dropped, 0, "nothing is queued, so nothing is dropped");
        let off = Recorder::start(Recording::Off).expect("no thread").status();
        assert_eq!(off, RecordingStatus::default());
    }
}
