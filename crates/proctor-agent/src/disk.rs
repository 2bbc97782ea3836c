//! Filesystem usage of one path (`statvfs`), read on a thread of its own with a timeout.
//!
//! `statvfs` on a network mount whose server is gone does not return: a hung NFS home would
//! stop whichever thread asked. So the sampling thread never asks; a `DiskWatch` thread reads
//! the path every `every`, and readers take the last answer. A read still in flight past
//! `timeout` is reported as hung (with how long), and the watcher waits for it rather than
//! starting more threads that would hang the same way.
//!
//! What it does not do: read more than one path, or decide what a full disk means (the Jupyter
//! shape compares it with its threshold).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_procfs::system::{disk_usage, DiskUsage};

/// What the watcher knows: the last good reading, and the current problem if there is one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskStatus {
    pub usage: Option<DiskUsage>,
    /// How old `usage` is.
    pub age: Option<Duration>,
    /// Why there is no current reading: the path's error, or a read hung past the timeout.
    pub error: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    usage: Option<(DiskUsage, Instant)>,
    error: Option<String>,
    /// When the read in flight started, while one is.
    in_flight: Option<Instant>,
    stop: bool,
}

/// A watcher of one path's usage. Dropping it stops the thread (a read hung in the kernel is
/// left behind: it cannot be interrupted, and it exits when the call returns).
#[derive(Debug)]
pub struct DiskWatch {
    path: PathBuf,
    timeout: Duration,
    state: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl DiskWatch {
    /// Reads `path` now (in the watcher thread) and every `every` after.
    pub fn start(path: &Path, every: Duration, timeout: Duration) -> std::io::Result<DiskWatch> {
        DiskWatch::start_with(path, every, timeout, disk_usage)
    }

    /// [`DiskWatch::start`] with another reader in place of `statvfs` (tests stand in a mount
    /// that hangs).
    pub fn start_with(path: &Path, every: Duration, timeout: Duration, read: Reader) -> std::io::Result<DiskWatch> {
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let thread_state = Arc::clone(&state);
        let thread_path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("proctor-disk".into())
            .spawn(move || watch(&thread_path, every, &thread_state, read))?;
        Ok(DiskWatch { path: path.to_owned(), timeout, state, thread: Some(thread) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The latest reading; never waits on the filesystem.
    pub fn status(&self) -> DiskStatus {
        let state = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
        let hung = state.in_flight.map(|t| t.elapsed()).filter(|d| *d > self.timeout);
        DiskStatus {
            usage: state.usage.map(|(u, _)| u),
            age: state.usage.map(|(_, t)| t.elapsed()),
            error: match hung {
                Some(d) => Some(format!(
                    "statvfs of {} has not returned for {:.1} s (a hung mount?)",
                    self.path.display(),
                    d.as_secs_f64()
                )),
                None => state.error.clone(),
            },
        }
    }

    /// Waits (at most `limit`) until the first reading has finished; for one-shot callers.
    pub fn wait_first(&self, limit: Duration) -> DiskStatus {
        let (lock, cv) = &*self.state;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let waited = cv
            .wait_timeout_while(guard, limit, |s| s.usage.is_none() && s.error.is_none())
            .unwrap_or_else(|e| e.into_inner());
        drop(waited);
        self.status()
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        let (lock, cv) = &*self.state;
        let hung = {
            let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
            state.stop = true;
            state.in_flight.is_some_and(|t| t.elapsed() > self.timeout)
        };
        cv.notify_all();
        if let Some(thread) = self.thread.take() {
            // A thread stuck in the kernel is detached rather than joined.
            if !hung {
                let _ = thread.join();
            }
        }
    }
}

/// How the watcher reads a path's usage.
pub type Reader = fn(&Path) -> std::io::Result<DiskUsage>;

fn watch(path: &Path, every: Duration, state: &(Mutex<State>, Condvar), read: Reader) {
    let (lock, cv) = state;
    loop {
        lock.lock().unwrap_or_else(|e| e.into_inner()).in_flight = Some(Instant::now());
        let result = read(path);
        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight = None;
        match result {
            Ok(usage) => {
                s.usage = Some((usage, Instant::now()));
                s.error = None;
            }
            Err(e) => s.error = Some(format!("{}: {e}", path.display())),
        }
        cv.notify_all();
        let (s, _) = cv.wait_timeout_while(s, every, |s| !s.stop).unwrap_or_else(|e| e.into_inner());
        if s.stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_real_path_and_reports_a_missing_one() {
        let watch = DiskWatch::start(Path::new("/"), Duration::from_secs(60), Duration::from_secs(5)).expect("thread");
        let status = watch.wait_first(Duration::from_secs(10));
        let usage = status.usage.expect("/ has a filesystem");
        assert!(usage.total_bytes > 0 && usage.used_bytes <= usage.total_bytes, "{usage:?}");
        assert_eq!(status.error, None);
        let missing =
            DiskWatch::start(Path::new("/nonexistent/proctor"), Duration::from_secs(60), Duration::from_secs(5))
                .expect("thread");
        let status = missing.wait_first(Duration::from_secs(10));
        assert_eq!(status.usage, None);
        assert!(status.error.as_deref().is_some_and(|e| e.starts_with("/nonexistent/proctor: ")), "{status:?}");
    }

    /// The stand-in mount's gate: whether a read has entered it, whether the test has let it
    /// go, whether a read has come back out.
    static GATE: Mutex<(bool, bool, bool)> = Mutex::new((false, false, false));
    static GATE_CV: Condvar = Condvar::new();

    /// A mount whose server went away: `statvfs` does not return until the test lets it (or,
    /// so that a broken watcher cannot hang the suite, 30 s pass).
    fn hangs(_: &Path) -> std::io::Result<DiskUsage> {
        let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
        gate.0 = true;
        GATE_CV.notify_all();
        gate = GATE_CV.wait_timeout_while(gate, Duration::from_secs(30), |g| !g.1).unwrap_or_else(|e| e.into_inner()).0;
        gate.2 = true;
        Err(std::io::Error::other("gave up"))
    }

    fn returned() -> bool {
        GATE.lock().unwrap_or_else(|e| e.into_inner()).2
    }

    #[test]
    fn a_hung_mount_is_reported_and_never_waited_on() {
        let watch =
            DiskWatch::start_with(Path::new("/mnt/gone"), Duration::from_secs(60), Duration::from_millis(100), hangs)
                .expect("thread");
        let deadline = Instant::now() + Duration::from_secs(20);
        let first = loop {
            let status = watch.status();
            if status.error.is_some() || Instant::now() > deadline {
                break status;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(first.usage, None);
        let error = first.error.unwrap_or_default();
        assert!(
            error.starts_with("statvfs of /mnt/gone has not returned for") && error.contains("hung mount"),
            "{error}"
        );
        // Asking again answers while the read is still stuck: a status that waited on the mount
        // would come back only once the read had (30 s on), and the read would be seen out.
        assert!(watch.status().error.is_some());
        assert!(!returned(), "status waited on the mount");
        let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
        gate.1 = true;
        GATE_CV.notify_all();
    }
}
