//! Fake trees: a root directory holding just the files a layout has, so each test states its
//! whole world. Host-wide files are kept minimal; what is absent must read as `None`.

use std::fs;
use std::path::Path;

use proctor_model::{container_truth, ContainerTruth};
use proctor_procfs::Root;
use proctor_sampler::{Sampler, SamplerConfig};

const GIB: u64 = 1 << 30;

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    /// A host with `online` CPUs (as a cpu list) and 16 GiB of memory.
    fn new(online: &str) -> Self {
        let tree = Self { dir: tempfile::tempdir().expect("tempdir") };
        tree.file("/sys/devices/system/cpu/online", &format!("{online}\n"));
        tree.file("/proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:    8388608 kB\n");
        tree.file("/proc/stat", "cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\nbtime 1700000000\n");
        tree
    }

    fn file(&self, path: &str, contents: &str) -> &Self {
        let full = self.dir.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(full.parent().expect("has parent")).expect("mkdir");
        fs::write(full, contents).expect("write");
        self
    }

    fn mounts(&self, lines: &[&str]) -> &Self {
        let text: String = lines.iter().enumerate().map(|(i, l)| format!("{} 1 0:{i} {l}\n", 30 + i)).collect();
        self.file("/proc/self/mountinfo", &text)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn truth(&self) -> ContainerTruth {
        let config = SamplerConfig { root: Root::new(self.root()), processes: false, ..SamplerConfig::default() };
        let mut sampler = Sampler::new(config);
        container_truth(&sampler.sample())
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn v2_nested_quotas_take_the_tightest_level() {
    let t = Tree::new("0-7");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/jobs/notebook\n")
        .file("/sys/fs/cgroup/jobs/cpu.max", "400000 100000\n")
        .file("/sys/fs/cgroup/jobs/notebook/cpu.max", "150000 100000\n")
        .file("/sys/fs/cgroup/jobs/memory.max", "4294967296\n")
        .file("/sys/fs/cgroup/jobs/notebook/memory.max", "max\n")
        .file("/sys/fs/cgroup/jobs/notebook/memory.current", "1048576\n");
    let truth = t.truth();
    assert_eq!(truth.cgroup_version, Some("v2"));
    assert!(close(truth.quota_cpus, 1.5), "{truth:?}");
    assert_eq!(truth.quota_path.as_deref(), Some("/jobs/notebook"));
    assert!(close(truth.effective_cpus, 1.5));
    assert_eq!(truth.effective_cpus_ceil, Some(2));
    assert_eq!(truth.host_online_cpus, Some(8));
    assert_eq!(truth.memory_limit_bytes, Some(4 * GIB), "the ancestor's limit applies");
    assert_eq!(truth.memory_limit_source.as_deref(), Some("cgroup:/jobs"));
    assert_eq!(truth.memory_current_bytes, Some(1 << 20));
    assert_eq!(truth.warnings.len(), 1, "2 usable CPUs vs 8 online is the 96-vs-64 case");
}

#[test]
fn v2_ancestor_quota_tighter_than_own() {
    let t = Tree::new("0-95");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/kubepods/pod1/c1\n")
        .file("/sys/fs/cgroup/kubepods/cpu.max", "6400000 100000\n")
        .file("/sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n")
        .file("/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
    let truth = t.truth();
    assert!(close(truth.effective_cpus, 64.0), "{truth:?}");
    assert_eq!(truth.host_online_cpus, Some(96));
    assert!(truth.warnings[0].contains("96"), "{:?}", truth.warnings);
}

#[test]
fn v1_quota_and_memory_limit() {
    let t = Tree::new("0-3");
    t.mounts(&[
        "/ /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct",
        "/ /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
    ])
    .file("/proc/self/cgroup", "3:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n")
    .file("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    .file("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    .file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n")
    .file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    .file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage", "5000000\n")
    .file("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    .file("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n")
    .file("/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "1000\n")
    .file(
        "/sys/fs/cgroup/memory/docker/abc/memory.stat",
        "cache 1\nrss 2\ntotal_cache 10\ntotal_rss 20\ntotal_shmem 3\n",
    );
    let truth = t.truth();
    assert_eq!(truth.cgroup_version, Some("v1"));
    assert!(close(truth.effective_cpus, 0.5), "{truth:?}");
    assert_eq!(truth.effective_cpus_ceil, Some(1));
    assert_eq!(truth.memory_limit_bytes, Some(512 << 20));
    assert_eq!(truth.memory_limit_source.as_deref(), Some("cgroup:/docker/abc"));
    assert_eq!(truth.memory_current_bytes, Some(1000));
}

#[test]
fn v1_unlimited_memory_falls_back_to_host() {
    let t = Tree::new("0-3");
    t.mounts(&["/ /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory"])
        .file("/proc/self/cgroup", "3:memory:/\n")
        .file("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    let truth = t.truth();
    assert_eq!(truth.memory_limit_bytes, Some(16 * GIB));
    assert_eq!(truth.memory_limit_source.as_deref(), Some("host"));
    assert!(close(truth.effective_cpus, 4.0));
    assert!(truth.warnings.is_empty());
}

#[test]
fn hybrid_uses_v1_controllers_and_v2_pressure() {
    let t = Tree::new("0-1");
    t.mounts(&[
        "/ /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
        "/ /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu",
        "/ /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw",
    ])
    .file("/proc/self/cgroup", "4:memory:/job\n1:cpu:/\n0::/user.slice\n")
    .file("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1073741824\n")
    .file("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", "4096\n")
    .file("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    .file("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    .file("/sys/fs/cgroup/unified/user.slice/cpu.pressure", "some avg10=2.50 avg60=0.00 avg300=0.00 total=10\n");
    let config = SamplerConfig { root: Root::new(t.root()), processes: false, ..SamplerConfig::default() };
    let sample = Sampler::new(config).sample();
    let truth = container_truth(&sample);
    assert_eq!(truth.cgroup_version, Some("hybrid"));
    assert_eq!(truth.cgroup_path.as_deref(), Some("/job"));
    assert_eq!(truth.memory_limit_bytes, Some(GIB));
    assert!(close(truth.effective_cpus, 2.0));
    let counters = &sample.container.as_ref().expect("container").counters;
    assert_eq!(counters.memory_current_bytes, Some(4096));
    assert_eq!(counters.cpu_pressure.and_then(|p| p.some).map(|l| l.avg10), Some(2.5));
}

#[test]
fn cpuset_only_limits_cpus() {
    let t = Tree::new("0-7");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/pinned\n")
        .file("/sys/fs/cgroup/pinned/cpuset.cpus.effective", "2-4,6\n")
        .file("/sys/fs/cgroup/pinned/cpu.max", "max 100000\n");
    let truth = t.truth();
    assert_eq!(truth.cpuset_cpus, Some(4));
    assert!(close(truth.effective_cpus, 4.0), "{truth:?}");
    assert_eq!(truth.quota_cpus, None);
}

#[test]
fn unlimited_v2_is_the_host() {
    let t = Tree::new("0-3");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/free\n")
        .file("/sys/fs/cgroup/free/cpu.max", "max 100000\n")
        .file("/sys/fs/cgroup/free/memory.max", "max\n");
    let truth = t.truth();
    assert!(close(truth.effective_cpus, 4.0));
    assert_eq!(truth.memory_limit_source.as_deref(), Some("host"));
    assert!(truth.warnings.is_empty());
}

#[test]
fn namespaced_mount_root_reads_the_container_itself() {
    // Docker without a cgroup namespace mounts the container's own cgroup at /sys/fs/cgroup.
    let t = Tree::new("0-3");
    t.mounts(&["/docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/docker/abc\n")
        .file("/sys/fs/cgroup/cpu.max", "100000 100000\n");
    let truth = t.truth();
    assert!(close(truth.effective_cpus, 1.0), "{truth:?}");
}

#[test]
fn garbage_cgroup_files_are_counted_not_fatal() {
    let t = Tree::new("0-3");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
        .file("/proc/self/cgroup", "0::/bad\n")
        .file("/sys/fs/cgroup/bad/cpu.max", "\u{1}\u{2}garbage\n")
        .file("/sys/fs/cgroup/bad/memory.max", "lots\n");
    let config = SamplerConfig { root: Root::new(t.root()), processes: false, ..SamplerConfig::default() };
    let sample = Sampler::new(config).sample();
    let limits = &sample.container.as_ref().expect("container").limits;
    assert_eq!(limits.errors.len(), 2, "{:?}", limits.errors);
    assert!(limits.errors.iter().all(|e| e.starts_with("cannot parse")));
    let truth = container_truth(&sample);
    assert!(close(truth.effective_cpus, 4.0), "unparsable quota is no quota");
}

/// A fake process: stat, statm and status as the kernel writes them.
fn process(t: &Tree, pid: u32, ppid: u32, comm: &str, rss_pages: u64) {
    t.file(
        &format!("/proc/{pid}/stat"),
        &format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 10 0 0 0 30 20 0 0 20 0 2 0 {} 1000000 {rss_pages} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n", 1000 + pid),
    );
    t.file(&format!("/proc/{pid}/statm"), &format!("300 {rss_pages} 10 1 0 50 0\n"));
    t.file(
        &format!("/proc/{pid}/status"),
        &format!("Name:\t{comm}\nUid:\t1000\t1000\t1000\t1000\nRssAnon:\t{} kB\nRssFile:\t40 kB\nRssShmem:\t0 kB\nVmSwap:\t0 kB\n", (rss_pages - 10) * 4),
    );
    t.file(&format!("/proc/{pid}/cgroup"), "0::/\n");
}

/// A process gone between its `stat` and its `status` (reaped as the scan reached it) is no
/// row, and not a new process either: the sample's exits have it (with the events), so counting
/// it new too would count one start twice.
#[test]
fn a_process_gone_before_its_status_is_not_counted_new() {
    let t = Tree::new("0");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"]).file("/proc/self/cgroup", "0::/\n");
    let stat = |forks: u32| {
        format!("cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\nbtime 1700000000\nprocesses {forks}\n")
    };
    t.file("/proc/stat", &stat(500));
    process(&t, 100, 1, "parent", 110);
    let config =
        SamplerConfig { root: Root::new(t.root()), cmdline: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    sampler.sample();
    // Two starts: 101 is there, 102 has its stat but its status is gone.
    process(&t, 101, 100, "kept", 20);
    process(&t, 102, 100, "reaped", 20);
    std::fs::remove_file(t.root().join("proc/102/status")).expect("remove");
    t.file("/proc/stat", &stat(502));
    let sample = sampler.sample();
    let pids: Vec<u32> = sample.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![100, 101]);
    assert_eq!(sample.cost.processes_gone, 1);
    let starts = sample.cost.starts.expect("coverage from the second sample on");
    assert_eq!((starts.forks, starts.processes_new), (2, 1), "{starts:?}");
}

#[test]
fn process_table_on_a_fake_proc_with_garbage_and_a_vanished_pid() {
    let t = Tree::new("0");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"]).file("/proc/self/cgroup", "0::/\n");
    process(&t, 100, 1, "parent", 110);
    process(&t, 101, 100, "child one", 20);
    process(&t, 102, 100, "child)(two", 30);
    t.file("/proc/103/stat", "\u{0}\u{1}\u{2} not a stat file");
    t.file("/proc/104/statm", "1 2 3 4 0 6 0\n"); // listed, but its stat is gone
    t.file("/proc/105/stat", "105 (cut) S 1 105 105 0 -1 4194560 10 0 0 0 30 20 0 0 20 0 2 0 99 1000 1"); // truncated
    let config =
        SamplerConfig { root: Root::new(t.root()), cmdline: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    let sample = sampler.sample();
    let pids: Vec<u32> = sample.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![100, 101, 102]);
    let child = sample.process(102).expect("read");
    assert_eq!(&*child.comm, "child)(two");
    assert_eq!(child.resident_bytes, Some(30 * sample.page_size));
    let status = child.status.expect("status read on first sight");
    assert_eq!(status.rss_anon_bytes, Some(20 * 4 * 1024));
    assert_eq!(status.effective_uid, Some(1000));
    assert_eq!(sample.cost.errors.get(&("process.stat", "parse")), Some(&2), "{:?}", sample.cost.errors);
    assert_eq!(sample.cost.processes_gone, 1);
    // A steady process costs stat + statm only on the next cycle.
    let before = sampler.sample();
    let files_per_pid = before.cost.files_read as f64;
    assert!(files_per_pid > 0.0);
    let statuses_reread =
        before.processes.iter().filter(|p| p.status.is_some_and(|s| s.read_mono_ns == before.mono_ns)).count();
    assert_eq!(statuses_reread, 0, "status is re-read only when the footprint moves");
    let stat = std::fs::read_to_string(t.root().join("proc/101/stat")).expect("read");
    t.file("/proc/101/stat", &stat.replacen(" 10 0 0 0 30 20", " 11 0 0 0 30 20", 1)); // one more minor fault
    let after = sampler.sample();
    let reread: Vec<u32> = after
        .processes
        .iter()
        .filter(|p| p.status.is_some_and(|s| s.read_mono_ns == after.mono_ns))
        .map(|p| p.pid)
        .collect();
    assert_eq!(reread, vec![101]);
}

/// The resident size is `status`'s VmRSS (the exact sum since Linux 6.16) where `status` has
/// one, carried over while the footprint in `stat` stays put, and `stat`'s rss (a per-CPU
/// estimate since 6.2) where it has none.
#[test]
fn resident_size_is_statuss_vmrss_where_status_has_one() {
    let t = Tree::new("0");
    process(&t, 100, 1, "user", 110);
    process(&t, 101, 1, "no vmrss", 12);
    let vm_rss = |kib: u64| {
        format!(
            "Name:\tuser\nUid:\t0\t0\t0\t0\nVmRSS:\t{kib} kB\nRssAnon:\t{kib} kB\nRssFile:\t0 kB\nRssShmem:\t0 kB\n"
        )
    };
    t.file("/proc/100/status", &vm_rss(500));
    let config = SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: 0.0,
        container: false,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config);
    let first = sampler.sample();
    let resident = |s: &proctor_model::Sample, pid| s.process(pid).and_then(|p| p.resident_bytes);
    assert_eq!(resident(&first, 100), Some(500 * 1024), "VmRSS, not stat's 110 pages");
    assert_eq!(resident(&first, 101), Some(12 * first.page_size), "no VmRSS: stat's rss");
    // status is not read again while stat's footprint stays put: the figure is carried over.
    t.file("/proc/100/status", &vm_rss(520));
    assert_eq!(resident(&sampler.sample(), 100), Some(500 * 1024));
    let stat = fs::read_to_string(t.root().join("proc/100/stat")).expect("read");
    t.file("/proc/100/stat", &stat.replacen(" 10 0 0 0 30 20", " 11 0 0 0 30 20", 1)); // one more minor fault
    assert_eq!(resident(&sampler.sample(), 100), Some(520 * 1024), "read again once a fault moved the key");
}

/// The scanner reuses the parse of a `stat` line that did not change; a one-byte change
/// anywhere, of the same length, must still be seen, and garbage is counted on every cycle.
#[test]
fn unchanged_stat_lines_reuse_their_parse_and_any_changed_byte_is_seen() {
    let t = Tree::new("0");
    process(&t, 100, 1, "steady", 110);
    let config = SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: 0.0,
        container: false,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config);
    let first = sampler.sample();
    let second = sampler.sample();
    assert_eq!(
        format!("{:?}", first.processes),
        format!("{:?}", second.processes),
        "a byte-identical line reads the same"
    );
    let stat = std::fs::read_to_string(t.root().join("proc/100/stat")).expect("read");
    // rss is field 24, far into the line; same length, one byte differs.
    let rss_moved = stat.replacen(" 1000000 110 ", " 1000000 111 ", 1);
    assert_eq!(rss_moved.len(), stat.len());
    t.file("/proc/100/stat", &rss_moved);
    let p = sampler.sample().process(100).cloned().expect("read");
    assert_eq!(p.resident_bytes, Some(111 * first.page_size));
    t.file("/proc/100/stat", &rss_moved.replacen(" 30 20 ", " 31 20 ", 1).replacen("(steady)", "(stEady)", 1));
    let p = sampler.sample().process(100).cloned().expect("read");
    assert_eq!((p.utime_ticks, &*p.comm), (31, "stEady"));
    t.file("/proc/100/stat", &rss_moved.replacen(" 30 20 ", " 3x 20 ", 1));
    for _ in 0..2 {
        let s = sampler.sample();
        assert!(s.process(100).is_none());
        assert_eq!(s.cost.errors.get(&("process.stat", "parse")), Some(&1), "counted on every cycle");
    }
    t.file("/proc/100/stat", &stat);
    assert_eq!(sampler.sample().process(100).map(|p| p.resident_bytes), Some(Some(110 * first.page_size)));
}

#[test]
fn rows_and_tree_from_fake_samples() {
    let t = Tree::new("0");
    process(&t, 100, 1, "parent", 110);
    process(&t, 101, 100, "child", 20);
    let config =
        SamplerConfig { root: Root::new(t.root()), cmdline: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    let first = sampler.sample();
    // 100 more ticks of CPU for the child between the samples.
    t.file(
        "/proc/101/stat",
        &std::fs::read_to_string(t.root().join("proc/101/stat")).expect("read").replacen(" 30 20 ", " 130 20 ", 1),
    );
    let second = sampler.sample();
    let rows =
        proctor_model::process_rows(&second, Some(&first), proctor_model::RowContext { effective_cpus: Some(2.0) });
    let child = rows.iter().find(|r| r.pid == 101).expect("child row");
    let secs = (second.mono_ns - first.mono_ns) as f64 / 1e9;
    let expected = 100.0 / second.clock_ticks_per_sec as f64 / secs * 100.0;
    assert!((child.cpu_percent.expect("rate") - expected).abs() < 1e-6 * expected.max(1.0));
    assert!((child.cpu_percent_of_effective.expect("rate") - expected / 2.0).abs() < 1e-6 * expected.max(1.0));
    let tree = proctor_model::build_tree(&rows, 100).expect("tree");
    assert_eq!(tree.total.processes, 2);
    assert_eq!(tree.total.rss_bytes, 130 * second.page_size);
}

/// The table keeps at most its budget of files open, and every process is still read, changes
/// included: past the budget a file is read with open/read/close. (A process table larger than
/// the open-file limit once left `serve` no fd for its HTTP runtime.)
#[test]
fn kept_files_stay_within_the_budget_and_every_process_is_still_read() {
    let t = Tree::new("0");
    t.mounts(&["/ /sys/fs/cgroup rw - cgroup2 cgroup2 rw"]).file("/proc/self/cgroup", "0::/\n");
    for pid in 200..220 {
        process(&t, pid, 1, &format!("p{pid}"), 20 + u64::from(pid));
    }
    let config = SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: 0.0,
        fd_budget: Some(7),
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config);
    for round in 0..3 {
        let sample = sampler.sample();
        assert_eq!(sample.processes.len(), 20, "round {round}");
        assert!(sample.cost.fds_kept <= 7, "round {round}: {} kept", sample.cost.fds_kept);
        assert!(sample.cost.fds_kept > 0, "round {round}: the budget is used");
        let last = sample.process(219).expect("the last process, past the budget");
        assert_eq!(last.resident_bytes, Some(239 * sample.page_size), "round {round}");
    }
    // A change in a process read past the budget is seen.
    let stat = std::fs::read_to_string(t.root().join("proc/219/stat")).expect("read");
    t.file("/proc/219/stat", &stat.replacen(" 10 0 0 0 30 20", " 10 0 0 0 90 20", 1));
    let sample = sampler.sample();
    assert_eq!(sample.process(219).map(|p| p.utime_ticks), Some(90));
    assert_eq!(proctor_sampler::kept_fd_budget(1024), 768);
    assert_eq!(proctor_sampler::kept_fd_budget(300), 44);
    assert_eq!(proctor_sampler::kept_fd_budget(1 << 20), 3 << 18);
}

/// A sampler of `t` (no cmdline reads, no container) with the PSS worker at `budget`, and pid
/// 100's `smaps_rollup` saying 300 kB.
fn pss_reader(t: &Tree, budget: f64) -> Sampler {
    t.file("/proc/100/smaps_rollup", "Rss:                 440 kB\nPss:                 300 kB\n");
    Sampler::new(SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: budget,
        container: false,
        ..SamplerConfig::default()
    })
}

/// The PSS `pid` is given, once the worker (off this thread) has read it: sampled one cycle at
/// a time, for at most ~5 s.
fn pss_read(sampler: &mut Sampler, pid: u32) -> Option<u64> {
    for _ in 0..500 {
        let pss = sampler.sample().process(pid).and_then(|p| p.pss).and_then(|r| r.rollup.pss_bytes);
        if pss.is_some() {
            return pss;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// `proctor top` turns the PSS worker and `/proc/PID/io` on (and off) in a running sampler when
/// a column needs them: read from the next cycle on, nothing read before or after.
#[test]
fn reads_turned_on_in_a_running_sampler_are_read_from_the_next_cycle() {
    use proctor_sampler::Reads;
    let t = Tree::new("0");
    process(&t, 100, 1, "reader", 110);
    t.file("/proc/100/io", "rchar: 10\nwchar: 20\nread_bytes: 4096\nwrite_bytes: 8192\n");
    let mut sampler = pss_reader(&t, 0.0);
    let first = sampler.sample();
    let reader = first.process(100).expect("read");
    assert!(reader.io.is_none() && reader.pss.is_none(), "neither is read until asked for");
    assert!(sampler.pss_stats().is_none(), "no PSS worker runs");

    let on = Reads { pss_budget: 0.5, process_io: true, threads: false };
    sampler.set_reads(on);
    assert_eq!(sampler.reads(), on);
    let next = sampler.sample();
    assert_eq!(next.process(100).and_then(|p| p.io.as_deref()).and_then(|io| io.read_bytes), Some(4096));
    assert_eq!(pss_read(&mut sampler, 100), Some(300 * 1024));

    sampler.set_reads(Reads { pss_budget: 0.0, process_io: false, threads: false });
    let off = sampler.sample();
    let reader = off.process(100).expect("read");
    assert!(reader.io.is_none() && reader.pss.is_none(), "both stopped");
    assert!(sampler.pss_stats().is_none(), "the PSS worker is gone");
}

/// The PSS worker leaves a live process that had lived less than a second for the next list; a
/// captured tree's start times are not on this machine's boot clock, so its processes are read
/// whatever they say (here: started ~300 years after this machine booted).
#[test]
fn a_captured_trees_processes_are_never_too_young_to_read() {
    let t = Tree::new("0");
    process(&t, 100, 1, "reader", 110);
    let stat = std::fs::read_to_string(t.root().join("proc/100/stat")).expect("read");
    t.file("/proc/100/stat", &stat.replacen(" 0 1100 1000000 ", " 0 999999999999 1000000 ", 1));
    let mut sampler = pss_reader(&t, 0.5);
    assert_eq!(sampler.sample().process(100).map(|p| p.start_ticks), Some(999_999_999_999));
    assert_eq!(pss_read(&mut sampler, 100), Some(300 * 1024));
    assert_eq!(sampler.pss_stats().map(|s| s.skipped_young), Some(0));
}

/// `proctor top`'s `H`: a process's threads (its `task` directory) are read only while asked,
/// each with its own name, state and CPU, and what they cost is in the cycle's file counts.
#[test]
fn threads_are_read_only_while_asked() {
    use proctor_sampler::Reads;
    let t = Tree::new("0");
    // `process` writes a stat with num_threads 2; the main thread and two workers are listed.
    process(&t, 100, 1, "server", 110);
    process(&t, 200, 1, "single", 110);
    t.file("/proc/200/stat", "200 (single) S 1 200 200 0 -1 4194560 10 0 0 0 30 20 0 0 20 0 1 0 1200 1000000 110 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
    for (tid, comm, state, utime) in [(100, "server", 'S', 30), (101, "worker-a", 'R', 7), (102, "worker b", 'S', 3)] {
        t.file(
            &format!("/proc/100/task/{tid}/stat"),
            &format!("{tid} ({comm}) {state} 1 100 100 0 -1 4194560 10 0 0 0 {utime} 2 0 0 20 0 2 0 {} 1000000 110 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n", 1100 + tid),
        );
    }
    t.file("/proc/200/task/200/stat", "unread");
    let config = SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: 0.0,
        container: false,
        process_cgroups: false,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config);
    sampler.sample();
    let steady = sampler.sample();
    assert!(steady.processes.iter().all(|p| p.tasks.is_empty()), "no thread is read until asked");

    sampler.set_reads(Reads { threads: true, ..sampler.reads() });
    let on = sampler.sample();
    let server = on.process(100).expect("read");
    let names: Vec<(u32, &str, char, u64)> =
        server.tasks.iter().map(|t| (t.tid, &*t.comm, t.state, t.utime_ticks)).collect();
    assert_eq!(
        names,
        vec![(101, "worker-a", 'R', 7), (102, "worker b", 'S', 3)],
        "the main thread is the process's row"
    );
    assert!(on.process(200).expect("read").tasks.is_empty(), "a single-threaded process's task dir is not read");
    assert_eq!(on.cost.files_read, steady.cost.files_read + 3, "the listing and two stat files, counted");
    assert!(on.cost.errors.is_empty(), "{:?}", on.cost.errors);

    sampler.set_reads(Reads { threads: false, ..sampler.reads() });
    let off = sampler.sample();
    assert!(off.processes.iter().all(|p| p.tasks.is_empty()), "stopped");
    assert_eq!(off.cost.files_read, steady.cost.files_read);
}

/// A big target whose `smaps_rollup` would hold its lock past the cap, on a host with more
/// runnable tasks than CPUs and no walk of its pages to be had (a captured tree has no
/// `pagemap`): its read is put off, its row says so, and the worker counts it; once the host has
/// a CPU free it is read (and, past a cap of 1 ns, capped).
#[test]
fn a_big_read_likely_past_the_cap_waits_while_the_host_is_busy() {
    let t = Tree::new("0-1");
    // 78 MiB resident each: past the size from which a hold is predicted.
    process(&t, 100, 1, "worker", 20_000);
    process(&t, 101, 1, "worker", 20_000);
    t.file("/proc/101/smaps_rollup", "Rss:               80000 kB\nPss:               40000 kB\n");
    t.file("/proc/loadavg", "3.10 2.00 1.00 3/100 4242\n");
    let mut sampler = Sampler::new(SamplerConfig {
        root: Root::new(t.root()),
        cmdline: false,
        pss_budget: 1.0,
        container: false,
        target_max_hold: std::time::Duration::from_nanos(1),
        ..SamplerConfig::default()
    });
    t.file("/proc/100/smaps_rollup", "Rss:               80000 kB\nPss:               40000 kB\n");
    // The first read has no rate to go by: read whole, and capped. The other is then put off.
    let mut waiting = None;
    for _ in 0..500 {
        let sample = sampler.sample();
        let capped = sample.processes.iter().filter(|p| p.stall.is_some_and(|s| s.capped)).count();
        waiting = sample.processes.iter().find(|p| p.stall.is_some_and(|s| s.put_off)).cloned();
        if capped == 1 && waiting.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let waiting = waiting.expect("one of the two put off within ~5 s");
    assert!(waiting.pss.is_none(), "{waiting:?}");
    assert_eq!(waiting.stall.map(|s| s.reads), Some(0), "{:?}", waiting.stall);
    let stats = sampler.pss_stats().expect("worker running");
    assert!(stats.put_off_busy >= 1 && stats.reads == 1 && stats.capped_targets == 1, "{stats:?}");
    // Two runnable tasks on two CPUs: read, and past the cap on one read.
    t.file("/proc/loadavg", "3.10 2.00 1.00 2/100 4242\n");
    let mut read = None;
    for _ in 0..500 {
        read = sampler.sample().process(waiting.pid).filter(|p| p.pss.is_some()).cloned();
        if read.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let stall = read.expect("read within ~5 s of the host's CPU freeing").stall.expect("ledger");
    assert!(stall.reads == 1 && stall.capped && !stall.put_off, "{stall:?}");
}
