//! A store writer on a thread of its own, fed over a bounded queue: the one way proctor records
//! anything while it does something else (the agent's samples, probe results, statsd flushes).
//!
//! The producer (the sampling thread, a probe's collector, statsd's flush thread) hands each
//! item over with `try_send`: when the store falls behind (a stalled or full disk), the item is
//! dropped and counted, never waited for. The recorder thread owns the [`Sink`] (normally a
//! [`Writer`]) and counts what it wrote, what that cost and what failed, in atomics any thread
//! can read without a lock (the last error's text alone sits behind a mutex, taken only on
//! errors). A failed write is counted and later items tried again: a full disk may get space
//! back. The writer cuts a failed write back to its last whole frame and keeps its segment (so
//! a torn frame never has good frames after it, and a full disk makes no new files), and it
//! does not try the disk again for a backoff of the items' own time (1 s, doubling to 32 s);
//! the items in between fail at once, counted like any failed write.
//!
//! What this module does not do: decide where a store lives, open it, or print anything.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use proctor_model::Sample;

use crate::codec::Event;
use crate::writer::{AppendCost, Writer};

/// Where a recorder's items go. A trait so callers can wrap a writer (to announce each write)
/// and tests can stand in for a store that stalls or fails.
pub trait Sink<T>: Send + 'static {
    fn append(&mut self, item: &T) -> Result<AppendCost, String>;
}

impl Sink<Sample> for Writer {
    fn append(&mut self, sample: &Sample) -> Result<AppendCost, String> {
        Writer::append(self, sample).map_err(|e| e.to_string())
    }
}

/// An event with its time, as a stream stores it.
impl Sink<(u64, Event)> for Writer {
    fn append(&mut self, (unix_ns, event): &(u64, Event)) -> Result<AppendCost, String> {
        self.append_event(*unix_ns, event).map_err(|e| e.to_string())
    }
}

impl<T, S: Sink<T> + ?Sized> Sink<T> for Box<S> {
    fn append(&mut self, item: &T) -> Result<AppendCost, String> {
        (**self).append(item)
    }
}

/// What a recorder did, cumulative since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecorderStats {
    pub written: u64,
    pub key_frames: u64,
    /// What the store's files grew by: frame headers plus compressed payloads.
    pub frame_bytes: u64,
    /// Encoded records before compression.
    pub record_bytes: u64,
    pub encode_ns: u64,
    pub compress_ns: u64,
    /// The `write`s (and `fdatasync`s when configured), rotation and retention.
    pub write_ns: u64,
    /// Items not recorded because the queue was full (the store fell behind).
    pub dropped: u64,
    pub write_errors: u64,
    pub last_write_error: Option<String>,
    /// CPU of the recorder thread: encoding, compressing and writing.
    pub cpu_ns: u64,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    key_frames: AtomicU64,
    frame_bytes: AtomicU64,
    record_bytes: AtomicU64,
    encode_ns: AtomicU64,
    compress_ns: AtomicU64,
    write_ns: AtomicU64,
    dropped: AtomicU64,
    write_errors: AtomicU64,
    cpu_ns: AtomicU64,
    last_write_error: Mutex<Option<String>>,
}

impl Counters {
    fn stats(&self) -> RecorderStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RecorderStats {
            written: load(&self.written),
            key_frames: load(&self.key_frames),
            frame_bytes: load(&self.frame_bytes),
            record_bytes: load(&self.record_bytes),
            encode_ns: load(&self.encode_ns),
            compress_ns: load(&self.compress_ns),
            write_ns: load(&self.write_ns),
            dropped: load(&self.dropped),
            write_errors: load(&self.write_errors),
            last_write_error: self.last_write_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            cpu_ns: load(&self.cpu_ns),
        }
    }
}

/// The producer's handle on a recorder thread. Dropping it (or [`Recorder::stop`]) closes the
/// queue and waits for the thread to write what it holds, so the store's lock is released when
/// this returns.
#[derive(Debug)]
pub struct Recorder<T: Send + 'static> {
    /// The sending half; the recorder thread owns the receiving half and ends once every
    /// sender is dropped and the queue is drained.
    queue: Option<SyncSender<T>>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

/// A cloneable handle that only enqueues, for a producer that lives on another thread (statsd's
/// flush thread). The recorder thread ends only when every sender is gone too.
#[derive(Debug)]
pub struct RecorderSender<T> {
    queue: SyncSender<T>,
    counters: Arc<Counters>,
}

impl<T> Clone for RecorderSender<T> {
    fn clone(&self) -> Self {
        RecorderSender { queue: self.queue.clone(), counters: Arc::clone(&self.counters) }
    }
}

impl<T: Send + 'static> RecorderSender<T> {
    /// Queues `item`; never waits. A full queue drops it (counted). Returns whether it queued.
    pub fn submit(&self, item: T) -> bool {
        try_send(&self.queue, &self.counters, item)
    }
}

