//! One collection cycle, measured: host files, the watched container's cgroup, every process.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use proctor_model::gpu::{GpuClient, GpuSample};
use proctor_model::{ContainerSample, ProcessSample, Sample, SampleCost, Stall};
use proctor_procfs::cgroup::{self, CgroupLimits, CgroupPaths};
use proctor_procfs::system::{affinity, clock_ticks_per_sec, page_size, raise_nofile_limit, thread_cpu_ns};
use proctor_procfs::ErrorKind;

use crate::cmdline::{CmdlineStats, CmdlineWorker};
use crate::drm::{DrmStats, DrmWorker};
use crate::events::{Churn, EventsState};
use crate::host::HostReader;
use crate::net::NetState;
use crate::nvml::{NvmlReading, NvmlStatus, NvmlWorker};
use crate::power::PowerReader;
use crate::pss::{Candidate, PssStats, PssWorker};
use crate::table::{ProcessTable, ScanOptions};
use crate::{Reads, SamplerConfig};

/// The DRM clients and NVML reading a GPU part was built from, and the part.
type GpuCache = (Arc<Vec<GpuClient>>, Option<Arc<NvmlReading>>, Arc<GpuSample>);

#[derive(Debug)]
struct ContainerState {
    pid: u32,
    paths: Arc<CgroupPaths>,
    counters: cgroup::CounterReader,
    limits: Arc<CgroupLimits>,
    limits_read_mono_ns: u64,
    affinity: Option<Arc<[u32]>>,
}

/// Owns every kept-open file and the worker threads. Not `Sync`: one thread samples.
#[derive(Debug)]
pub struct Sampler {
    config: SamplerConfig,
    epoch: Instant,
    seq: u64,
    page_size: u64,
    ticks: u64,
    host: HostReader,
    table: ProcessTable,
    container: Option<ContainerState>,
    container_error: Option<String>,
    pss: Option<PssWorker>,
    cmdline: Option<CmdlineWorker>,
    power: Option<PowerReader>,
    drm: Option<DrmWorker>,
    nvml: Option<NvmlWorker>,
    /// The inputs of the last GPU part built and the part itself, reused while neither moved.
    gpu_cache: Option<GpuCache>,
    /// The DRM worker's clients as of this cycle's offer.
    drm_latest: Arc<Vec<GpuClient>>,
    new_pids: Vec<(u32, u64)>,
    /// Young forked children whose command lines wait for this sample
    /// ([`crate::events::ExecCmdlines::young_forks`]).
    young_forks: Vec<(u32, u64)>,
    /// Whether the task scan's effective users are the ones `status` gives: the scan loaded
    /// and this process is in the initial user namespace (the kernel's numbers, unmapped).
    scan_uids: bool,
    /// The BPF task iterator, where it loaded; else why not (`None` when not asked).
    task_iter: Result<TaskIterState, Option<String>>,
    /// Process starts and ends: the BPF process events where they loaded, and coverage.
    churn: Churn,
    /// Each process's network use from the kernel's table, or why not.
    net: Result<NetState, Option<String>>,
    /// The cost of opening files in `new`, charged to the first sample.
    setup_cost: Option<SampleCost>,
    nofile_limit: Option<u64>,
}

/// The loaded iterator and the stat fields of its last scan (reused).
#[derive(Debug)]
struct TaskIterState {
    iter: proctor_bpf::TaskIter,
    stats: Vec<proctor_procfs::process::PidStat>,
}

