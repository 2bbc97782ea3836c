//! `proctor doctor`: a self-check in the spirit of collectl's SlowProc warning.
//!
//! It times the reads proctor depends on against what they should cost, checks the CPU count a
//! container really has, lists the cgroups and limits it found, the files it may not read (and
//! which figures go missing because of that), and estimates what `smaps_rollup` would cost on
//! the biggest processes — calibrated on proctor's own memory, never on someone else's.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use proctor_procfs::process::{parse_stat, parse_statm};
use proctor_procfs::system::{page_size, thread_cpu_ns};
use proctor_procfs::ErrorKind;
use proctor_sampler::Sampler;
use serde::Serialize;

use super::common::ReadArgs;
use crate::output::{print_json, write_container, Format};
use proctor_vocab::units::bytes;

/// Arguments of `proctor doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many of the biggest processes to estimate smaps_rollup costs for.
    #[arg(long, default_value_t = 5)]
    pub biggest: usize,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// Above these, a read is slow for this kind of file and the machine deserves a look
/// (collectl warned at a similar order of magnitude for /proc/stat).
const PROC_STAT_SLOW_US: f64 = 50.0;
const PER_PID_SLOW_US: f64 = 15.0;

#[derive(Debug, Serialize)]
struct Timing {
    what: String,
    cpu_us: f64,
    expected_max_us: f64,
    slow: bool,
}

#[derive(Debug, Serialize)]
struct Unreadable {
    file: &'static str,
    denied: u64,
    of: u64,
    loses: &'static str,
}

#[derive(Debug, Serialize)]
struct Estimate {
    pid: u32,
    comm: String,
    rss_bytes: u64,
    smaps_rollup_ms: f64,
}

/// Which root doctor (and every reading command with the same flags) reads, and whether the
/// processes there are the host's.
#[derive(Debug, Serialize)]
struct Reading {
    /// The directory that stands for `/`.
    root: String,
    host_root: bool,
    /// proctor's own pid namespace (`pid:[INODE]`, from `/proc/self/ns/pid`).
    pid_namespace: Option<String>,
    /// Whether that is the initial (host's) pid namespace, whose inode the kernel fixes at
    /// 0xEFFFFFFC.
    in_host_pid_namespace: Option<bool>,
    /// proctor's pid in the /proc it reads (`ROOT/proc/self`); `None` where that /proc belongs
    /// to a pid namespace proctor is not in.
    pid_in_read_proc: Option<u32>,
    /// What this means, in a sentence.
    says: String,
}

/// The kernel's fixed inode number of the initial pid namespace (PROC_PID_INIT_INO).
const INIT_PID_NS_INODE: u64 = 0xEFFF_FFFC;

fn reading(root: &proctor_procfs::Root) -> Reading {
    let link = std::fs::read_link("/proc/self/ns/pid").ok().map(|l| l.to_string_lossy().into_owned());
    let inode = link.as_deref().and_then(|l| l.strip_prefix("pid:[")?.strip_suffix(']')?.parse::<u64>().ok());
    let in_host = inode.map(|i| i == INIT_PID_NS_INODE);
    let own_pid = std::process::id();
    let seen_as = root.self_pid();
    let dir = root.dir().display().to_string();
    let says = match (root.is_real(), root.is_host(), seen_as) {
        (false, _, _) => format!("reads a captured tree under {dir}, not a live system"),
        (true, false, _) => match in_host {
            Some(true) => "reads / in the host's pid namespace: every process on this machine is seen".into(),
            Some(false) => "reads / from a pid namespace of its own (a container without --pid=host or hostPID): only that namespace's processes are seen; mount the host's / and pass --host-root, with the host's pid namespace".into(),
            None => "reads /; whether that is the host's pid namespace is unknown (/proc/self/ns/pid unreadable)".into(),
        },
        (true, true, Some(pid)) if pid == own_pid => format!(
            "reads the host under {dir}, sharing the pid namespace of {dir}/proc: pids are the host's and proctor is pid {pid} there"
        ),
        (true, true, Some(pid)) => format!(
            "reads the host under {dir} from a child pid namespace: pids are the host's (proctor is pid {pid} there, {own_pid} here), so --container-pid and `proctor tree` take the host's pids"
        ),
        (true, true, None) => format!(
            "reads the host under {dir}, but proctor is not in the pid namespace of {dir}/proc (is it another namespace's /proc?): its processes are listed, proctor itself is not among them"
        ),
    };
    Reading {
        root: dir,
        host_root: root.is_host(),
        pid_namespace: link,
        in_host_pid_namespace: in_host,
        pid_in_read_proc: seen_as,
        says,
    }
}

