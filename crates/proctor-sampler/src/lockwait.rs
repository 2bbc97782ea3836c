//! The target's side of the stall ledger: how long a target's own threads waited for their mmap
//! lock while a proctor read held it, from the kernel's `mmap_lock` tracepoints (5.10+).
//!
//! Untraced, the ledger times each read by wall clock, an upper bound on the hold; whether the target
//! noticed depends on whether one of its threads wanted the lock meanwhile (a reader behind a
//! read hold waits only when a writer, an `mmap` or `munmap`, is queued). So around each read
//! the worker turns on a tracing instance of its own (`instances/proctor-PID-N` under tracefs,
//! with `mmap_lock_start_locking`, `mmap_lock_acquire_returned` and `mmap_lock_released`
//! enabled and the TGID recorded), and afterwards reads what the instance caught:
//!
//! - its own thread's holds: from each `acquire_returned` (success) to the `released` of the same
//!   `mm` — the target's `mm`, which the worker learns from its own events;
//! - the target's threads' waits (TGID the target's pid, the same `mm`): from `start_locking`
//!   to `acquire_returned`, or to the end of the trace if the thread was still waiting;
//! - what the target waited is the overlap of the two. A wait behind someone else's hold is
//!   not proctor's and is not counted.
//!
//! The events stay enabled while the worker runs (turning a tracepoint on and off is an RCU
//! synchronization each time), and the instance records only between `tracing_on` 1 and 0
//! around a read; every other mmap lock operation on the host pays the disabled instance's
//! check. The text is read to a bound, and a trace whose buffer overflowed says so (`lost`).
//! Timestamps are the trace's (microseconds in its text form).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use proctor_procfs::Root;

/// The events read, under `events/mmap_lock/`.
const EVENTS: [&str; 3] = ["mmap_lock_start_locking", "mmap_lock_acquire_returned", "mmap_lock_released"];

/// The most trace text read after one read (a busy host's every mmap lock operation during a
/// long read); past it the rest is left out and the measure says it lost events.
const MAX_TRACE_BYTES: usize = 8 << 20;

/// The most of a trace's buffer kept between reads.
const KEPT_TRACE_BYTES: usize = 256 << 10;

/// What one traced read found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waited {
    /// The target's threads' waits for their mmap lock that overlapped the worker's holds.
    pub waited_ns: u64,
    /// How many of the target's lock attempts waited on a hold of the worker's.
    pub waits: u64,
    /// The worker's own holds of the target's lock, as the trace saw them (what the ledger
    /// charges, where the trace lost nothing; the read's wall time is an upper bound on it).
    pub held_ns: u64,
    /// The longest of those holds.
    pub longest_ns: u64,
    /// Events in the trace, and whether some were lost (the buffer overflowed or the text was
    /// longer than read): then `waited_ns` may be short.
    pub events: u64,
    pub lost: bool,
}

/// A tracing instance of this process's own, with the mmap lock events enabled.
#[derive(Debug)]
pub struct LockWaits {
    dir: PathBuf,
    /// `None` only while being dropped: an instance with open files cannot be removed.
    files: Option<Files>,
    buf: Vec<u8>,
}

#[derive(Debug)]
struct Files {
    tracing_on: File,
    /// `trace_pipe`, non-blocking: reading it consumes what it gives, so nothing has to reset
    /// the buffers between reads (a reset through `trace` waits out an RCU grace period: ~30 ms
    /// a read here).
    pipe: File,
}