/// How many per-pid files the process table may keep open under an open-file limit of
/// `nofile`: all but a quarter of it, and at least 256 left for everything else (HTTP takes up
/// to an eighth for connections, and the runtime, store segments, logs and workers' transient
/// reads the rest).
pub fn kept_fd_budget(nofile: u64) -> usize {
    let reserve = (nofile / 4).max(256);
    usize::try_from(nofile.saturating_sub(reserve)).unwrap_or(usize::MAX)
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Self {
        let epoch = Instant::now();
        let mut setup_cost = SampleCost::default();
        let cpu_before = thread_cpu_ns();
        let nofile_limit = if config.processes { raise_nofile_limit().ok() } else { None };
        let host = HostReader::open(&config.root, config.host_files, &mut setup_cost);
        let discovered = if config.container { cgroup::discover(&config.root, config.container_pid) } else { Ok(None) };
        let (container, container_error) = match discovered {
            Ok(None) if !config.container => (None, Some("container reads are off".to_string())),
            Ok(Some(paths)) => (Some(Self::read_container(&config, Arc::new(paths), 0)), None),
            Ok(None) => (None, Some("no cgroup filesystem is mounted".to_string())),
            Err(e) => {
                *setup_cost.errors.entry(("container.discover", e.kind.as_str())).or_default() += 1;
                (None, Some(e.to_string()))
            }
        };
        let pss = (config.processes && config.pss_budget > 0.0)
            .then(|| PssWorker::start_with_limits(config.root.clone(), config.pss_budget, limits(&config), epoch).ok())
            .flatten();
        let cmdline = (config.processes && config.cmdline)
            .then(|| CmdlineWorker::start(config.root.clone(), config.cmdline_timeout).ok())
            .flatten();
        let power = config.power.then(|| PowerReader::open(&config.root, &mut setup_cost));
        // GPU files are only looked for where there is a DRM device node to hold.
        let drm = (config.gpu && config.processes && config.root.path("/dev/dri").is_dir())
            .then(|| DrmWorker::start(config.root.clone(), config.gpu_budget, config.gpu_rewalk, epoch).ok())
            .flatten();
        let nvml = (config.gpu && config.root.is_real())
            .then(|| NvmlWorker::start(&config.nvml_library, config.nvml_timeout).ok())
            .flatten();
        // BPF numbers tasks as the host does: usable on this machine's /, and under a host root
        // whose /proc is in proctor's own pid namespace (a container with the host's).
        let local = config.root.is_real() && (!config.root.is_host() || host_proc_is_ours(&config.root));
        let want_iter = config.processes && config.task_iter && local;
        let want_events = config.processes && config.process_events && local;
        let want_net = config.processes && config.process_net && local;
        // All from one parse of the kernel's BTF.
        let proctor_bpf::Opened { iter, events, net } = proctor_bpf::open(want_iter, want_events, want_net);
        let elsewhere = || {
            Some(if config.root.is_host() {
                "the host root's /proc is another pid namespace's than proctor's (run it with the host's: --pid=host, hostPID)"
                    .to_string()
            } else {
                "the processes are read under another root than this machine's /".to_string()
            })
        };
        let task_iter = match iter {
            Some(opened) => opened.map(|iter| TaskIterState { iter, stats: Vec::new() }).map_err(|why| Some(why.0)),
            None if config.processes && config.task_iter => Err(elsewhere()),
            None => Err(None),
        };
        let events = match events {
            Some(opened) => opened.map(EventsState::new).map_err(|why| Some(why.0)),
            None if config.processes && config.process_events => Err(elsewhere()),
            None => Err(None),
        };
        let net = match net {
            Some(opened) => opened.map(NetState::new).map_err(|why| Some(why.0)),
            None if config.processes && config.process_net => Err(elsewhere()),
            None => Err(None),
        };
        setup_cost.cpu_ns = thread_cpu_ns().saturating_sub(cpu_before);
        Self {
            epoch,
            seq: 0,
            page_size: page_size(),
            ticks: clock_ticks_per_sec(),
            host,
            table: ProcessTable::new(config.fd_budget.or(nofile_limit.map(kept_fd_budget)).unwrap_or(usize::MAX)),
            container,
            container_error,
            pss,
            cmdline,
            power,
            drm,
            nvml,
            gpu_cache: None,
            drm_latest: Arc::default(),
            new_pids: Vec::new(),
            young_forks: Vec::new(),
            scan_uids: task_iter.is_ok() && initial_user_namespace(),
            task_iter,
            churn: Churn::new(events, clock_ticks_per_sec(), page_size()),
            net,
            setup_cost: Some(setup_cost),
            nofile_limit,
            config,
        }
    }

    fn read_container(config: &SamplerConfig, paths: Arc<CgroupPaths>, mono_ns: u64) -> ContainerState {
        let limits = Arc::new(cgroup::read_limits(&config.root, &paths));
        let affinity = if config.root.is_real() { affinity(config.container_pid).ok().map(Arc::from) } else { None };
        let counters = cgroup::CounterReader::open(&config.root, &paths);
        ContainerState { pid: config.container_pid, paths, counters, limits, limits_read_mono_ns: mono_ns, affinity }
    }

    /// The sampler's monotonic zero: `Sample::mono_ns` counts from here.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The optional reads as they are now.
    pub fn reads(&self) -> Reads {
        Reads {
            pss_budget: self.config.pss_budget,
            process_io: self.config.process_io,
            threads: self.config.process_threads,
        }
    }

    /// Starts or stops the optional reads from the next cycle on (called between cycles, on
    /// the sampling thread). A PSS worker whose budget changes is stopped, which waits for the
    /// read it is in, and a new one started; its readings start afresh. Turning `/proc/PID/io`
    /// off closes the kept io files, so their fds go back to the budget.
    pub fn set_reads(&mut self, reads: Reads) {
        // Thread reads keep nothing open: turning them off just stops them.
        self.config.process_threads = reads.threads;
        if reads.process_io != self.config.process_io {
            self.config.process_io = reads.process_io;
            if !reads.process_io {
                self.table.close_io();
            }
        }
        let budget = if reads.pss_budget.is_finite() { reads.pss_budget.clamp(0.0, 1.0) } else { 0.0 };
        if budget != self.config.pss_budget {
            self.config.pss_budget = budget;
            self.pss = None;
            if self.config.processes && budget > 0.0 {
                self.pss =
                    PssWorker::start_with_limits(self.config.root.clone(), budget, limits(&self.config), self.epoch)
                        .ok();
            }
        }
    }

    /// Whether each process's stat fields come from the BPF task iterator (`Ok`), or why
    /// they are read from `/proc` (`Err`; `None` when the iterator was not asked for).
    pub fn task_iter_status(&self) -> Result<(), Option<&str>> {
        match &self.task_iter {
            Ok(_) => Ok(()),
            Err(why) => Err(why.as_deref()),
        }
    }

    /// Which BPF reader gives the stat fields, in words (the open-coded scan, or the task
    /// iterator's file and why not the scan); `None` where `/proc` is read.
    pub fn task_iter_how(&self) -> Option<String> {
        self.task_iter.as_ref().ok().map(|state| state.iter.how())
    }

    /// Whether every exec and exit comes from the BPF process events (`Ok`), or why not
    /// (`Err`; `None` when they were not asked for).
    pub fn events_status(&self) -> Result<(), Option<&str>> {
        match &self.churn.events {
            Ok(_) => Ok(()),
            Err(why) => Err(why.as_deref()),
        }
    }

    /// Whether each process's network use is counted (`Ok`), or why not (`Err`; `None` when
    /// it was not asked for).
    pub fn net_status(&self) -> Result<(), Option<&str>> {
        match &self.net {
            Ok(_) => Ok(()),
            Err(why) => Err(why.as_deref()),
        }
    }

    /// How the walks of the TCP sockets go, where per-process network is on.
    pub fn net_walk(&self) -> Option<crate::NetWalk> {
        self.net.as_ref().ok().map(|n| n.last_walk.clone())
    }

    /// Why there is no container view, when there is none.
    pub fn container_error(&self) -> Option<&str> {
        self.container_error.as_deref()
    }

    /// Asks the PSS worker to read `pid` first ([`PssWorker::ask`]); nothing without one.
    pub fn ask_pss(&self, pid: u32) {
        if let Some(pss) = &self.pss {
            pss.ask(pid);
        }
    }

    pub fn pss_stats(&self) -> Option<PssStats> {
        self.pss.as_ref().map(PssWorker::stats)
    }

    /// New processes whose command line is read at the next sample, not this one: forked
    /// children first seen younger than 100 ms that have not exec'd (with the process events).
    pub fn young_forks_waiting(&self) -> &[(u32, u64)] {
        &self.young_forks
    }

    /// The command line the cmdline worker holds for a process (read, or from its exec), which
    /// the next sample's row will carry; `None` before it is read.
    pub fn held_cmdline(&self, pid: u32, start_ticks: u64) -> Option<Arc<[String]>> {
        self.cmdline.as_ref()?.with_results(|lookup| lookup(pid, start_ticks).0)
    }

    pub fn cmdline_stats(&self) -> Option<CmdlineStats> {
        self.cmdline.as_ref().map(CmdlineWorker::stats)
    }

    /// The energy sources found when the sampler started, and those it may not read.
    pub fn power_discovery(&self) -> Option<&proctor_procfs::power::Discovery> {
        self.power.as_ref().map(PowerReader::discovery)
    }

    /// The DRM worker's counts; `None` where it did not start (no `/dev/dri`, or GPU reads off).
    pub fn drm_stats(&self) -> Option<DrmStats> {
        self.drm.as_ref().map(DrmWorker::stats)
    }

    /// What the NVML thread is doing; `None` where GPU reads are off.
    pub fn nvml_status(&self) -> Option<NvmlStatus> {
        self.nvml.as_ref().map(NvmlWorker::status)
    }

    pub fn nofile_limit(&self) -> Option<u64> {
        self.nofile_limit
    }

    /// The cgroup counter files read every cycle (for floor measurements).
    pub fn container_files(&self) -> Vec<std::path::PathBuf> {
        self.container.as_ref().map_or_else(Vec::new, |c| c.counters.paths().map(Into::into).collect())
    }

    pub fn tracked_processes(&self) -> usize {
        self.table.len()
    }

    /// Runs one collection cycle on this thread.
    pub fn sample(&mut self) -> Sample {
        let cpu_before = thread_cpu_ns();
        let started = Instant::now();
        let mono_ns = started.duration_since(self.epoch).as_nanos() as u64;
        let unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mut cost = self.setup_cost.take().unwrap_or_default();

        let mut host = self.host.read(&mut cost);
        if let Some(power) = self.power.as_mut() {
            power.read(&mut cost, &mut host.power);
        }
        let nvml = self.nvml.as_ref().and_then(|n| {
            n.request();
            n.latest()
        });
        if let Some(reading) = nvml.as_deref() {
            crate::power::nvml_power(reading, &mut host.power);
        }
        let t = Instant::now();
        *cost.reader_wall_ns.entry("host").or_default() += t.duration_since(started).as_nanos() as u64;
        let container = self.sample_container(mono_ns, &mut cost);
        *cost.reader_wall_ns.entry("container").or_default() += t.elapsed().as_nanos() as u64;

        let mut processes = Vec::new();
        let mut exited = Vec::new();
        if self.config.processes {
            let t = Instant::now();
            self.new_pids.clear();
            // Only the network table asks when the scan began (which rows outlived their process).
            let scan_boot_ns = self.net.is_ok().then(crate::net::boot_ns).unwrap_or(0);
            // Every exit up to the scan: an exit the table's previous processes have is seen.
            self.churn.drain();
            // Young forked children read their `status` from their next sample on, where the
            // scan gives their user (`ScanOptions::status_later`).
            let execd = std::cell::OnceCell::new();
            let churn = &self.churn;
            let now_boot_ns = if self.scan_uids && churn.events.is_ok() { crate::net::boot_ns() } else { 0 };
            let young = move |pid: u32, start: u64| churn.young_fork((pid, start), now_boot_ns, &execd);
            let opts = ScanOptions {
                io: self.config.process_io,
                threads: self.config.process_threads,
                cgroups: self.config.process_cgroups,
                fds: self.config.process_fds,
                mono_ns,
                page_size: self.page_size,
                status_later: (now_boot_ns > 0).then_some(&young as &dyn Fn(u32, u64) -> bool),
            };
            // Through the task iterator where it loaded: one read for every process's stat
            // fields. A failed scan is counted and this cycle reads /proc instead.
            let stats = match self.task_iter.as_mut() {
                Ok(state) => {
                    // The scan counts open fds where the table asks (groups), saving a `statx` each.
                    state.iter.count_fds(opts.fds);
                    match state.iter.scan_by_pid(&mut state.stats) {
                        Ok(scan) => {
                            cost.task_iter_reads += scan.reads;
                            Some(state.iter.by_pid(&state.stats))
                        }
                        Err(_) => {
                            *cost.errors.entry(("process.task_iter", "io")).or_default() += 1;
                            None
                        }
                    }
                }
                Err(_) => None,
            };
            processes = self.table.scan(&self.config.root, opts, &mut cost, &mut self.new_pids, stats);
            // The exits of processes that ended while the scan ran, before it reached them.
            self.churn.drain_after_scan(&processes);
            *cost.reader_wall_ns.entry("processes").or_default() += t.elapsed().as_nanos() as u64;
            let t = Instant::now();
            self.attach_workers(&mut processes);
            let taken = [
                self.cmdline.as_ref().map(CmdlineWorker::take_interval),
                self.pss.as_ref().map(PssWorker::take_interval),
            ];
            for (stall, pid) in taken.into_iter().flatten() {
                if stall.reads > 0 && stall.max_ns >= cost.target_lock.max_ns {
                    cost.target_lock_worst_pid = pid;
                }
                cost.target_lock = Stall::merge(Some(cost.target_lock), Some(stall)).unwrap_or_default();
            }
            *cost.reader_wall_ns.entry("workers").or_default() += t.elapsed().as_nanos() as u64;
            let t = Instant::now();
            let forks = host.stat.as_ref().and_then(|s| s.forks);
            let (churn, table, new_pids) = (&mut self.churn, &self.table, &self.new_pids);
            let mut finish = |read_lines: &dyn Fn(u32, u64) -> Option<Arc<[String]>>| {
                churn.finish(&processes, new_pids, forks, mono_ns, table.cgroup_paths(), read_lines, &mut cost)
            };
            exited = match self.cmdline.as_ref() {
                Some(worker) => worker.with_results(|lookup| finish(&|pid, start| lookup(pid, start).0)),
                None => finish(&|_, _| None),
            };
            // Lines of processes gone are forgotten once the exits had them.
            if let Some(worker) = self.cmdline.as_ref() {
                worker.forget_unless(processes.len(), |pid| processes.binary_search_by_key(&pid, |p| p.pid).is_ok());
            }
            *cost.reader_wall_ns.entry("events").or_default() += t.elapsed().as_nanos() as u64;
            if let Ok(net) = self.net.as_mut() {
                let t = Instant::now();
                host.net = Some(net.attach(&mut processes, self.ticks, scan_boot_ns, &mut cost));
                net.give_exited(&mut exited);
                *cost.reader_wall_ns.entry("net").or_default() += t.elapsed().as_nanos() as u64;
            }
        }

        cost.wall_ns += started.elapsed().as_nanos() as u64;
        cost.cpu_ns += thread_cpu_ns().saturating_sub(cpu_before);
        let sample = Sample {
            seq: self.seq,
            unix_ns,
            mono_ns,
            clock_ticks_per_sec: self.ticks,
            page_size: self.page_size,
            host,
            container,
            processes,
            cost,
            groups: None,
            gpu: self.gpu_part(nvml),
            exited,
        };
        self.seq += 1;
        sample
    }

    fn sample_container(&mut self, mono_ns: u64, cost: &mut SampleCost) -> Option<ContainerSample> {
        let state = self.container.as_mut()?;
        let age_ns = mono_ns.saturating_sub(state.limits_read_mono_ns);
        if age_ns >= self.config.limits_refresh.as_nanos() as u64 {
            let refreshed = Self::read_container(&self.config, Arc::clone(&state.paths), mono_ns);
            *state = refreshed;
        }
        let counters = state.counters.read();
        for _ in &counters.errors {
            *cost.errors.entry(("container", ErrorKind::Io.as_str())).or_default() += 1;
        }
        Some(ContainerSample {
            pid: state.pid,
            paths: Arc::clone(&state.paths),
            limits: Arc::clone(&state.limits),
            limits_read_mono_ns: state.limits_read_mono_ns,
            counters,
            affinity: state.affinity.clone(),
        })
    }

    /// The GPU part of a sample: the DRM worker's newest clients and the newest NVML reading,
    /// rebuilt only when either changed.
    fn gpu_part(&mut self, nvml: Option<Arc<NvmlReading>>) -> Option<Arc<GpuSample>> {
        let clients = Arc::clone(&self.drm_latest);
        if clients.is_empty() && nvml.as_ref().is_none_or(|n| n.devices.is_empty()) {
            self.gpu_cache = None;
            return None;
        }
        if let Some((c, n, part)) = &self.gpu_cache {
            let same_nvml = match (n, &nvml) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if Arc::ptr_eq(c, &clients) && same_nvml {
                return Some(Arc::clone(part));
            }
        }
        let part = Arc::new(GpuSample {
            clients: Arc::clone(&clients),
            nvml_devices: nvml.as_ref().map(|n| n.devices.clone()).unwrap_or_default(),
            nvml_processes: nvml.as_ref().map(|n| n.processes.clone()).unwrap_or_default(),
        });
        self.gpu_cache = Some((clients, nvml, Arc::clone(&part)));
        Some(part)
    }

    /// Hands new processes to the cmdline worker and candidates to the PSS worker, and copies
    /// what they have read so far into the sample.
    fn attach_workers(&mut self, processes: &mut [ProcessSample]) {
        if let Some(drm) = self.drm.as_ref() {
            // The round finished before this cycle's offer, so that every sample carries the
            // round one cycle older than itself, never sometimes this cycle's and sometimes the
            // last (two samples with one reading would have no rate between them).
            self.drm_latest = drm.latest();
            drm.offer(processes.iter().map(|p| (p.pid, p.start_ticks)).collect());
        }
        if let Some(cmdline) = self.cmdline.as_ref() {
            // Command lines an exec event told in full need no read (and take no lock); an exec
            // that kept the process's name is read again all the same.
            let execs = self.churn.exec_cmdlines(processes, &self.new_pids, crate::net::boot_ns());
            // Last sample's young forked children that are still here are read now.
            let listed = |&(pid, start): &(u32, u64)| {
                processes.binary_search_by_key(&pid, |p| p.pid).is_ok_and(|i| processes[i].start_ticks == start)
            };
            let carried: Vec<(u32, u64)> = std::mem::take(&mut self.young_forks).into_iter().filter(listed).collect();
            if execs.known.is_empty() && execs.reread.is_empty() && execs.young_forks.is_empty() && carried.is_empty() {
                cmdline.request(&self.new_pids);
            } else {
                let known: std::collections::HashSet<(u32, u64)> =
                    execs.known.iter().map(|(pid, start, _)| (*pid, *start)).collect();
                let young: std::collections::HashSet<&(u32, u64)> = execs.young_forks.iter().collect();
                let mut asked: Vec<(u32, u64)> =
                    self.new_pids.iter().filter(|k| !known.contains(k) && !young.contains(k)).copied().collect();
                let new: std::collections::HashSet<&(u32, u64)> = self.new_pids.iter().collect();
                let later: std::collections::BTreeSet<&(u32, u64)> =
                    execs.reread.iter().chain(&carried).filter(|k| !new.contains(k) && !known.contains(k)).collect();
                asked.extend(later);
                cmdline.provide(execs.known);
                cmdline.request(&asked);
                cmdline.put_off(execs.young_forks.len());
                self.young_forks = execs.young_forks;
            }
            cmdline.with_results(|lookup| {
                for p in processes.iter_mut() {
                    (p.cmdline, p.stall) = lookup(p.pid, p.start_ticks);
                }
            });
        }
        if let Some(pss) = self.pss.as_ref() {
            let in_scope = self.config.pss_root.map(|root| descendants(processes, root));
            let candidates = processes
                .iter()
                .filter(|p| in_scope.as_ref().is_none_or(|s| s.binary_search(&p.pid).is_ok()))
                // Kernel threads have no user memory to walk.
                .filter(|p| p.resident_bytes.is_some_and(|r| r > 0))
                .map(|p| Candidate {
                    pid: p.pid,
                    start_ticks: p.start_ticks,
                    ppid: p.ppid,
                    name: crate::pss::family_name(&p.comm),
                    resident_bytes: p.resident_bytes.unwrap_or(0),
                    faults: p.minflt + p.majflt,
                })
                .collect();
            pss.set_candidates(candidates);
            pss.with_readings(|lookup| {
                for p in processes.iter_mut() {
                    let (stall, estimate);
                    (p.pss, p.pss_stale, stall, estimate) = lookup(p.pid, p.start_ticks);
                    p.pss_estimate = estimate;
                    p.stall = Stall::merge(p.stall, stall);
                }
            });
        }
    }
}

/// Whether this process is in the initial user namespace: its `uid_map` maps every id to itself.
fn initial_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|map| map.split_whitespace().eq(["0", "0", "4294967295"].iter().copied()))
}

/// Whether `root`'s `/proc` numbers processes as proctor's own does: its `self` is this
/// process's pid.
pub fn host_proc_is_ours(root: &proctor_procfs::Root) -> bool {
    root.self_pid() == Some(std::process::id())
}

/// The PSS worker's limits on each target, from the config.
fn limits(config: &SamplerConfig) -> crate::pss::TargetLimits {
    crate::pss::TargetLimits {
        max_age: config.pss_max_age,
        share: config.target_budget,
        max_hold: config.target_max_hold,
        trace_waits: config.trace_lock_waits,
        own_by_age: config.pss_own_by_age,
        slice: config.pss_slice,
    }
}

/// Sorted pids of `root` and all its descendants.
pub(crate) fn descendants(processes: &[ProcessSample], root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in processes {
        if p.pid != p.ppid {
            children.entry(p.ppid).or_default().push(p.pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if out.len() > processes.len() {
            break;
        }
        out.push(pid);
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