#[derive(Debug, Serialize)]
struct Output {
    reading: Reading,
    timings: Vec<Timing>,
    /// The vocabulary's container document, as `/api/v1/container` gives it.
    container: proctor_vocab::snapshot::ContainerOut,
    cgroup_levels: Vec<proctor_procfs::cgroup::CgroupLevel>,
    cgroup_errors: Vec<String>,
    unreadable: Vec<Unreadable>,
    smaps_rollup_ms_per_gib: Option<f64>,
    biggest: Vec<Estimate>,
    /// What the stall ledger measures here, and whether the kernel's mmap_lock tracepoints
    /// (what a target really waited) are there.
    stall_ledger: String,
    /// Whether the sampling thread gets the slice `--sampling-slice` asks, or why not.
    sampling_slice: String,
    /// Whether the BPF task iterator (proctor-bpf) can read every process here, and what one
    /// scan cost, or why not.
    task_iter: String,
    process_events: String,
    network: String,
    open_file_limit: Option<u64>,
    processes: usize,
    effective_uid: u32,
    gpu_and_energy: GpuAndEnergy,
    warnings: Vec<String>,
}

/// What proctor can read of GPUs and energy here, said once (the sampler then reads only what
/// is readable and never reports the rest per sample).
#[derive(Debug, Serialize)]
struct GpuAndEnergy {
    /// Readable energy counters and power sensors, by domain.
    energy_sources: Vec<String>,
    /// Sources that exist but may not be read, and why.
    energy_unreadable: Vec<String>,
    /// Whether the root has `/dev/dri` (per-process GPU from DRM fdinfo needs it).
    dri: bool,
    /// The NVML library's state: `reading` with a device count, or why not.
    nvml: String,
}

fn gpu_and_energy(root: &proctor_procfs::Root) -> GpuAndEnergy {
    let found = proctor_procfs::power::discover(root);
    let nvml = match root.is_real() {
        true => {
            match proctor_sampler::nvml::NvmlWorker::start(proctor_sampler::nvml::LIBRARY, Duration::from_secs(2)) {
                Ok(worker) => {
                    let status = worker.wait_loaded(Duration::from_secs(5));
                    match (status.state, status.detail) {
                        ("reading", _) => format!("reading {} device(s)", status.devices),
                        (state, Some(detail)) => format!("{state}: {detail}"),
                        (state, None) => state.to_string(),
                    }
                }
                Err(e) => format!("cannot start its thread: {e}"),
            }
        }
        false => "not read (not a live root)".to_string(),
    };
    GpuAndEnergy {
        energy_sources: found
            .sources
            .iter()
            .map(|s| format!("{}{}", s.domain, if s.in_host_total { " (in the host's total)" } else { "" }))
            .collect(),
        energy_unreadable: found
            .unreadable
            .iter()
            .map(|u| format!("{} ({}): {}", u.domain, u.path.display(), u.kind.as_str()))
            .collect(),
        dri: root.path("/dev/dri").is_dir(),
        nvml,
    }
}

