//! The DRM worker: per-process GPU use from `/proc/PID/fdinfo`, off the sampling thread.
//!
//! Finding a process's GPU files means walking `/proc/PID/fd` (a `readlink` per fd), which is
//! the kind of read this project keeps off the sampling thread. So the sampler only hands this
//! worker the live (pid, start time) list each cycle; the worker
//!
//! 1. `stat`s each process's `/proc/PID/fd` (its size is the fd count on Linux 6.2 and later)
//!    and walks the fds only when that count changed since the last walk, so a process's fd set
//!    is walked once per change, not once per cycle. Where the kernel reports no count (size
//!    0), a process is walked again at most every `rewalk`.
//! 2. reads `fdinfo` only for the fds that point at `/dev/dri/*`, and parses the `drm-` keys.
//! 3. credits each client (device and `drm-client-id`) to the lowest pid holding it, once, and
//!    publishes the list for the sampler to copy into the next sample.
//!
//! Walks are budgeted: the worker's thread CPU time may exceed `budget` × wall time by at most a
//! small burst; walks past that wait for the next round (counted as `deferred`). Reading the
//! fdinfo of known GPU fds is not deferred: there are few, and they carry the figures. A
//! process whose fds this process may not list (another user's, without `CAP_SYS_PTRACE`) is
//! counted once under `denied` and not retried while it lives.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_model::gpu::GpuClient;
use proctor_procfs::drm::{is_drm_node, parse_fdinfo};
use proctor_procfs::system::thread_cpu_ns;
use proctor_procfs::{ErrorKind, Root};
use serde::Serialize;

/// GPU fds kept per process: a program holds a few (one per device, a dup or two). A process
/// that opens thousands of render nodes cannot make each round read thousands of fdinfo files;
/// the fds past this are counted (`fds_skipped`), not read.
pub const MAX_DRM_FDS: usize = 64;

/// A client: its device (`drm-pdev`), driver and `drm-client-id`.
type ClientKey = (Option<Arc<str>>, Arc<str>, u64);

/// CPU the worker may spend ahead of its budget before walks wait (one walk of a large process
/// can cost a few milliseconds).
const BURST_NS: u64 = 20_000_000;

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DrmStats {
    /// `/proc/PID/fd` walks done.
    pub walks: u64,
    /// Walks put off to a later round by the budget.
    pub deferred: u64,
    pub fdinfo_reads: u64,
    /// Processes holding a GPU fd, and distinct clients, at the last round.
    pub processes: u64,
    pub clients: u64,
    /// Processes whose fds could not be listed (permission), counted once each.
    pub denied: u64,
    /// Other failed reads (not a process exiting mid-read).
    pub errors: u64,
    /// GPU fds past [`MAX_DRM_FDS`] in a process, at the last walk of each, summed.
    pub fds_skipped: u64,
    pub cpu_ns: u64,
    pub budget: f64,
}

#[derive(Debug)]
struct Known {
    start: u64,
    /// The fd directory's size at the last walk (0: the kernel gives no count).
    fd_size: u64,
    walked_at: Option<Instant>,
    drm_fds: Vec<u32>,
    denied: bool,
}

#[derive(Debug, Default)]
struct State {
    /// The newest live list, not yet taken by the worker.
    offered: Option<Vec<(u32, u64)>>,
    latest: Arc<Vec<GpuClient>>,
    stats: DrmStats,
}

type Shared = crate::worker::Shared<State>;

