//! Recording inside the agent: every published snapshot's raw [`Sample`] appended to a
//! `proctor-store` directory by `proctor-store`'s [`Recorder`], a thread of its own.
//!
//! The agent thread hands each snapshot over as an `Arc` (nothing is copied) with `try_send`:
//! when the store falls behind (a stalled disk), the sample is dropped and counted, never
//! waited for. Storing a sample with ~600 processes costs about a quarter of what sampling it
//! does (docs/performance.md), so the sampling thread never encodes, compresses or writes.
//!
//! What this module does not do: decide where the store is, create the directory or open it.
//! The caller passes an open sink (a [`proctor_store::Writer`], possibly wrapped) or the reason
//! there is none ([`Recording`]); a store that cannot be opened is reported, never a reason to
//! stop sampling.

use std::path::PathBuf;
use std::sync::Arc;

use proctor_model::Sample;
use proctor_store::{AppendCost, Recorder as StoreRecorder, Sink};

use crate::snapshot::{RecordingStatus, Snapshot};

/// Snapshots the queue holds while the store is slow. Each is one sample's memory (a few hundred
/// KiB with ~600 processes), so the bound is small: at a 1 s interval it rides out a 4 s stall.
pub const QUEUE_CAPACITY: usize = 4;

/// What the agent does with each raw sample besides publishing it.
#[derive(Default)]
pub enum Recording {
    /// Not asked for (`--no-record`, and in-process use unless configured).
    #[default]
    Off,
    /// Asked for, but the store could not be opened (or there was no directory to open):
    /// sample anyway and say why.
    Failed { dir: Option<PathBuf>, error: String },
    /// Append every sample to `sink`, the store in `dir`, through a queue of `queue` samples
    /// ([`QUEUE_CAPACITY`] unless recording is all the process does).
    On { dir: PathBuf, sink: Box<dyn Sink<Sample>>, queue: usize },
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recording::Off => write!(f, "Off"),
            Recording::Failed { dir, error } => {
                f.debug_struct("Failed").field("dir", dir).field("error", error).finish()
            }
            Recording::On { dir, .. } => f.debug_struct("On").field("dir", dir).finish_non_exhaustive(),
        }
    }
}

impl Recording {
    /// Records into an open writer.
    pub fn writer(writer: proctor_store::Writer) -> Recording {
        Recording::On { dir: writer.dir().to_owned(), sink: Box::new(writer), queue: QUEUE_CAPACITY }
    }
}

/// Writes a snapshot's sample, so the queue carries `Arc`s and nothing is copied.
struct SnapshotSink(Box<dyn Sink<Sample>>);

impl Sink<Arc<Snapshot>> for SnapshotSink {
    fn append(&mut self, snapshot: &Arc<Snapshot>) -> Result<AppendCost, String> {
        self.0.append(&snapshot.sample)
    }
}

/// The agent thread's handle on its recorder.
#[derive(Debug)]
pub(crate) struct Recorder {
    dir: Option<PathBuf>,
    error: Option<String>,
    inner: Option<StoreRecorder<Arc<Snapshot>>>,
}

impl Recorder {
    pub(crate) fn start(recording: Recording) -> std::io::Result<Recorder> {
        Ok(match recording {
            Recording::Off => Recorder { dir: None, error: None, inner: None },
            Recording::Failed { dir, error } => Recorder { dir, error: Some(error), inner: None },
            Recording::On { dir, sink, queue } => Recorder {
                dir: Some(dir),
                error: None,
                inner: Some(StoreRecorder::spawn("proctor-record", SnapshotSink(sink), queue.max(1))?),
            },
        })
    }

    /// Queues `snapshot`'s sample for the store; never waits. A full queue drops it (counted).
    pub(crate) fn submit(&self, snapshot: &Arc<Snapshot>) {
        if let Some(inner) = &self.inner {
            inner.submit(Arc::clone(snapshot));
        }
    }

    pub(crate) fn status(&self) -> RecordingStatus {
        RecordingStatus {
            enabled: self.inner.is_some(),
            dir: self.dir.clone(),
            error: self.error.clone(),
            stats: self.inner.as_ref().map(StoreRecorder::stats).unwrap_or_default(),
        }
    }

    /// Drains the queue and joins the recorder thread (the store's lock is released after).
    pub(crate) fn stop(self) -> RecordingStatus {
        let mut status = self.status();
        if let Some(inner) = self.inner {
            status.stats = inner.stop();
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_could_not_be_opened_is_reported_not_enabled() {
        let recorder = Recorder::start(Recording::Failed { dir: Some(PathBuf::from("/nope")), error: "gone".into() })
            .expect("no thread");
        let status = recorder.status();
        assert!(!status.enabled);
        assert_eq!(status.dir, Some(PathBuf::from("/nope")));
        assert_eq!(status.error.as_deref(), Some("gone"));
        assert_eq!(status.stats.dropped, 0, "nothing is queued, so nothing is dropped");
        let off = Recorder::start(Recording::Off).expect("no thread").status();
        assert_eq!(off, RecordingStatus::default());
    }
}