fn time_reads(file: &File, rounds: u32, buf: &mut [u8], parse: impl Fn(&[u8]) -> bool) -> Option<f64> {
    let cpu = thread_cpu_ns();
    for _ in 0..rounds {
        let n = file.read_at(buf, 0).ok()?;
        if !parse(&buf[..n]) {
            return None;
        }
    }
    Some((thread_cpu_ns() - cpu) as f64 / 1e3 / f64::from(rounds))
}

/// The stall ledger's line: what it measures, and whether this proctor can measure what a
/// target itself waited (it sets up the tracing instance `serve` would, and removes it).
fn stall_ledger(root: &proctor_procfs::Root, asked: Duration) -> String {
    let waits = match proctor_sampler::lockwait::LockWaits::open(root) {
        Ok(_) => "PSS reads are traced with the kernel's mmap_lock tracepoints: they are \
                  charged the hold the kernel saw, and what the target's own threads waited on \
                  them is measured (stall_target_waited_seconds_total)"
            .to_string(),
        Err(why) => format!("what the target itself waited is not measured: {why}"),
    };
    let pages = match proctor_sampler::pagemap::PageCounter::open(root) {
        Ok(_) => format!(
            "PSS of processes with {} MiB or more resident whose threads waited on a read (untraced: that \
             fault) is read through pagemap and kpagecount, which hold a target's lock one 2 MiB walk at \
             a time (smaps_rollup holds it for a whole mapping), while a walk costs no more CPU than the \
             PSS worker's savings (30 s of its budget; past them, smaps_rollup)",
            proctor_sampler::pss::PAGEMAP_FROM_BYTES >> 20
        ),
        Err(why) => {
            format!("PSS is read through smaps_rollup only, which holds a target's lock for a whole mapping: {why}")
        }
    };
    let slice = match slice_trial(asked) {
        None => "the PSS worker's thread keeps the kernel's slice (--pss-slice 0)".to_string(),
        Some(Ok(Ok(ns))) => format!(
            "the PSS worker's thread runs on a slice of its own ({:.2} ms, --pss-slice), so a thread that \
             wakes on its CPU during a long read is let in at its wakeup, not at the next tick",
            ns as f64 / 1e6
        ),
        Some(Ok(Err(why))) => format!(
            "the PSS worker's thread keeps the kernel's slice ({why}), so a thread that wakes on its CPU \
             during a long read may wait for the rest of it"
        ),
        Some(Err(_)) => "the PSS worker's slice could not be tried (its trial thread panicked)".to_string(),
    };
    format!(
        "stall ledger: every smaps_rollup, pagemap and cmdline read is timed and charged to its target \
         (stall_by_proctor_seconds_total; wall time, an upper bound on the hold, where not traced); {waits}; {pages}; \
         {slice}"
    )
}

/// Asks a thread of its own for a slice of `asked`, as the PSS worker and the sampling thread
/// do at their start: `None` where none is asked (0), else what the kernel answered, or `Err`
/// where the trial thread panicked.
fn slice_trial(asked: Duration) -> Option<std::thread::Result<Result<u64, String>>> {
    match std::thread::spawn(move || proctor_procfs::system::ask_thread_slice(asked)).join() {
        Ok(answer) => answer.map(Ok),
        Err(panicked) => Some(Err(panicked)),
    }
}

/// The sampling thread's slice, as [`slice_trial`] finds the kernel would give it.
fn sampling_slice(asked: Duration) -> String {
    match slice_trial(asked) {
        None => "sampling thread: keeps the kernel's slice (--sampling-slice 0)".to_string(),
        Some(Ok(Ok(ns))) => format!(
            "sampling thread: runs on a slice of its own ({:.2} ms, --sampling-slice), so a thread that wakes \
             on its CPU during a sample gets in at its wakeup; its share of the CPU is unchanged",
            ns as f64 / 1e6
        ),
        Some(Ok(Err(why))) => format!(
            "sampling thread: keeps the kernel's slice ({why}), so a thread that wakes on its CPU during a \
             sample may wait for the rest of it"
        ),
        Some(Err(_)) => "sampling thread: its slice could not be tried (the trial thread panicked)".to_string(),
    }
}

