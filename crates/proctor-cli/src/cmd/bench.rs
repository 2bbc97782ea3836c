//! `proctor bench`: collectl's method — N samples back to back at interval 0 — reporting what
//! one host sample and one process cost, in CPU and wall time, next to a floor measured in the
//! same run: a minimal reader that `pread`s the same files through kept fds and parses nothing.
//! The floor is what the kernel charges for producing the bytes; the ratio is proctor's own
//! overhead on top.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::time::Instant;

use proctor_procfs::system::thread_cpu_ns;
use proctor_sampler::{HostFiles, Sampler, SamplerConfig};
use serde::Serialize;

use super::common::ReadArgs;
use crate::output::{print_json, Format};

/// Arguments of `proctor bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Host samples to take, 1 or more (8640 is a day at 10 s).
    #[arg(short = 'n', long, default_value_t = 8640, value_parser = clap::value_parser!(u64).range(1..))]
    pub samples: u64,
    /// Full process scans to take (each reads every process; 0 skips the process part).
    #[arg(long, default_value_t = 200)]
    pub scans: u64,
    /// Which host files a sample reads: `all`, or `cpu` (/proc/stat and /proc/loadavg, what
    /// `collectl -sc` reads, with no cgroup reads) for a like-for-like comparison.
    #[arg(long, value_enum, default_value_t = HostChoice::All)]
    pub host: HostChoice,
    /// Skip the floor reader, so the whole process's CPU time is proctor's sampling alone
    /// (for comparing with another tool's whole-process time).
    #[arg(long)]
    pub no_floor: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostChoice {
    All,
    Cpu,
}

#[derive(Debug, Serialize)]
struct Figure {
    /// µs of CPU (the sampling thread's) per unit.
    cpu_us: f64,
    wall_us: f64,
}

#[derive(Debug, Serialize)]
struct Output {
    host_samples: u64,
    host_files: usize,
    host_sample: Figure,
    host_floor: Figure,
    /// `None` when the floor was skipped.
    host_ratio_cpu: Option<f64>,
    process_scans: u64,
    processes: f64,
    per_process: Figure,
    /// The floor read between the /proc scans.
    per_process_floor: Figure,
    per_process_ratio_cpu: Option<f64>,
    /// The same processes through the BPF task iterator (proctor-bpf), per process, in as many
    /// scans after the /proc ones: `None` where it cannot run, and `task_iter_unavailable` says
    /// why.
    per_process_task_iter: Option<Figure>,
    /// The floor read between the BPF readers' scans (`None` without them or the floor): it
    /// keeps their scans apart as the /proc ones are, and shows what the BPF walks cost the
    /// next reader of /proc. Not the floor the ratios are taken against.
    per_process_floor_beside_task_iter: Option<Figure>,
    /// The iterator's CPU per process against the /proc floor's (`per_process_floor`).
    task_iter_ratio_to_floor_cpu: Option<f64>,
    task_iter_unavailable: Option<String>,
    /// Which reader `per_process_task_iter` measured: the open-coded scan (6.7+) or the
    /// iterator's file, and why not the scan.
    task_iter_how: Option<String>,
    /// Where the open-coded scan runs, the iterator's file beside it in the same scans (the
    /// reader kernels before 6.7 get), per process, and its CPU against the /proc floor's.
    per_process_task_iter_file: Option<Figure>,
    task_iter_file_ratio_to_floor_cpu: Option<f64>,
    /// Scans the iterator failed (each counted, none retried).
    task_iter_errors: u64,
    /// The sampler's process part as the agent runs it where the iterator loads (its stat
    /// fields from the iterator; /proc still listed, and what the iterator did not give read
    /// from its stat), per process.
    per_process_via_task_iter: Option<Figure>,
    /// Processes per scan that /proc listed and the iterator did not give.
    task_iter_missed_per_scan: Option<f64>,
    files_per_process_per_scan: f64,
    errors: u64,
    processes_gone: u64,
}