impl LockWaits {
    /// The tracefs under `root` (`/sys/kernel/tracing`, else `/sys/kernel/debug/tracing`), or
    /// why the waits cannot be measured, in words for `doctor`.
    pub fn open(root: &Root) -> Result<LockWaits, String> {
        let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .into_iter()
            .map(|p| root.path(p))
            .find(|p| p.join("instances").is_dir())
            .ok_or("no tracefs mounted (/sys/kernel/tracing; root mounts it with `mount -t tracefs nodev /sys/kernel/tracing`)")?;
        if let Some(missing) = EVENTS.iter().find(|e| !tracefs.join("events/mmap_lock").join(e).is_dir()) {
            return Err(format!("this kernel has no {missing} tracepoint (5.10 and later have it)"));
        }
        let instances = tracefs.join("instances");
        remove_stale(&instances);
        // One instance per opener: a process may run two samplers (`doctor` reads one while it
        // checks this), and an instance's trace_pipe takes one reader.
        static OPENED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = instances.join(format!("proctor-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create a tracing instance in {}: {e}", instances.display())),
        }
        let set = |path: &str, value: &str| -> Result<(), String> {
            std::fs::write(dir.join(path), value).map_err(|e| format!("cannot set {}: {e}", dir.join(path).display()))
        };
        let opened = (|| {
            set("tracing_on", "0")?;
            set("options/record-tgid", "1")?;
            for e in EVENTS {
                set(&format!("events/mmap_lock/{e}/enable"), "1")?;
            }
            let open = |path: &str, options: &mut OpenOptions| {
                options.open(dir.join(path)).map_err(|e| format!("cannot open {}: {e}", dir.join(path).display()))
            };
            let tracing_on = open("tracing_on", OpenOptions::new().write(true))?;
            let pipe = open("trace_pipe", OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK))?;
            Ok((tracing_on, pipe))
        })();
        match opened {
            Ok((tracing_on, pipe)) => Ok(LockWaits { dir, files: Some(Files { tracing_on, pipe }), buf: Vec::new() }),
            Err(why) => {
                let _ = std::fs::remove_dir(&dir);
                Err(why)
            }
        }
    }

    /// Runs `read` (a read of `pid`'s files on this thread) with the instance recording, and
    /// says what `pid`'s threads waited on it. `None`: the trace could not be used this time.
    pub fn around<R>(&mut self, pid: u32, read: impl FnOnce() -> R) -> (R, Option<Waited>) {
        let Some(files) = self.files.as_mut() else { return (read(), None) };
        // Whatever an earlier read left unread is not this read's.
        if drain(&mut files.pipe, &mut self.buf).is_none() || files.tracing_on.write_all(b"1").is_err() {
            return (read(), None);
        }
        let result = read();
        if files.tracing_on.write_all(b"0").is_err() {
            return (result, None);
        }
        let Some(over) = drain(&mut files.pipe, &mut self.buf) else { return (result, None) };
        let mut waited = waits(&self.buf, own_tid(), pid);
        waited.lost |= over;
        // A trace of a host busy mapping memory can be megabytes; the worker keeps no more
        // than the usual few kilobytes between reads.
        if self.buf.capacity() > KEPT_TRACE_BYTES {
            self.buf = Vec::new();
        }
        (result, Some(waited))
    }
}