/// Handle to the worker thread; dropping it stops the thread.
#[derive(Debug)]
pub struct DrmWorker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl DrmWorker {
    /// Starts the worker. `budget` is the share of one core its walks may use; `epoch` is the
    /// sampler's monotonic zero.
    pub fn start(root: Root, budget: f64, rewalk: Duration, epoch: Instant) -> std::io::Result<Self> {
        let shared = Shared::new(State { stats: DrmStats { budget, ..DrmStats::default() }, ..State::default() });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("proctor-drm".into())
            .spawn(move || worker_loop(&for_thread, &root, budget, rewalk, epoch))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Hands over the live processes (sorted by pid); a list the worker has not taken yet is
    /// replaced, never queued.
    pub fn offer(&self, live: Vec<(u32, u64)>) {
        let mut state = self.shared.lock();
        state.offered = Some(live);
        drop(state);
        self.shared.wake.notify_one();
    }

    /// The clients found by the newest finished round.
    pub fn latest(&self) -> Arc<Vec<GpuClient>> {
        Arc::clone(&self.shared.lock().latest)
    }

    pub fn stats(&self) -> DrmStats {
        self.shared.lock().stats
    }
}

impl Drop for DrmWorker {
    fn drop(&mut self) {
        crate::worker::stop_and_join(&self.shared, &mut self.thread);
    }
}

fn worker_loop(shared: &Shared, root: &Root, budget: f64, rewalk: Duration, epoch: Instant) {
    let mut known: HashMap<u32, Known> = HashMap::new();
    let started = Instant::now();
    let cpu_start = thread_cpu_ns();
    let mut buf = Vec::new();
    loop {
        let live = {
            let mut state = shared.lock();
            loop {
                if shared.stopped() {
                    return;
                }
                if let Some(live) = state.offered.take() {
                    break live;
                }
                state = shared
                    .wake
                    .wait_timeout(state, Duration::from_millis(500))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        let mut round = DrmStats::default();
        known.retain(|pid, k| live.binary_search_by_key(pid, |(p, _)| *p).is_ok_and(|i| live[i].1 == k.start));
        for &(pid, start) in &live {
            let k = known.entry(pid).or_insert(Known {
                start,
                fd_size: 0,
                walked_at: None,
                drm_fds: Vec::new(),
                denied: false,
            });
            if k.start != start {
                *k = Known { start, fd_size: 0, walked_at: None, drm_fds: Vec::new(), denied: false };
            }
            if k.denied {
                continue;
            }
            let size = match std::fs::metadata(root.path(format!("/proc/{pid}/fd"))) {
                Ok(m) => m.len(),
                Err(_) => continue,
            };
            let due = match k.walked_at {
                None => true,
                Some(_) if size > 0 => size != k.fd_size,
                Some(at) => at.elapsed() >= rewalk,
            };
            if !due {
                continue;
            }
            let used = thread_cpu_ns().saturating_sub(cpu_start);
            if used as f64 > budget * started.elapsed().as_nanos() as f64 + BURST_NS as f64 {
                round.deferred += 1;
                continue;
            }
            round.walks += 1;
            match walk(root, pid) {
                Ok(mut fds) => {
                    round.fds_skipped += fds.len().saturating_sub(MAX_DRM_FDS) as u64;
                    fds.truncate(MAX_DRM_FDS);
                    k.drm_fds = fds;
                    k.fd_size = size;
                    k.walked_at = Some(Instant::now());
                }
                Err(ErrorKind::Permission) => {
                    k.denied = true;
                    round.denied += 1;
                }
                Err(ErrorKind::Gone) => {}
                Err(_) => round.errors += 1,
            }
        }
        // fdinfo of the GPU fds, lowest pid first, each client once.
        let mut pids: Vec<u32> = known.iter().filter(|(_, k)| !k.drm_fds.is_empty()).map(|(pid, _)| *pid).collect();
        pids.sort_unstable();
        let mut clients: Vec<GpuClient> = Vec::new();
        let mut seen: HashSet<ClientKey> = HashSet::new();
        for pid in pids {
            let Some(k) = known.get_mut(&pid) else { continue };
            let mut stale = false;
            for &fd in &k.drm_fds {
                round.fdinfo_reads += 1;
                let read = root.read_into(format!("/proc/{pid}/fdinfo/{fd}"), &mut buf);
                let read_mono_ns = epoch.elapsed().as_nanos() as u64;
                match read {
                    Ok(()) => {}
                    Err(e) if e.kind == ErrorKind::Gone => {
                        stale = true;
                        continue;
                    }
                    Err(_) => {
                        round.errors += 1;
                        continue;
                    }
                }
                let Some(info) = parse_fdinfo(&buf) else {
                    // The fd now names something else: walk again next round.
                    stale = true;
                    continue;
                };
                let driver: Arc<str> = Arc::from(info.driver.as_str());
                let pdev: Option<Arc<str>> = info.pdev.as_deref().map(Arc::from);
                if let Some(id) = info.client_id {
                    if !seen.insert((pdev.clone(), Arc::clone(&driver), id)) {
                        continue;
                    }
                }
                let held_bytes = info.held_bytes();
                clients.push(GpuClient {
                    pid,
                    start_ticks: k.start,
                    driver,
                    pdev,
                    client_id: info.client_id,
                    engines: info.engines,
                    held_bytes,
                    read_mono_ns,
                });
            }
            if stale {
                k.walked_at = None;
            }
        }
        round.processes = known.values().filter(|k| !k.drm_fds.is_empty()).count() as u64;
        round.clients = clients.len() as u64;
        let mut state = shared.lock();
        let s = &mut state.stats;
        s.walks += round.walks;
        s.deferred += round.deferred;
        s.fdinfo_reads += round.fdinfo_reads;
        s.denied += round.denied;
        s.errors += round.errors;
        s.fds_skipped += round.fds_skipped;
        s.processes = round.processes;
        s.clients = round.clients;
        s.cpu_ns = thread_cpu_ns().saturating_sub(cpu_start);
        state.latest = Arc::new(clients);
    }
}

/// The fds of `pid` that point at a DRM device node.
fn walk(root: &Root, pid: u32) -> Result<Vec<u32>, ErrorKind> {
    let dir = root.path(format!("/proc/{pid}/fd"));
    let entries = std::fs::read_dir(&dir).map_err(|e| ErrorKind::of_io(&e))?;
    let mut fds = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        if is_drm_node(target.as_os_str().as_encoded_bytes()) {
            fds.push(fd);
        }
    }
    fds.sort_unstable();
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use super::*;

    fn fake_process(root: &Path, pid: u32, fds: &[(u32, &str, Option<&str>)]) {
        let proc = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(proc.join("fd")).expect("test fixture");
        std::fs::create_dir_all(proc.join("fdinfo")).expect("test fixture");
        for (fd, target, info) in fds {
            symlink(target, proc.join(format!("fd/{fd}"))).expect("test fixture");
            let info = info.map_or_else(|| "pos:\t0\nflags:\t02\nmnt_id:\t1\nino:\t2\n".to_string(), str::to_string);
            std::fs::write(proc.join(format!("fdinfo/{fd}")), info).expect("test fixture");
        }
    }

    /// Replaces a fixture file whole, as the kernel's fdinfo is: a plain `fs::write` truncates
    /// first, and a round that reads the file between the truncate and the write sees no drm
    /// keys, calls the fd stale and walks the process again (seen on a busy CI machine).
    fn replace(path: &Path, text: &str) {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, text).expect("test fixture");
        std::fs::rename(&tmp, path).expect("test fixture");
    }

    fn wait_for(worker: &DrmWorker, live: &[(u32, u64)], want: impl Fn(&[GpuClient]) -> bool) -> Arc<Vec<GpuClient>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            worker.offer(live.to_vec());
            let latest = worker.latest();
            if want(&latest) {
                return latest;
            }
            assert!(Instant::now() < deadline, "the worker never published what was wanted: {latest:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    const AMD: &str = "drm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:03:00.0\ndrm-engine-gfx:\t1000 ns\ndrm-memory-vram:\t4 KiB\n";
    const AMD_OTHER: &str = "drm-driver:\tamdgpu\ndrm-client-id:\t43\ndrm-pdev:\t0000:03:00.0\ndrm-engine-gfx:\t5 ns\n";

    #[test]
    fn a_client_shared_by_fds_and_processes_is_counted_once_for_the_lowest_pid() {
        let dir = tempfile::tempdir().expect("test fixture");
        let root = dir.path();
        // 100 holds client 42 twice (a dup) and a plain file; 200, its fork, holds 42 too and
        // its own client 43; 300 holds nothing of a GPU.
        fake_process(
            root,
            100,
            &[(3, "/dev/dri/renderD128", Some(AMD)), (4, "/dev/dri/renderD128", Some(AMD)), (5, "/etc/passwd", None)],
        );
        fake_process(root, 200, &[(3, "/dev/dri/renderD128", Some(AMD)), (7, "/dev/dri/card0", Some(AMD_OTHER))]);
        fake_process(root, 300, &[(0, "/dev/null", None), (1, "socket:[99]", None)]);
        let worker =
            DrmWorker::start(Root::new(root), 1.0, Duration::from_secs(30), Instant::now()).expect("test fixture");
        let live = [(100, 1), (200, 2), (300, 3)];
        let clients = wait_for(&worker, &live, |c| c.len() == 2);
        let got: Vec<_> = clients.iter().map(|c| (c.pid, c.client_id, c.held_bytes)).collect();
        assert_eq!(got, [(100, Some(42), Some(4096)), (200, Some(43), None)]);
        assert_eq!(clients[0].engines[0].busy_ns, Some(1000));
        let stats = worker.stats();
        assert_eq!((stats.processes, stats.clients), (2, 2));
        // Walked once each; later rounds re-read fdinfo without walking (the fd sets did not
        // change, or the kernel gives no count and `rewalk` is 30 s away).
        let walks = stats.walks;
        assert_eq!(walks, 3);
        replace(&root.join("proc/100/fdinfo/3"), &AMD.replace("1000 ns", "9000 ns"));
        let clients = wait_for(&worker, &live, |c| c.first().is_some_and(|c| c.engines[0].busy_ns == Some(9000)));
        assert_eq!(clients.len(), 2);
        assert_eq!(worker.stats().walks, walks);
        // Process 100 exits: its client is now credited to 200, the next holder.
        let clients = wait_for(&worker, &[(200, 2), (300, 3)], |c| c.len() == 2 && c[0].pid == 200);
        assert_eq!(clients.iter().map(|c| c.client_id).collect::<Vec<_>>(), [Some(42), Some(43)]);
    }

    #[test]
    fn a_reused_fd_and_a_pid_with_a_new_start_are_walked_again() {
        let dir = tempfile::tempdir().expect("test fixture");
        let root = dir.path();
        fake_process(root, 100, &[(3, "/dev/dri/renderD128", Some(AMD))]);
        let worker =
            DrmWorker::start(Root::new(root), 1.0, Duration::from_secs(3600), Instant::now()).expect("test fixture");
        wait_for(&worker, &[(100, 1)], |c| c.len() == 1);
        // fd 3 now names a plain file: its fdinfo has no drm keys, the client is gone.
        replace(&root.join("proc/100/fdinfo/3"), "pos:\t0\nflags:\t02\n");
        wait_for(&worker, &[(100, 1)], |c| c.is_empty());
        // Same pid, new start time: a new process, walked afresh.
        replace(&root.join("proc/100/fdinfo/3"), AMD);
        wait_for(&worker, &[(100, 5)], |c| c.len() == 1 && c[0].start_ticks == 5);
    }

    #[test]
    fn a_process_with_thousands_of_gpu_fds_has_a_bounded_number_read() {
        let dir = tempfile::tempdir().expect("test fixture");
        let root = dir.path();
        let fds: Vec<(u32, &str, Option<&str>)> = (0..200).map(|fd| (fd, "/dev/dri/renderD128", Some(AMD))).collect();
        fake_process(root, 100, &fds);
        let worker =
            DrmWorker::start(Root::new(root), 1.0, Duration::from_secs(30), Instant::now()).expect("test fixture");
        wait_for(&worker, &[(100, 1)], |c| c.len() == 1);
        let stats = worker.stats();
        assert_eq!(stats.fds_skipped, 200 - MAX_DRM_FDS as u64);
        assert!(stats.fdinfo_reads.is_multiple_of(MAX_DRM_FDS as u64) && stats.fdinfo_reads > 0, "{stats:?}");
    }

    #[test]
    fn absent_and_unreadable_processes_are_not_errors_per_round() {
        let dir = tempfile::tempdir().expect("test fixture");
        let root = dir.path();
        fake_process(root, 100, &[(3, "/dev/dri/renderD128", Some(AMD))]);
        let worker =
            DrmWorker::start(Root::new(root), 1.0, Duration::from_secs(30), Instant::now()).expect("test fixture");
        // 555 has no /proc entry (gone between the sampler's scan and this round).
        wait_for(&worker, &[(100, 1), (555, 1)], |c| c.len() == 1);
        assert_eq!(worker.stats().errors, 0);
    }
}
