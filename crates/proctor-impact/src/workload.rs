//! The target: a process tree doing one kind of timed operation at a fixed rate, writing each
//! operation's times to stdout as [`crate::record`] batches. `proctor impact` runs it as a
//! child of its own (`proctor impact-workload …`), so the tree outlives every arm's monitor
//! and is the same tree in every round.
//!
//! - `pagefault`: the Netflix tree in small. The parent fills a private anonymous region
//!   (huge pages off, so it is mapped page by page like a Python heap) and forks the children,
//!   which share it copy-on-write. Each child, on its own fixed schedule, maps a few fresh
//!   pages, writes them and unmaps them: `mmap` and `munmap` take the child's mmap lock for
//!   writing, so they wait out any reader holding it (a monitor reading `smaps_rollup` walks
//!   every page of the region under that lock), and the wait is the operation's latency.
//! - `http`: the same parent and region; the children are preforked HTTP workers on one
//!   loopback listener, each answer doing that operation and summing 64 KiB of the region. The
//!   parent is the fixed-rate client (proctor-client, a connection per request).
//! - a URL: only the fixed-rate client, against someone else's server.
//! - a command: run at a fixed rate, one at a time; each run is an operation.
//!
//! Open loop everywhere: every operation has an intended start on the schedule and its latency
//! is measured from there, so operations held back by a stall count the stall too
//! (coordinated omission, as wrk2 corrects it). This module does the I/O of the workload and
//! nothing else: it knows nothing of rounds, arms or monitors.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::record::{encode, Op, BATCH_MAX};

/// What the target does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    Pagefault,
    Http,
    Url(String),
    Command(Vec<String>),
}

/// The workload's settings, decided by the driver and passed on its command line.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub workload: Workload,
    /// Children forked (pagefault: each timing its own operations; http: server workers).
    pub children: u32,
    /// The region the parent fills before forking, shared copy-on-write by the children.
    pub size_bytes: u64,
    /// Operations a second: per child for pagefault, in all for the others.
    pub rate_per_sec: f64,
}

impl WorkloadConfig {
    /// The processes that send operations: every child for pagefault, else the client alone.
    pub fn senders(&self) -> u32 {
        match self.workload {
            Workload::Pagefault => self.children,
            _ => 1,
        }
    }
}

/// `service_ns` of an operation that failed (a request with no answer, a command that exited
/// non-zero): counted, never mixed with the latencies of operations that worked.
pub const FAILED: u64 = u64::MAX;

/// Pages each pagefault operation maps, writes and unmaps.
const OP_PAGES: usize = 4;
/// A child's operations wait at most this long in its buffer before they are written.
const FLUSH_EVERY_NS: u64 = 50_000_000;

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock every process of the host shares.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reads `ns` (at once if it already has): an absolute
/// deadline, so the schedule does not drift by each wake-up's lateness.
fn sleep_until(ns: u64) {
    let ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as _ };
    // SAFETY: ts is valid; a null remainder is allowed with TIMER_ABSTIME. EINTR just wakes early.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Operations of one process on their way to stdout.
struct Sender {
    pid: u32,
    ops: Vec<Op>,
    last_flush_ns: u64,
}

impl Sender {
    fn new() -> Sender {
        let sender =
            Sender { pid: std::process::id(), ops: Vec::with_capacity(BATCH_MAX), last_flush_ns: monotonic_ns() };
        // An empty batch first: the driver counts these to know the tree is running.
        sender.write(&[]);
        sender
    }

    fn push(&mut self, op: Op) {
        self.ops.push(op);
        let now = monotonic_ns();
        if self.ops.len() == BATCH_MAX || now.saturating_sub(self.last_flush_ns) >= FLUSH_EVERY_NS {
            let ops = std::mem::take(&mut self.ops);
            self.write(&ops);
            self.ops = ops;
            self.ops.clear();
            self.last_flush_ns = now;
        }
    }

    /// One `write` of one batch (at most `PIPE_BUF` bytes, so atomic on the shared pipe). The
    /// driver gone (EPIPE, or SIGPIPE's default) ends this process: nobody is listening.
    fn write(&self, ops: &[Op]) {
        let mut bytes = Vec::with_capacity(crate::record::PIPE_BUF);
        encode(self.pid, ops, &mut bytes);
        // SAFETY: bytes is a valid buffer of its length; fd 1 is the pipe the driver reads.
        let written = unsafe { libc::write(1, bytes.as_ptr().cast(), bytes.len()) };
        if written != bytes.len() as isize {
            // SAFETY: _exit ends this process without running anything else.
            unsafe { libc::_exit(0) };
        }
    }
}