/// Reads what the pipe holds into `buf`, up to [`MAX_TRACE_BYTES`] (the rest is read and
/// dropped); `Some(true)` when there was more than that. `None`: the pipe failed.
fn drain(pipe: &mut File, buf: &mut Vec<u8>) -> Option<bool> {
    buf.clear();
    let mut over = false;
    let mut chunk = [0u8; 64 << 10];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return Some(over),
            Ok(n) if buf.len() + n <= MAX_TRACE_BYTES => buf.extend_from_slice(&chunk[..n]),
            Ok(_) => over = true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Some(over),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

impl Drop for LockWaits {
    fn drop(&mut self) {
        if let Some(mut files) = self.files.take() {
            let _ = files.tracing_on.write_all(b"0");
        }
        // With its files closed, an instance whose events are enabled can be removed; that
        // also disables them.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Instances a proctor that is no longer running left behind (it was killed).
fn remove_stale(instances: &Path) {
    let Ok(entries) = std::fs::read_dir(instances) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("proctor-")).and_then(|n| n.split_once('-'));
        let Some(pid) = pid.and_then(|(pid, n)| n.parse::<u32>().ok().and(pid.parse::<u32>().ok())) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

fn own_tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// One line of the trace's text.
struct Event<'a> {
    tid: i32,
    tgid: Option<u32>,
    ns: u64,
    name: &'a str,
    mm: &'a str,
    success: bool,
}

/// `  TASK-PID  (  TGID) [CPU] FLAGS  SECS.USECS: NAME: mm=PTR memcg…=… write=… [success=…]`
fn parse_line(line: &str) -> Option<Event<'_>> {
    let (head, rest) = line.split_once(": mmap_lock_")?;
    let (name, fields) = rest.split_once(": ")?;
    let (task, after) = head.split_once(" [").map_or((head, ""), |(t, a)| (t, a));
    let ns = secs_ns(after.split_whitespace().last()?)?;
    let (task, tgid) = match task.trim_end().strip_suffix(')').and_then(|t| t.rsplit_once('(')) {
        Some((task, tgid)) => (task, tgid.trim().parse().ok()),
        None => (task, None),
    };
    let tid = task.trim_end().rsplit_once('-')?.1.parse().ok()?;
    let mm = fields.split_whitespace().find_map(|f| f.strip_prefix("mm=")).filter(|mm| !mm.is_empty())?;
    let success = fields.split_whitespace().any(|f| f == "success=true");
    Some(Event { tid, tgid, ns, name, mm, success })
}

/// `11521.412809` → nanoseconds.
fn secs_ns(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = 10u64.pow(9 - frac.len() as u32);
    secs.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac.parse::<u64>().ok()? * scale)
}