fn try_send<T>(queue: &SyncSender<T>, counters: &Counters, item: T) -> bool {
    match queue.try_send(item) {
        Ok(()) => true,
        // Disconnected only if the recorder thread panicked: its items are lost too.
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

impl<T: Send + 'static> Recorder<T> {
    /// Starts a thread named `thread_name` that appends every queued item to `sink`; the queue
    /// holds at most `capacity` items.
    pub fn spawn(thread_name: &str, sink: impl Sink<T>, capacity: usize) -> std::io::Result<Recorder<T>> {
        let (queue, receiver) = sync_channel(capacity);
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || record(sink, &receiver, &thread_counters))?;
        Ok(Recorder { queue: Some(queue), counters, thread: Some(thread) })
    }

    /// Queues `item` for the store; never waits. A full queue drops it (counted).
    pub fn submit(&self, item: T) -> bool {
        match &self.queue {
            Some(queue) => try_send(queue, &self.counters, item),
            None => false,
        }
    }

    /// A handle for another producer thread.
    pub fn sender(&self) -> Option<RecorderSender<T>> {
        Some(RecorderSender { queue: self.queue.clone()?, counters: Arc::clone(&self.counters) })
    }

    pub fn stats(&self) -> RecorderStats {
        self.counters.stats()
    }

    /// Closes the queue, waits until what it held is written, and returns the final figures.
    /// Senders handed out by [`Recorder::sender`] must be dropped first, or this waits for them.
    pub fn stop(mut self) -> RecorderStats {
        self.close();
        self.counters.stats()
    }

    fn close(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<T: Send + 'static> Drop for Recorder<T> {
    fn drop(&mut self) {
        self.close();
    }
}

/// The recorder thread: appends until the queue closes.
fn record<T>(mut sink: impl Sink<T>, queue: &Receiver<T>, counters: &Counters) {
    while let Ok(item) = queue.recv() {
        let before = proctor_procfs::system::thread_cpu_ns();
        let result = sink.append(&item);
        // Freed before the bookkeeping: the item may be the last reference to a big sample.
        drop(item);
        counters.cpu_ns.fetch_add(proctor_procfs::system::thread_cpu_ns().saturating_sub(before), Ordering::Relaxed);
        match result {
            Ok(cost) => {
                counters.written.fetch_add(1, Ordering::Relaxed);
                counters.key_frames.fetch_add(u64::from(cost.key_frame), Ordering::Relaxed);
                counters.frame_bytes.fetch_add(cost.frame_bytes, Ordering::Relaxed);
                counters.record_bytes.fetch_add(cost.record_bytes, Ordering::Relaxed);
                counters.encode_ns.fetch_add(cost.encode_ns, Ordering::Relaxed);
                counters.compress_ns.fetch_add(cost.compress_ns, Ordering::Relaxed);
                counters.write_ns.fetch_add(cost.write_ns, Ordering::Relaxed);
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

    /// A sink that reports each item and then waits for permission before returning, like a
    /// store on a stalled disk.
    struct Gate {
        seen: Sender<u64>,
        permits: Receiver<Result<(), String>>,
    }

    impl Sink<u64> for Gate {
        fn append(&mut self, item: &u64) -> Result<AppendCost, String> {
            let _ = self.seen.send(*item);
            self.permits.recv().map_err(|_| "gate closed".to_string())??;
            Ok(AppendCost { frame_bytes: 100, record_bytes: 400, key_frame: *item == 0, ..AppendCost::default() })
        }
    }

    #[test]
    fn a_stalled_store_drops_and_counts_without_blocking_the_producer() {
        let (seen_tx, seen) = channel();
        let (permit, permits) = channel();
        let recorder = Recorder::spawn("test-recorder", Gate { seen: seen_tx, permits }, 2).expect("thread");
        assert!(recorder.submit(0));
        // The recorder is inside item 0's stalled write; the queue takes two more, and the rest
        // are dropped at once (a blocking send would hang this test).
        assert_eq!(seen.recv_timeout(Duration::from_secs(10)), Ok(0));
        let sender = recorder.sender().expect("open");
        let queued: Vec<bool> =
            (1..=5).map(|i| if i % 2 == 0 { sender.submit(i) } else { recorder.submit(i) }).collect();
        drop(sender);
        assert_eq!(queued, [true, true, false, false, false]);
        let stats = recorder.stats();
        assert_eq!((stats.dropped, stats.written), (3, 0), "{stats:?}");
        permit.send(Ok(())).expect("gate");
        permit.send(Err("disk full".to_string())).expect("gate");
        permit.send(Ok(())).expect("gate");
        // Stopping drains the queue and joins the thread.
        let stats = recorder.stop();
        assert_eq!(seen.try_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(stats.written, 2);
        assert_eq!(stats.key_frames, 1);
        assert_eq!((stats.frame_bytes, stats.record_bytes), (200, 800));
        assert_eq!(stats.write_errors, 1);
        assert_eq!(stats.last_write_error.as_deref(), Some("disk full"));
        assert_eq!(stats.dropped, 3);
    }
}