/// The task iterator's line: loaded and one scan timed, or why it cannot be used here. Only a
/// real root: the iterator reads this kernel's tasks, not a captured tree.
fn task_iter(root: &proctor_procfs::Root) -> String {
    if !root.is_real() {
        return "task iterator: not used (a captured tree is read, not this kernel)".to_string();
    }
    if root.is_host() && !proctor_sampler::host_proc_is_ours(root) {
        // As the sampler decides: a container's own pid namespace would number the records
        // unlike the host's /proc it lists.
        return "task iterator: not used, /proc is read instead: the host root's /proc is another pid namespace's \
                than proctor's (run it with the host's: --pid=host, hostPID)"
            .to_string();
    }
    let mut iter = match proctor_bpf::TaskIter::open() {
        Ok(iter) => iter,
        Err(why) => return format!("task iterator: not used, /proc is read instead: {why}"),
    };
    let mut out = Vec::new();
    let cost = match iter.scan(&mut out) {
        Ok(cost) => cost,
        Err(e) => return format!("task iterator: loaded, but a scan failed: {e}"),
    };
    let mut listed = Vec::new();
    let _ = proctor_procfs::system::list_pids(root, &mut listed);
    let given: std::collections::HashSet<u32> = out.iter().map(|p| p.pid).collect();
    let missed: Vec<u32> = listed.iter().copied().filter(|pid| !given.contains(pid)).collect();
    let gap = match missed.len() {
        0 => String::new(),
        n => format!(
            "; {n} process{} /proc lists {} not in its records (the kernel keeps {} from BPF iterators, or {} \
             started since): the sampler reads {} from /proc (pid {})",
            if n == 1 { "" } else { "es" },
            if n == 1 { "is" } else { "are" },
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "they" },
            if n == 1 { "it" } else { "them" },
            missed.iter().take(5).map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    format!(
        "task iterator: every process's stat fields at once, and the sampler reads them so, through {} ({} \
         processes, {} tasks in {} {}, {:.2} µs CPU per process){gap}",
        iter.how(),
        cost.processes,
        cost.tasks,
        cost.reads,
        match (iter.open_coded(), cost.reads) {
            (true, 1) => "run",
            (true, _) => "runs",
            (false, _) => "reads",
        },
        cost.cpu_ns as f64 / 1e3 / cost.processes.max(1) as f64
    )
}

/// The process events' line: loaded, and a child of ours seen to exec and exit (bounded
/// wait), or why they cannot be had here.
fn process_events(root: &proctor_procfs::Root) -> String {
    if !root.is_real() {
        return "process events: not used (a captured tree is read, not this kernel)".to_string();
    }
    if root.is_host() && !proctor_sampler::host_proc_is_ours(root) {
        return "process events: not used, processes that live between two samples are not seen: the host root's \
                /proc is another pid namespace's than proctor's (run it with the host's: --pid=host, hostPID)"
            .to_string();
    }
    let sub = match proctor_bpf::Subscription::open() {
        Ok(sub) => sub,
        Err(why) => {
            return format!(
                "process events: not used, processes that live between two samples are not seen (only their \
                 parents' reaped CPU counts them): {why}"
            )
        }
    };
    // The child is proctor itself (`--version`): an image holds no other program.
    let child = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
    });
    let child_pid = match child {
        Ok(mut c) => {
            let pid = c.id();
            let _ = c.wait();
            pid
        }
        Err(e) => return format!("process events: loaded; could not start a child to check them: {e}"),
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    let mut events = Vec::new();
    let (mut exec, mut exit) = (false, false);
    while Instant::now() < deadline && !(exec && exit) {
        sub.drain(&mut events);
        for e in events.drain(..) {
            match &*e {
                proctor_bpf::Event::Exec(x) if x.pid == child_pid && x.ppid == std::process::id() => exec = true,
                proctor_bpf::Event::Exit(x) if x.pid == child_pid && x.ppid == std::process::id() => exit = true,
                _ => {}
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if exec && exit {
        "process events: every exec and process exit from BPF tracepoints (a child of doctor's seen to exec and \
         exit): processes that live between two samples are listed as ended, with their command line, CPU and peak \
         memory"
            .to_string()
    } else {
        format!("process events: loaded, but a child of doctor's was not seen (exec seen: {exec}, exit seen: {exit})")
    }
}

/// The network line: the programs attached, and a loopback connection of doctor's own counted
/// against doctor (its connect, its accept, the bytes it sent), or why not.
fn network(root: &proctor_procfs::Root) -> String {
    if !root.is_real() {
        return "network (--net, off by default): not used (a captured tree is read, not this kernel)".to_string();
    }
    if root.is_host() && !proctor_sampler::host_proc_is_ours(root) {
        return "network (--net, off by default): per-process network is not known: the host root's /proc is another pid namespace's than \
                proctor's (run it with the host's: --pid=host, hostPID)"
            .to_string();
    }
    let table = match proctor_bpf::NetTable::open() {
        Ok(t) => t,
        Err(why) => return format!("network (--net, off by default): per-process network is not known: {why}"),
    };
    if let Err(e) = proctor_client::client::loopback_exchange(10_000) {
        return format!("network (--net, off by default): loaded; a loopback connection to check it failed: {e}");
    }
    let mut rows = std::collections::HashMap::new();
    table.read(&mut rows);
    match rows.get(&std::process::id()) {
        Some(r) if r.connects >= 1 && r.accepts >= 1 && r.tcp.sent_bytes >= 10_000 => {
            let walk = match table.walk() {
                proctor_bpf::net::Walk::Owned => "each sample".to_string(),
                proctor_bpf::net::Walk::TcpTables(why) => format!(
                    "every {} s from the kernel's TCP tables while a process has TCP traffic or a connection, \
                     as the socket storage iterator is refused: {why}; packets and TCP payload reach the rows as \
                     they pass; {} (some kernels refuse every iterator over a map's elements: docs/deploy.md)",
                    proctor_sampler::TCP_TABLES_EVERY.as_secs(),
                    match proctor_bpf::net::may_enter_namespaces() {
                        Ok(()) => format!(
                            "the tables of the other network namespaces with a process using the network (a \
                             container's) are walked too, entered from a thread, up to {} a walk",
                            proctor_bpf::net::MAX_NAMESPACES
                        ),
                        Err(e) => format!(
                            "only this network namespace's tables are walked ({e}; entering another needs \
                             CAP_SYS_ADMIN), so a process in another (a container's) has its traffic counted and no \
                             connections or round-trip times"
                        ),
                    }
                ),
            };
            format!(
                "network (--net, off by default): each process's packets counted in the kernel against the sockets it \
                 owns (doctor's own loopback connection seen: its connect, accept and 10,000 bytes), with its TCP \
                 connections and their round-trip times ({walk})"
            )
        }
        other => format!(
            "network (--net, off by default): loaded, but doctor's own loopback connection was not counted ({other:?})"
        ),
    }
}

/// ms of smaps_rollup per GiB resident, measured on this process: the read with 64 MiB of
/// touched anonymous memory in 4 KiB pages (huge pages refused with MADV_NOHUGEPAGE, the
/// expensive case) minus the read without it.
fn calibrate_smaps_rollup(root: &proctor_procfs::Root) -> Option<f64> {
    if !root.is_real() {
        return None;
    }
    // proctor's own file, from its own /proc: under a host root the host's /proc/self names
    // this process only where it shares the host's pid namespace.
    let own = proctor_procfs::Root::default();
    let read_ms = |rounds: u32| -> Option<f64> {
        let mut buf = Vec::new();
        let started = Instant::now();
        for _ in 0..rounds {
            own.read_into("/proc/self/smaps_rollup", &mut buf).ok()?;
        }
        Some(started.elapsed().as_secs_f64() * 1e3 / f64::from(rounds))
    };
    let base = read_ms(20)?;
    const SIZE: usize = 64 << 20;
    // SAFETY: a fresh private anonymous mapping, touched and unmapped only here.
    let block = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if block == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `block` is SIZE bytes, mapped read-write above.
    unsafe {
        libc::madvise(block, SIZE, libc::MADV_NOHUGEPAGE);
        let bytes = block.cast::<u8>();
        for i in (0..SIZE).step_by(page_size() as usize) {
            bytes.add(i).write_volatile(1);
        }
    }
    let loaded = read_ms(20);
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(block, SIZE) };
    Some(((loaded? - base).max(0.0)) * 16.0)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.read.config()?;
    let root = config.root.clone();
    let mut warnings = Vec::new();
    let mut timings = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];

    // Every file under a host root through the root: regular files only, never a wait.
    if let Ok(f) = root.open("/proc/stat") {
        if let Some(us) = time_reads(&f, 2000, &mut buf, |b| proctor_procfs::host::parse_stat(b).is_some()) {
            let slow = us > PROC_STAT_SLOW_US;
            if slow {
                warnings.push(format!("/proc/stat takes {us:.1} µs per read (expected under {PROC_STAT_SLOW_US} µs): many CPUs or interrupts, or a loaded hypervisor; every sample pays this"));
            }
            timings.push(Timing {
                what: "/proc/stat read+parse".into(),
                cpu_us: us,
                expected_max_us: PROC_STAT_SLOW_US,
                slow,
            });
        }
    }

    // Per-pid reads over every process, kept fds, 20 rounds.
    let mut stat_files = Vec::new();
    let mut statm_files = Vec::new();
    let mut status_files = Vec::new();
    let mut unreadable = vec![
        Unreadable { file: "status", denied: 0, of: 0, loses: "uid, RssAnon/RssFile/RssShmem split, VmSwap" },
        Unreadable { file: "io", denied: 0, of: 0, loses: "per-process disk read/write rates" },
        Unreadable { file: "smaps_rollup", denied: 0, of: 0, loses: "PSS and USS" },
    ];
    let mut sizes: Vec<(u32, String, u64)> = Vec::new();
    let pids: Vec<u32> =
        std::fs::read_dir(root.path("/proc"))?.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    for &pid in &pids {
        let open = |f: &str| root.open(format!("/proc/{pid}/{f}"));
        let (Ok(stat), Ok(statm)) = (open("stat"), open("statm")) else { continue };
        if let (Ok(n), Ok(m)) = (stat.read_at(&mut buf, 0), statm.read_at(&mut buf[32 * 1024..], 0)) {
            let st = parse_stat(&buf[..n]);
            let sm = parse_statm(&buf[32 * 1024..32 * 1024 + m]);
            if let (Some(st), Some(sm)) = (st, sm) {
                sizes.push((pid, st.comm, sm.resident_pages * page_size()));
            }
        }
        stat_files.push(stat);
        statm_files.push(statm);
        for (i, file) in ["status", "io", "smaps_rollup"].iter().enumerate() {
            unreadable[i].of += 1;
            // smaps_rollup checks permission at open; io and status when read. Reading
            // smaps_rollup would take the target's mmap lock, so it is only opened.
            let denied = match open(file) {
                Ok(f) if *file == "smaps_rollup" => {
                    drop(f);
                    false
                }
                Ok(f) => match f.read_at(&mut buf, 0) {
                    Ok(_) => {
                        if *file == "status" {
                            status_files.push(f);
                        }
                        false
                    }
                    Err(e) => ErrorKind::of_io(&e) == ErrorKind::Permission,
                },
                Err(e) => e.kind == ErrorKind::Permission,
            };
            if denied {
                unreadable[i].denied += 1;
            }
        }
    }
    for (name, files) in [("stat", &stat_files), ("statm", &statm_files), ("status", &status_files)] {
        if files.is_empty() {
            continue;
        }
        let cpu = thread_cpu_ns();
        let mut reads = 0u64;
        for _ in 0..20 {
            for f in files.iter() {
                if f.read_at(&mut buf, 0).is_ok() {
                    reads += 1;
                }
            }
        }
        let us = (thread_cpu_ns() - cpu) as f64 / 1e3 / reads.max(1) as f64;
        let slow = us > PER_PID_SLOW_US;
        if slow {
            warnings.push(format!("/proc/PID/{name} takes {us:.1} µs per read (expected a few µs): a full scan of {} processes costs {:.1} ms", pids.len(), us * pids.len() as f64 / 1e3));
        }
        timings.push(Timing {
            what: format!("/proc/PID/{name} pread (kept fd)"),
            cpu_us: us,
            expected_max_us: PER_PID_SLOW_US,
            slow,
        });
    }
    drop((stat_files, statm_files, status_files));

    let mut sampler = Sampler::new(config);
    let sample = sampler.sample();
    let (cgroup_levels, cgroup_errors) =
        sample.container.as_ref().map(|c| (c.limits.levels.clone(), c.limits.errors.clone())).unwrap_or_default();
    let container = proctor_vocab::snapshot::container(&proctor_agent::Snapshot::bare(sample));
    warnings.extend(container.warnings.iter().cloned());
    if let Some(e) = sampler.container_error() {
        warnings.push(format!("no container view: {e}"));
    }
    // SAFETY: geteuid has no preconditions.
    let root_already = unsafe { libc::geteuid() } == 0;
    for u in &unreadable {
        if u.denied > 0 {
            // Root is denied only by what root cannot override here: another user namespace,
            // a `hidepid` mount, a security module. Telling root to run as root helps no one.
            let advice = if root_already {
                "even as root: another user namespace, /proc mounted with hidepid, or a security module (AppArmor, SELinux) denies it"
            } else {
                "run as their user or root"
            };
            warnings.push(format!(
                "{} of {} processes deny /proc/PID/{}: {} unavailable for them ({advice})",
                u.denied, u.of, u.file, u.loses
            ));
        }
    }
    let nofile = sampler.nofile_limit();
    if let Some(limit) = nofile {
        if limit < (pids.len() as u64) * 3 + 64 {
            warnings.push(format!("open-file limit {limit} is below 3 per process for {} processes: some per-pid files will be reopened every cycle (raise `ulimit -n`)", pids.len()));
        }
    }

    let per_gib = calibrate_smaps_rollup(&root);
    sizes.sort_by_key(|s| std::cmp::Reverse(s.2));
    let biggest: Vec<Estimate> = sizes
        .iter()
        .take(args.biggest)
        .map(|(pid, comm, rss)| Estimate {
            pid: *pid,
            comm: comm.clone(),
            rss_bytes: *rss,
            smaps_rollup_ms: per_gib.unwrap_or(0.0) * *rss as f64 / (1u64 << 30) as f64,
        })
        .collect();

    // SAFETY: geteuid has no preconditions.
    let effective_uid = unsafe { libc::geteuid() };
    let out = Output {
        reading: reading(&root),
        timings,
        container,
        cgroup_levels,
        cgroup_errors,
        unreadable,
        smaps_rollup_ms_per_gib: per_gib,
        biggest,
        stall_ledger: stall_ledger(&root, args.read.pss_slice),
        sampling_slice: sampling_slice(args.read.sampling_slice),
        task_iter: task_iter(&root),
        process_events: process_events(&root),
        network: network(&root),
        open_file_limit: nofile,
        processes: pids.len(),
        effective_uid,
        gpu_and_energy: gpu_and_energy(&root),
        warnings,
    };
    match args.format {
        Format::Json => print_json(&out)?,
        Format::Text => print_text(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(o: &Output) -> anyhow::Result<()> {
    let mut w = std::io::stdout().lock();
    writeln!(w, "reading: {}", o.reading.says)?;
    if let Some(ns) = &o.reading.pid_namespace {
        let whose = match o.reading.in_host_pid_namespace {
            Some(true) => "the host's",
            Some(false) => "not the host's",
            None => "unknown",
        };
        writeln!(w, "  proctor's pid namespace: {ns} ({whose})")?;
    }
    writeln!(w)?;
    writeln!(w, "read costs (CPU per read, this machine, now):")?;
    for t in &o.timings {
        writeln!(w, "  {:<34} {:>7.2} µs  {}", t.what, t.cpu_us, if t.slow { "SLOW" } else { "ok" })?;
    }
    writeln!(w)?;
    write_container(&mut w, &o.container)?;
    writeln!(w, "cgroup levels (own first):")?;
    for l in &o.cgroup_levels {
        writeln!(
            w,
            "  {:<50} quota {:<10} memory limit {:<10} cpuset {}",
            l.path,
            l.cpu_quota.map_or("-".into(), |q| format!("{:.2} CPUs", q.cpus())),
            l.memory_limit_bytes.map_or("-".into(), bytes),
            l.cpuset_cpus.as_ref().map_or("-".into(), |c| format!("{} CPUs", c.len()))
        )?;
    }
    for e in &o.cgroup_errors {
        writeln!(w, "  error: {e}")?;
    }
    writeln!(w)?;
    writeln!(w, "permissions (running as uid {}):", o.effective_uid)?;
    for u in &o.unreadable {
        writeln!(
            w,
            "  /proc/PID/{:<13} denied for {} of {} processes{}",
            u.file,
            u.denied,
            u.of,
            if u.denied > 0 { format!(" — loses {}", u.loses) } else { String::new() }
        )?;
    }
    writeln!(w, "  open-file limit {}", o.open_file_limit.map_or("?".into(), |l| l.to_string()))?;
    writeln!(w)?;
    match o.smaps_rollup_ms_per_gib {
        Some(rate) => writeln!(w, "smaps_rollup costs ~{rate:.1} ms per GiB resident here (calibrated on proctor's own private 4 KiB pages; pages shared with forked children cost more, `proctor tree PID --pss` measures the real thing); it holds the target's mmap lock that long:")?,
        None => writeln!(w, "smaps_rollup cost not calibrated (not reading the real /proc)")?,
    }
    for e in &o.biggest {
        writeln!(
            w,
            "  {:>7} {:<16} rss {:>9}  ~{:.2} ms per read",
            e.pid,
            proctor_vocab::units::printable(&e.comm),
            bytes(e.rss_bytes),
            e.smaps_rollup_ms
        )?;
    }
    writeln!(w, "{}", o.stall_ledger)?;
    writeln!(w, "{}", o.sampling_slice)?;
    writeln!(w, "{}", o.task_iter)?;
    writeln!(w, "{}", o.process_events)?;
    writeln!(w, "{}", o.network)?;
    writeln!(w)?;
    let g = &o.gpu_and_energy;
    writeln!(w, "GPU and energy:")?;
    if g.energy_sources.is_empty() {
        writeln!(
            w,
            "  energy     no readable RAPL zone or hwmon power/energy file: no watts, probe --energy cannot measure"
        )?;
    }
    for s in &g.energy_sources {
        writeln!(w, "  energy     {s}")?;
    }
    for u in &g.energy_unreadable {
        writeln!(w, "  energy     unreadable, left out of every sample: {u}")?;
    }
    writeln!(
        w,
        "  DRM        {}",
        if g.dri {
            "/dev/dri present: per-process GPU from fdinfo (DRM worker)"
        } else {
            "no /dev/dri: no per-process GPU from fdinfo"
        }
    )?;
    writeln!(w, "  NVML       {}", g.nvml)?;
    writeln!(w)?;
    if o.warnings.is_empty() {
        writeln!(w, "no warnings")?;
    }
    for warning in &o.warnings {
        writeln!(w, "warning: {warning}")?;
    }
    Ok(())
}