/// What `target`'s threads waited on holds of thread `own`, from a trace's text.
pub fn waits(text: &[u8], own: i32, target: u32) -> Waited {
    let text = String::from_utf8_lossy(text);
    let mut out = Waited::default();
    // The worker's holds, by mm: (from, to); an open one has no end yet.
    let mut holds: Vec<(&str, u64, Option<u64>)> = Vec::new();
    // The target's attempts: (tid, mm, from, to).
    let mut attempts: Vec<(i32, &str, u64, Option<u64>)> = Vec::new();
    let mut end = 0u64;
    for line in text.lines() {
        if let Some(counts) = line.strip_prefix("# entries-in-buffer/entries-written: ") {
            let mut n = counts.split_whitespace().next().unwrap_or("").split('/');
            out.lost |= n.next() != n.next();
            continue;
        }
        // trace_pipe's word for events the buffer overwrote: `CPU:1 [LOST 12 EVENTS]`.
        if line.contains("[LOST ") {
            out.lost = true;
            continue;
        }
        let Some(e) = parse_line(line) else { continue };
        out.events += 1;
        end = end.max(e.ns);
        if e.tid == own {
            match e.name {
                "acquire_returned" if e.success => holds.push((e.mm, e.ns, None)),
                "released" => {
                    if let Some(h) = holds.iter_mut().rev().find(|h| h.0 == e.mm && h.2.is_none()) {
                        h.2 = Some(e.ns);
                    }
                }
                _ => {}
            }
        } else if e.tgid.is_none_or(|g| g == target) {
            match e.name {
                "start_locking" => attempts.push((e.tid, e.mm, e.ns, None)),
                "acquire_returned" => {
                    if let Some(a) = attempts.iter_mut().rev().find(|a| a.0 == e.tid && a.1 == e.mm && a.3.is_none()) {
                        a.3 = Some(e.ns);
                    }
                }
                _ => {}
            }
        }
    }
    for &(_, from, to) in &holds {
        let held = to.unwrap_or(end).saturating_sub(from);
        out.held_ns += held;
        out.longest_ns = out.longest_ns.max(held);
    }
    for &(_, mm, from, to) in &attempts {
        let to = to.unwrap_or(end);
        let overlap: u64 = holds
            .iter()
            .filter(|h| h.0 == mm)
            .map(|&(_, h_from, h_to)| to.min(h_to.unwrap_or(end)).saturating_sub(from.max(h_from)))
            .sum();
        if overlap > 0 {
            out.waited_ns += overlap;
            out.waits += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace as the instance writes it: the worker (tid 50) reads pid 700's smaps_rollup from
    /// 100.000100 to 100.005100; 700's thread 701 asks for the write lock at 100.001000 and gets
    /// it at 100.005200 (4.1 ms behind the worker's hold); thread 702 reads an unrelated mm; a
    /// `ps` (tgid 900) waits on 700's mm too but is not the target.
    const TRACE: &str = "\
# tracer: nop
#
# entries-in-buffer/entries-written: 9/9   #P:2
#
#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION
#              | |           |       |   |||||     |         |
     proctor-pss-50      (     40) [000] .....   100.000090: mmap_lock_start_locking: mm=00000000aaaa memcg_id=1 write=false
     proctor-pss-50      (     40) [000] .....   100.000100: mmap_lock_acquire_returned: mm=00000000aaaa memcg_id=1 write=false success=true
          python-701     (    700) [001] .....   100.001000: mmap_lock_start_locking: mm=00000000aaaa memcg_id=7 write=true
          python-702     (    700) [001] .....   100.001500: mmap_lock_start_locking: mm=00000000bbbb memcg_id=7 write=false
          python-702     (    700) [001] .....   100.001501: mmap_lock_acquire_returned: mm=00000000bbbb memcg_id=7 write=false success=true
              ps-901     (    900) [001] .....   100.002000: mmap_lock_start_locking: mm=00000000aaaa memcg_id=7 write=false
     proctor-pss-50      (     40) [000] .....   100.005100: mmap_lock_released: mm=00000000aaaa memcg_id=1 write=false
          python-701     (    700) [001] .....   100.005200: mmap_lock_acquire_returned: mm=00000000aaaa memcg_id=7 write=true success=true
          python-701     (    700) [001] .....   100.005300: mmap_lock_released: mm=00000000aaaa memcg_id=7 write=true
";

    #[test]
    fn the_target_is_charged_only_its_own_waits_on_the_workers_hold() {
        let w = waits(TRACE.as_bytes(), 50, 700);
        assert_eq!(
            w,
            Waited {
                waited_ns: 4_100_000,
                waits: 1,
                held_ns: 5_000_000,
                longest_ns: 5_000_000,
                events: 9,
                lost: false
            }
        );
        // Seen as pid 900's: the ps waited from 100.002000 to the end of the trace, of which the
        // hold covered 3.1 ms.
        let ps = waits(TRACE.as_bytes(), 50, 900);
        assert_eq!((ps.waited_ns, ps.waits), (3_100_000, 1));
    }

    #[test]
    fn a_wait_outside_the_workers_hold_is_not_proctors() {
        // The same trace without the worker's acquisition: 701 waited, but not on proctor.
        let text: String = TRACE
            .lines()
            .filter(|l| !l.contains("proctor-pss-50      (     40) [000] .....   100.000100"))
            .map(|l| format!("{l}\n"))
            .collect();
        let w = waits(text.as_bytes(), 50, 700);
        assert_eq!((w.waited_ns, w.waits, w.held_ns), (0, 0, 0));
    }

    #[test]
    fn an_overflowed_buffer_and_garbage_lines_are_survived() {
        let text = "# entries-in-buffer/entries-written: 100/250   #P:2\nnot a trace line\n x-1 [0] 9.9: mmap_lock_released: mm=\n";
        let w = waits(text.as_bytes(), 1, 2);
        assert!(w.lost);
        assert!(waits(b"CPU:1 [LOST 12 EVENTS]\n", 1, 2).lost);
        assert_eq!(w.events, 0);
        assert_eq!(secs_ns("11521.412809"), Some(11_521_412_809_000));
        assert_eq!(secs_ns("1.5"), Some(1_500_000_000));
        assert_eq!([secs_ns("1."), secs_ns("x.1"), secs_ns("1.1234567890")], [None, None, None]);
    }
}