/// The region the children share: filled page by page before the fork.
struct Region {
    base: *mut u8,
    len: usize,
}

impl Region {
    fn fill(len: usize) -> Result<Region, String> {
        if len == 0 {
            return Ok(Region { base: std::ptr::null_mut(), len: 0 });
        }
        let base =
            map_anonymous(len).ok_or_else(|| format!("cannot map {len} bytes: {}", std::io::Error::last_os_error()))?;
        // Small pages, as a Python heap has: a huge page is one entry for smaps to walk, and
        // the stall this measures is the walk. Refused (no THP here) is as good.
        // SAFETY: base..base+len is the mapping just made.
        unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
        let base = base.cast::<u8>();
        let page = page_size();
        for offset in (0..len).step_by(page) {
            // SAFETY: offset < len, inside the writable mapping.
            unsafe { base.add(offset).write_volatile(1) };
        }
        Ok(Region { base, len })
    }

    /// Sums `bytes` of the region from `offset` (wrapping), reading only: the pages stay shared.
    fn sum(&self, offset: usize, bytes: usize) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mut total = 0u64;
        for i in (0..bytes).step_by(64) {
            // SAFETY: the index is taken modulo len, inside the mapping.
            total += u64::from(unsafe { self.base.add((offset + i) % self.len).read_volatile() });
        }
        total
    }
}

fn page_size() -> usize {
    proctor_procfs::system::page_size() as usize
}

/// A fresh anonymous private read-write mapping of `len` bytes (`None`: mmap failed, errno
/// says why).
fn map_anonymous(len: usize) -> Option<*mut libc::c_void> {
    // SAFETY: a new anonymous mapping touches no existing memory; the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base)
}

/// Maps [`OP_PAGES`] fresh pages, writes each (a page fault apiece) and unmaps them.
fn touch_fresh_pages() -> bool {
    let len = OP_PAGES * page_size();
    let Some(base) = map_anonymous(len) else { return false };
    for page in 0..OP_PAGES {
        // SAFETY: inside the mapping just made.
        unsafe { base.cast::<u8>().add(page * page_size()).write_volatile(1) };
    }
    // SAFETY: the mapping just made, unmapped once.
    unsafe { libc::munmap(base, len) == 0 }
}

/// Runs the workload until this process is killed (the driver's SIGTERM ends it; the children
/// die with it, `PR_SET_PDEATHSIG`). Returns only with an error: what could not be started, or
/// a child that ended.
pub fn run(config: &WorkloadConfig) -> Result<(), String> {
    let period_ns = (1e9 / config.rate_per_sec).max(1.0);
    match &config.workload {
        Workload::Pagefault => {
            let region = Region::fill(config.size_bytes as usize)?;
            let children = fork_children(config.children, |index| {
                let mut sender = Sender::new();
                // Each child's schedule starts a fraction of a period after the one before, so
                // the tree's operations are spread evenly over time.
                let start = monotonic_ns() + (period_ns * f64::from(index) / f64::from(config.children)) as u64;
                let mut at = 0usize;
                for k in 0u64.. {
                    let intended = start + (k as f64 * period_ns) as u64;
                    sleep_until(intended);
                    let switches = voluntary_switches();
                    let began = monotonic_ns();
                    let worked = touch_fresh_pages();
                    std::hint::black_box(region.sum(at, 64));
                    at = at.wrapping_add(page_size() * 7);
                    let end = monotonic_ns();
                    let slept = voluntary_switches() > switches;
                    sender.push(Op { slept, ..op(intended, began, end, worked) });
                }
            })?;
            wait_for_children(&children)
        }
        Workload::Http => {
            let region = Region::fill(config.size_bytes as usize)?;
            let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot listen on loopback: {e}"))?;
            let address = listener.local_addr().map_err(|e| format!("cannot read the listener's port: {e}"))?;
            let children = fork_children(config.children, |index| serve(&listener, &region, index))?;
            drop(listener);
            client_loop(&format!("http://{address}/"), period_ns, Some(&children))
        }
        Workload::Url(url) => client_loop(url, period_ns, None),
        Workload::Command(argv) => {
            let mut sender = Sender::new();
            let start = monotonic_ns();
            for k in 0u64.. {
                let intended = start + (k as f64 * period_ns) as u64;
                sleep_until(intended);
                let began = monotonic_ns();
                let worked = std::process::Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success());
                sender.push(op(intended, began, monotonic_ns(), worked));
            }
            Ok(())
        }
    }
}