/// The host files a sample reads, for the floor reader.
const HOST_FILES: [&str; 11] = [
    "/proc/stat",
    "/proc/meminfo",
    "/proc/loadavg",
    "/proc/vmstat",
    "/proc/diskstats",
    "/proc/net/dev",
    "/proc/pressure/cpu",
    "/proc/pressure/memory",
    "/proc/pressure/io",
    "/proc/uptime",
    "/sys/devices/system/cpu/online",
];

fn measure(mut f: impl FnMut()) -> (u64, u64) {
    let cpu = thread_cpu_ns();
    let wall = Instant::now();
    f();
    (thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as u64)
}

fn per(total: (u64, u64), units: f64) -> Figure {
    Figure { cpu_us: total.0 as f64 / 1e3 / units, wall_us: total.1 as f64 / 1e3 / units }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let base = args.read.config()?;
    let root = base.root.clone();
    let n = args.samples;

    // Host: proctor's sampler without processes or cgroups vs the floor, interleaved in
    // blocks so that machine noise lands on both alike.
    let cpu_only = args.host == HostChoice::Cpu;
    let host_config = SamplerConfig {
        processes: false,
        container_pid: base.container_pid,
        root: root.clone(),
        host_files: if cpu_only { HostFiles::Cpu } else { HostFiles::All },
        container: !cpu_only,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(host_config);
    let _ = sampler.sample();
    let floor_paths: &[&str] = if cpu_only { &["/proc/stat", "/proc/loadavg"] } else { &HOST_FILES };
    let mut floor_files: Vec<File> = floor_paths.iter().filter_map(|p| root.open(p).ok()).collect();
    // The watched cgroup's counter files are part of every sample too.
    floor_files.extend(sampler.container_files().iter().filter_map(|p| File::open(p).ok()));
    for node in 0..if cpu_only { 0 } else { 64 } {
        match root.open(format!("/sys/devices/system/node/node{node}/meminfo")) {
            Ok(f) => floor_files.push(f),
            Err(_) => break,
        }
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut host = (0u64, 0u64);
    let mut floor = (0u64, 0u64);
    let mut errors = 0;
    let block = 100.min(n);
    let mut done = 0;
    while done < n {
        let count = block.min(n - done);
        let t = measure(|| {
            for _ in 0..count {
                let s = sampler.sample();
                errors += s.cost.error_total();
            }
        });
        host = (host.0 + t.0, host.1 + t.1);
        let t = measure(|| {
            if args.no_floor {
                return;
            }
            for _ in 0..count {
                for f in &floor_files {
                    // Read to EOF like any reader must; no parsing.
                    let mut at = 0;
                    while let Ok(got) = f.read_at(&mut buf[at..], at as u64) {
                        at += got;
                        if got == 0 || at < buf.len() {
                            break;
                        }
                    }
                }
            }
        });
        floor = (floor.0 + t.0, floor.1 + t.1);
        done += count;
    }
    drop(sampler);

    // Processes: a scan with the default per-pid files (stat; status when the footprint
    // moved), no workers, no cgroup membership reads after the first scan; each process's
    // `stat` read from /proc. The same through the task iterator is measured after it.
    let proc_config = SamplerConfig {
        root: root.clone(),
        cmdline: false,
        pss_budget: 0.0,
        container_pid: base.container_pid,
        task_iter: false,
        ..SamplerConfig::default()
    };
    let scans = args.scans;
    let mut sampler = Sampler::new(proc_config.clone());
    if scans > 0 {
        errors += sampler.sample().cost.error_total();
    }
    let mut scan_total = (0u64, 0u64);
    let mut floor_total = (0u64, 0u64);
    let mut pid_count = 0u64;
    let mut files = 0u64;
    let mut gone = 0;
    let mut floor_reader = FloorScanner::new(root.clone());
    if !args.no_floor && scans > 0 {
        floor_reader.scan(&mut buf);
    }
    let (mut task_iter, task_iter_unavailable) = if scans == 0 {
        (None, None)
    } else {
        match proctor_bpf::TaskIter::open() {
            Ok(iter) => (Some(iter), None),
            Err(why) => (None, Some(why.0)),
        }
    };
    let task_iter_how = task_iter.as_ref().map(|iter| iter.how());
    let mut file_iter = task_iter
        .as_ref()
        .filter(|iter| iter.open_coded())
        .and_then(|_| proctor_bpf::TaskIter::open_with(proctor_bpf::Way::File).ok());
    let (mut iter_total, mut iter_pids, mut iter_errors) = ((0u64, 0u64), 0u64, 0u64);
    let (mut file_total, mut file_pids) = ((0u64, 0u64), 0u64);
    let mut iter_out = Vec::new();
    // The sampler as the agent runs it where the iterator loads: stat fields from one read,
    // /proc listed for what the iterator did not give.
    let mut iter_sampler = task_iter
        .is_some()
        .then(|| Sampler::new(SamplerConfig { task_iter: true, ..proc_config.clone() }))
        .filter(|s| s.task_iter_status().is_ok());
    if let Some(s) = iter_sampler.as_mut() {
        errors += s.sample().cost.error_total();
    }
    let (mut via_iter_total, mut via_iter_pids, mut via_iter_missed) = ((0u64, 0u64), 0u64, 0u64);
    // Two phases, each with the floor read between its scans: the /proc scan first, alone with
    // the floor as it always was, then the BPF readers. Run in one loop, each /proc scan came
    // just after the BPF scans had walked every task, and both it and the floor measured ~15 %
    // dearer than where no BPF reader runs (600 processes, `bench/ab.sh`), which made builds
    // with and without the iterator incomparable.
    for _ in 0..scans {
        let mut s = None;
        let t = measure(|| s = Some(sampler.sample()));
        let s = s.expect("sample was taken");
        scan_total = (scan_total.0 + t.0, scan_total.1 + t.1);
        pid_count += s.processes.len() as u64;
        files += s.cost.files_read;
        gone += s.cost.processes_gone;
        errors += s.cost.error_total();
        let t = measure(|| {
            if !args.no_floor {
                floor_reader.scan(&mut buf);
            }
        });
        floor_total = (floor_total.0 + t.0, floor_total.1 + t.1);
    }
    let floor_pids = floor_reader.pids_read;
    let bpf_phase = task_iter.is_some() || file_iter.is_some() || iter_sampler.is_some();
    let mut bpf_floor_total = (0u64, 0u64);
    for _ in 0..if bpf_phase { scans } else { 0 } {
        // One scan of a BPF reader as the agent runs it (its output read by pid through an
        // index), timed into its totals; a failed one counted.
        let mut timed_scan = |iter: &mut proctor_bpf::TaskIter, total: &mut (u64, u64), pids: &mut u64| {
            let t = measure(|| {
                if iter.scan_by_pid(&mut iter_out).is_err() {
                    iter_errors += 1;
                }
            });
            *total = (total.0 + t.0, total.1 + t.1);
            *pids += iter.by_pid(&iter_out).len() as u64;
        };
        if let Some(iter) = task_iter.as_mut() {
            timed_scan(iter, &mut iter_total, &mut iter_pids);
        }
        if let Some(iter) = file_iter.as_mut() {
            timed_scan(iter, &mut file_total, &mut file_pids);
        }
        if let Some(sampler) = iter_sampler.as_mut() {
            let mut s = None;
            let t = measure(|| s = Some(sampler.sample()));
            let s = s.expect("sample was taken");
            via_iter_total = (via_iter_total.0 + t.0, via_iter_total.1 + t.1);
            via_iter_pids += s.processes.len() as u64;
            via_iter_missed += s.cost.task_iter_missed;
            errors += s.cost.error_total();
        }
        let t = measure(|| {
            if !args.no_floor {
                floor_reader.scan(&mut buf);
            }
        });
        bpf_floor_total = (bpf_floor_total.0 + t.0, bpf_floor_total.1 + t.1);
    }
    let per_process_task_iter = task_iter.is_some().then(|| per(iter_total, iter_pids.max(1) as f64));
    let per_process_task_iter_file = file_iter.is_some().then(|| per(file_total, file_pids.max(1) as f64));
    let processes = pid_count as f64 / scans.max(1) as f64;
    // Host work inside a process scan sample is subtracted using the host figure above, so
    // "per process" is the process part alone.
    let host_part = (host.0 / n, host.1 / n);
    let proc_only =
        (scan_total.0.saturating_sub(host_part.0 * scans), scan_total.1.saturating_sub(host_part.1 * scans));
    let per_process = per(proc_only, pid_count.max(1) as f64);
    let per_process_via_task_iter = iter_sampler.as_ref().map(|_| {
        let only = (
            via_iter_total.0.saturating_sub(host_part.0 * scans),
            via_iter_total.1.saturating_sub(host_part.1 * scans),
        );
        per(only, via_iter_pids.max(1) as f64)
    });
    let per_process_floor = per(floor_total, floor_pids.max(1) as f64);
    // The floor read beside the BPF readers: shown, not used for their ratios (the /proc floor
    // read alone is the floor).
    let per_process_floor_beside_task_iter = (bpf_phase && !args.no_floor)
        .then(|| per(bpf_floor_total, floor_reader.pids_read.saturating_sub(floor_pids).max(1) as f64));
    let host_sample = per(host, n as f64);
    let host_floor = per(floor, n as f64);
    let out = Output {
        host_samples: n,
        host_files: floor_files.len(),
        host_ratio_cpu: (!args.no_floor).then(|| host_sample.cpu_us / host_floor.cpu_us.max(1e-9)),
        host_sample,
        host_floor,
        process_scans: scans,
        processes,
        per_process_ratio_cpu: (!args.no_floor && scans > 0)
            .then(|| per_process.cpu_us / per_process_floor.cpu_us.max(1e-9)),
        task_iter_ratio_to_floor_cpu: per_process_task_iter
            .as_ref()
            .filter(|_| !args.no_floor)
            .map(|it| it.cpu_us / per_process_floor.cpu_us.max(1e-9)),
        per_process_task_iter,
        task_iter_file_ratio_to_floor_cpu: per_process_task_iter_file
            .as_ref()
            .filter(|_| !args.no_floor)
            .map(|it| it.cpu_us / per_process_floor.cpu_us.max(1e-9)),
        per_process_task_iter_file,
        task_iter_how,
        task_iter_unavailable,
        task_iter_errors: iter_errors,
        task_iter_missed_per_scan: per_process_via_task_iter
            .as_ref()
            .map(|_| via_iter_missed as f64 / scans.max(1) as f64),
        per_process_via_task_iter,
        per_process,
        per_process_floor,
        per_process_floor_beside_task_iter,
        files_per_process_per_scan: files as f64 / pid_count.max(1) as f64,
        errors,
        processes_gone: gone,
    };
    match args.format {
        Format::Json => print_json(&out)?,
        Format::Text => {
            let mut w = std::io::stdout().lock();
            writeln!(
                w,
                "host sample      {:>8.2} µs CPU {:>8.2} µs wall   ({} samples, {} files each)",
                out.host_sample.cpu_us, out.host_sample.wall_us, n, out.host_files
            )?;
            writeln!(
                w,
                "host floor       {:>8.2} µs CPU {:>8.2} µs wall   (pread of the same files, no parsing)",
                out.host_floor.cpu_us, out.host_floor.wall_us
            )?;
            writeln!(
                w,
                "host ratio       {:>8}  CPU",
                out.host_ratio_cpu.map_or("n/a".into(), |r| format!("{r:.2}×"))
            )?;
            writeln!(
                w,
                "per process      {:>8.2} µs CPU {:>8.2} µs wall   ({} scans of {:.0} processes, {:.2} files/process)",
                out.per_process.cpu_us, out.per_process.wall_us, scans, processes, out.files_per_process_per_scan
            )?;
            writeln!(
                w,
                "per process floor{:>8.2} µs CPU {:>8.2} µs wall   (readdir + pread stat via kept fds)",
                out.per_process_floor.cpu_us, out.per_process_floor.wall_us
            )?;
            writeln!(
                w,
                "per process ratio{:>8}  CPU",
                out.per_process_ratio_cpu.map_or("n/a".into(), |r| format!("{r:.2}×"))
            )?;
            match (&out.per_process_task_iter, &out.task_iter_unavailable) {
                (Some(it), _) => writeln!(
                    w,
                    "task iterator    {:>8.2} µs CPU {:>8.2} µs wall   ({}; {} × the floor's CPU{})",
                    it.cpu_us,
                    it.wall_us,
                    out.task_iter_how.as_deref().unwrap_or("BPF"),
                    out.task_iter_ratio_to_floor_cpu.map_or("n/a".into(), |r| format!("{r:.3}")),
                    if out.task_iter_errors > 0 {
                        format!(", {} scans failed", out.task_iter_errors)
                    } else {
                        String::new()
                    }
                )?,
                (None, Some(why)) => writeln!(w, "task iterator    not measured: {why}")?,
                (None, None) => {}
            }
            if let Some(it) = &out.per_process_task_iter_file {
                writeln!(
                    w,
                    "task iter's file {:>8.2} µs CPU {:>8.2} µs wall   (the iter/task program's file, as before 6.7; {} × the floor's CPU)",
                    it.cpu_us,
                    it.wall_us,
                    out.task_iter_file_ratio_to_floor_cpu.map_or("n/a".into(), |r| format!("{r:.3}")),
                )?;
            }
            if let Some(v) = &out.per_process_via_task_iter {
                writeln!(
                    w,
                    "per process, iter{:>8.2} µs CPU {:>8.2} µs wall   (the sampler through the iterator; {:.1} processes per scan only /proc had)",
                    v.cpu_us,
                    v.wall_us,
                    out.task_iter_missed_per_scan.unwrap_or(0.0)
                )?;
            }
            if let Some(f) = &out.per_process_floor_beside_task_iter {
                writeln!(
                    w,
                    "floor beside BPF {:>8.2} µs CPU {:>8.2} µs wall   (the floor between the BPF scans, after the /proc ones; not used for the ratios)",
                    f.cpu_us, f.wall_us
                )?;
            }
            writeln!(w, "errors {} · processes gone mid-read {}", out.errors, out.processes_gone)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The minimal process reader: lists /proc, keeps `stat` open per pid, and `pread`s it every
/// scan without parsing. Its kept files are a vector sorted by pid, walked alongside the sorted
/// listing, so the floor pays for no hashing at all (it used a SipHash map until the scanner's
/// own costs came close enough for that to matter).
struct FloorScanner {
    root: proctor_procfs::Root,
    files: Vec<(u32, File)>,
    pids: Vec<u32>,
    pids_read: u64,
}

impl FloorScanner {
    fn new(root: proctor_procfs::Root) -> Self {
        Self { root, files: Vec::new(), pids: Vec::new(), pids_read: 0 }
    }

    fn scan(&mut self, buf: &mut [u8]) {
        // The same allocation-free listing the sampler uses, so the floor is not handicapped.
        if proctor_procfs::system::list_pids(&self.root, &mut self.pids).is_err() {
            return;
        }
        let mut old = std::mem::take(&mut self.files).into_iter().peekable();
        let mut kept = Vec::with_capacity(self.pids.len());
        for &pid in &self.pids {
            while old.next_if(|(p, _)| *p < pid).is_some() {}
            let file = match old.next_if(|(p, _)| *p == pid) {
                Some((_, f)) => f,
                // As the sampler opens it (an `fstat` too under a host root).
                None => match self.root.open(format!("/proc/{pid}/stat")) {
                    Ok(f) => f,
                    Err(_) => continue,
                },
            };
            if file.read_at(buf, 0).is_ok() {
                self.pids_read += 1;
                kept.push((pid, file));
            }
        }
        self.files = kept;
    }
}