/// This thread's voluntary context switches so far (`getrusage(RUSAGE_THREAD)`): one more
/// after an operation means it slept, which an mmap, a page fault of fresh anonymous memory
/// and an munmap do only to wait (for the mmap lock, or for memory).
fn voluntary_switches() -> i64 {
    // SAFETY: rusage is plain data; getrusage writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: usage is a valid rusage to write into.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_nvcsw
}

fn op(intended: u64, began: u64, end: u64, worked: bool) -> Op {
    Op {
        intended_ns: intended,
        latency_ns: end.saturating_sub(intended),
        service_ns: if worked { end - began } else { FAILED },
        slept: false,
    }
}

/// Forks `count` children, each running `body(index)` forever; they die with this process.
/// Called while this process has one thread, so the child may run anything.
fn fork_children(count: u32, body: impl Fn(u32)) -> Result<Vec<libc::pid_t>, String> {
    let parent = std::process::id() as libc::pid_t;
    let mut children = Vec::new();
    for index in 0..count {
        // SAFETY: this process is single-threaded here (nothing has started a thread), so the
        // child's copy of every lock is unheld.
        match unsafe { libc::fork() } {
            -1 => {
                kill_all(&children);
                return Err(format!("cannot fork child {index}: {}", std::io::Error::last_os_error()));
            }
            0 => {
                // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
                // SAFETY: getppid has no preconditions.
                if unsafe { libc::getppid() } != parent {
                    // SAFETY: ends the child at once.
                    unsafe { libc::_exit(0) };
                }
                body(index);
                // SAFETY: ends the child at once, running no destructor of the parent's state.
                unsafe { libc::_exit(0) };
            }
            pid => children.push(pid),
        }
    }
    Ok(children)
}

fn kill_all(children: &[libc::pid_t]) {
    for &pid in children {
        // SAFETY: signals a child of ours, which is not reaped yet.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Waits on the children; the first that ends ends the workload (the others are killed), since
/// a tree missing a member measures something else.
fn wait_for_children(children: &[libc::pid_t]) -> Result<(), String> {
    let mut status = 0;
    // SAFETY: waits for any child of ours.
    let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
    kill_all(children);
    Err(format!("workload child {pid} ended (wait status {status}); the workload stops"))
}

/// A preforked HTTP worker: answers one request per connection, doing the fixed work.
fn serve(listener: &TcpListener, region: &Region, index: u32) {
    let mut head = [0u8; 8192];
    let mut at = index as usize * page_size();
    loop {
        let Ok((mut stream, _)) = listener.accept() else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut filled = 0;
        while filled < head.len() {
            match stream.read(&mut head[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(read) => filled += read,
            }
            if head[..filled].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        touch_fresh_pages();
        let sum = region.sum(at, 64 * 1024);
        at = at.wrapping_add(64 * 1024);
        let body = format!("{sum}\n");
        let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    }
}

/// The fixed-rate client: one request at a time on a connection of its own, each timed from
/// its intended start. With `children`, a child that ended ends the workload.
fn client_loop(url: &str, period_ns: f64, children: Option<&[libc::pid_t]>) -> Result<(), String> {
    use proctor_client::client::{Client, ClientConfig};
    let target = proctor_client::url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let tls = if target.tls {
        Some(
            proctor_client::tls::TlsConfig::new(proctor_client::tls::Trust::WebpkiRoots)
                .map_err(|e| format!("{url}: {e}"))?,
        )
    } else {
        None
    };
    let config = ClientConfig {
        target,
        request: proctor_client::http::RequestSpec {
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            close: true,
        },
        timeout: Duration::from_secs(10),
        reuse: false,
        tls,
    };
    let mut client = Client::new(Arc::new(config));
    let mut sender = Sender::new();
    let start = monotonic_ns();
    for k in 0u64.. {
        let intended = start + (k as f64 * period_ns) as u64;
        sleep_until(intended);
        let began_ns = monotonic_ns();
        let began = Instant::now();
        let outcome = client.request();
        let service = outcome.end.saturating_duration_since(began).as_nanos() as u64;
        let worked = outcome.error.is_none() && outcome.status.is_some_and(|s| (200..400).contains(&s));
        sender.push(op(intended, began_ns, began_ns + service, worked));
        if let Some(children) = children {
            let mut status = 0;
            // SAFETY: asks, without waiting, whether a child of ours ended.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid > 0 {
                kill_all(children);
                return Err(format!("workload child {pid} ended (wait status {status}); the workload stops"));
            }
        }
    }
    Ok(())
}
