//! The task iterator against `/proc` on the same processes (issue 35): a `/proc` read before the
//! scan and one after; what cannot change while a process lives is equal, counters lie between
//! the two reads, and what may move either way is checked where it did not move. Runs where the
//! kernel lets this process load BPF (root here); elsewhere a SKIP line says why.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};

use proctor_bpf::{PidStat, TaskIter, Way};
use proctor_procfs::cgroup::{parse_mountinfo, CgroupMount};
use proctor_procfs::process::{parse_cgroup, parse_stat, parse_status};

/// Every process's `stat`, with its open fds where `stat` of its `/proc/PID/fd` gives them
/// (`open_fds`, as the scan's are; Linux 6.2+ counts them there) and its effective uid from its
/// `status`.
fn proc_stats() -> HashMap<u32, PidStat> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Some(mut stat) = std::fs::read(format!("/proc/{pid}/stat")).ok().and_then(|b| parse_stat(&b)) {
            stat.open_fds =
                std::fs::symlink_metadata(format!("/proc/{pid}/fd")).ok().and_then(|m| u32::try_from(m.len()).ok());
            stat.effective_uid = std::fs::read(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|b| parse_status(&b))
                .and_then(|s| s.effective_uid);
            out.insert(pid, stat);
        }
    }
    out
}

fn open() -> Option<TaskIter> {
    open_with(Way::Best)
}

fn open_with(way: Way) -> Option<TaskIter> {
    match TaskIter::open_with(way) {
        Ok(iter) => Some(iter),
        Err(why) => {
            eprintln!("SKIP: the BPF task iterator: {why}");
            None
        }
    }
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (bounded) until `pid`'s comm is `want`.
fn wait_for_comm(pid: u32, want: &[u8]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default().strip_suffix(b"\n") != Some(want) {
        assert!(std::time::Instant::now() < deadline, "pid {pid} never renamed itself");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_open_coded_scan_agrees_with_proc_field_by_field() {
    let Some(iter) = open() else { return };
    if !iter.open_coded() {
        eprintln!("SKIP: the open-coded task scan: {}", iter.how());
        return;
    }
    agrees_with_proc(iter);
}

#[test]
fn the_iterators_file_agrees_with_proc_field_by_field() {
    let Some(iter) = open_with(Way::File) else { return };
    assert!(!iter.open_coded(), "{}", iter.how());
    agrees_with_proc(iter);
}

fn agrees_with_proc(mut iter: TaskIter) {
    // A process of ours with a hostile name (escape, parentheses, a space) and three threads
    // that work while the reads happen, so that counters move between them.
    // The shell waits in its own `read` (no child of its own to outlive it) until killed.
    let hostile = Kill(
        Command::new("sh")
            .args(["-c", "printf '\\033[31m) x (' > /proc/$$/comm; read line"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh"),
    );
    let hostile_pid = hostile.0.id();
    wait_for_comm(hostile_pid, b"\x1b[31m) x (");
    // Open fds: a shell holding 0-2 and five more (the scan counts its table), and one whose
    // fd 1500 grew its table past the 256 the scan counts (left to `statx`: `None`).
    let five = Kill(
        Command::new("bash")
            .args([
                "-c",
                "exec 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null; printf x > /proc/$$/comm; read line",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash"),
    );
    let big = Kill(
        Command::new("bash")
            .args(["-c", "ulimit -n 2048 && exec 1500</dev/null && printf y > /proc/$$/comm; read line"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash"),
    );
    // A process whose effective user is not its real one: the scan gives the effective.
    let other_user = Kill(
        Command::new("setpriv").args(["--euid=65534", "sleep", "300"]).stdin(Stdio::null()).spawn().expect("setpriv"),
    );
    wait_for_comm(five.0.id(), b"x");
    wait_for_comm(big.0.id(), b"y");
    wait_for_comm(other_user.0.id(), b"sleep");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut pages = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    pages.push(vec![1u8; 64 << 10]);
                    if pages.len() > 64 {
                        pages.clear();
                    }
                }
            })
        })
        .collect();

    // Not asked for: no process's fds counted.
    let mut plain = Vec::new();
    iter.scan_by_pid(&mut plain).expect("scan");
    assert!(plain.iter().all(|p| p.open_fds.is_none()), "fds counted unasked");
    // As the agent scans with groups: the output left as the kernel gave it, read by pid
    // through an index; open fds counted where the open-coded scan runs.
    iter.count_fds(true);
    let counts = iter.open_coded();
    let before = proc_stats();
    let mut unplaced = Vec::new();
    let cost = iter.scan_by_pid(&mut unplaced).expect("scan");
    let after = proc_stats();
    let out: Vec<&PidStat> = iter.by_pid(&unplaced).iter().collect();
    assert!(out.windows(2).all(|w| w[0].pid < w[1].pid), "by pid, each once");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }

    assert!(cost.tasks >= cost.processes && cost.processes == out.len() as u64, "{cost:?}");
    // The kernel's part of the scan's CPU is some of it, not all: the reader summed after it.
    assert!(cost.kernel_cpu_ns > 0 && cost.kernel_cpu_ns < cost.cpu_ns, "{cost:?}");
    assert!(unplaced.len() >= out.len(), "by_pid leaves out only groups whose leader was not seen");
    // A record per process (longer for kernel threads, which carry their full names) and a short
    // one per other thread.
    let threads = cost.tasks - cost.processes;
    let least = cost.processes * proctor_bpf::PROCESS_BYTES as u64 + threads * proctor_bpf::THREAD_BYTES as u64;
    let most = cost.processes * proctor_bpf::RECORD_BYTES as u64 + threads * proctor_bpf::THREAD_BYTES as u64;
    if iter.open_coded() {
        // One program run, a slot per task.
        assert!(cost.reads == 1 && cost.bytes == cost.tasks * proctor_bpf::SLOT_BYTES as u64, "{cost:?}");
    } else {
        assert!(cost.reads >= 2 && (least..=most).contains(&cost.bytes), "{cost:?}");
    }
    let mut compared = 0;
    for &p in &out {
        let (Some(b), Some(a)) = (before.get(&p.pid), after.get(&p.pid)) else { continue };
        if b.start_ticks != a.start_ticks {
            continue; // the pid was reused between the reads
        }
        compared += 1;
        let either =
            |what: &str, ok: bool| assert!(ok, "pid {} {what}: iterator {p:?}\nbefore {b:?}\nafter {a:?}", p.pid);
        either("start time", p.start_ticks == b.start_ticks);
        either("comm", p.comm == b.comm || p.comm == a.comm);
        either("ppid", p.ppid == b.ppid || p.ppid == a.ppid);
        either("pgrp", p.pgrp == b.pgrp || p.pgrp == a.pgrp);
        either("session", p.session == b.session || p.session == a.session);
        either("nice", p.nice == b.nice || p.nice == a.nice);
        either("priority", p.priority == b.priority || p.priority == a.priority);
        either("state letter", "RSDTtXZPI".contains(p.state));
        either("effective uid", p.effective_uid == b.effective_uid || p.effective_uid == a.effective_uid);
        for (what, get) in [
            ("minflt", (|s: &PidStat| s.minflt) as fn(&PidStat) -> u64),
            ("majflt", |s| s.majflt),
            ("cutime", |s| s.cutime_ticks),
            ("cstime", |s| s.cstime_ticks),
            ("cminflt", |s| s.cminflt),
            ("cmajflt", |s| s.cmajflt),
        ] {
            either(what, get(b) <= get(p) && get(p) <= get(a));
        }
        // User and system time: their sum is the runtime in ticks (each of /proc's two numbers
        // rounded down apart: one tick either way). The split alone may differ from /proc's,
        // which never lets either part go back from what it printed before.
        let total = |s: &PidStat| s.utime_ticks + s.stime_ticks;
        either("utime + stime", total(b) <= total(p) + 1 && total(p) <= total(a) + 1);
        // Not moved between the two reads, in a process that did nothing between them (no CPU
        // time, no fault): the scan's figure is that one. A busy process can grow and come back
        // between the reads: this one, whose workers (and the other test's, running beside this
        // one) allocate and free (a failed run: vsize 353,046,528 before and after, 353,083,392
        // in the scan), or the loaded suite's rustc, running beside (632,274,944 before and
        // after, 632,262,656 in the scan, with 493 faults and 2 ticks between the reads).
        let quiet = total(b) == total(a) && b.minflt == a.minflt && b.majflt == a.majflt;
        for (what, get) in [
            ("threads", (|s: &PidStat| s.num_threads) as fn(&PidStat) -> u64),
            ("vsize", |s| s.vsize_bytes),
            ("rss", |s| s.rss_pages),
        ] {
            if p.pid != std::process::id() && quiet && get(b) == get(a) {
                either(what, get(p) == get(b));
            }
        }
        // Counted by the scan where the table is small enough, and then what /proc says (not
        // for this process, whose /proc reads hold a directory open).
        if p.pid != std::process::id() && p.open_fds.is_some() && b.open_fds == a.open_fds && b.open_fds.is_some() {
            either("open fds", p.open_fds == b.open_fds);
        }
    }
    let fds = |pid: u32| out.iter().find(|p| p.pid == pid).map(|p| p.open_fds);
    let counted = out.iter().filter(|p| p.open_fds.is_some()).count();
    if counts {
        // What the shell holds besides 0-7 is bash's own (a saved fd or two): the listing says.
        let listed = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").count() as u32;
        let five_fds = listed(five.0.id());
        assert!(five_fds >= 8, "{five_fds}");
        assert_eq!(fds(five.0.id()), Some(Some(five_fds)), "the scan counts what /proc/PID/fd lists");
        assert_eq!(fds(big.0.id()), Some(None), "a table of 2,048 is left to statx");
        assert!(counted * 2 > out.len(), "the scan counted the fds of only {counted} of {} processes", out.len());
    } else {
        assert_eq!(counted, 0, "the iterator's file counts no fds");
    }
    assert!(compared >= 10, "only {compared} processes were in both /proc reads and the scan");
    let other = out.iter().find(|p| p.pid == other_user.0.id()).expect("the setpriv'd child is in the scan");
    assert_eq!(other.effective_uid, Some(65534), "{other:?}");
    let hostile = out.iter().find(|p| p.pid == hostile_pid).expect("the renamed child is in the scan");
    assert_eq!(hostile.comm, "\u{1b}[31m) x (");
    let me = out.iter().find(|p| p.pid == std::process::id()).expect("this process is in the scan");
    assert!(me.num_threads >= 2 && me.utime_ticks + me.stime_ticks > 0, "{me:?}");
}

#[test]
fn a_second_scan_sees_a_process_started_after_the_first() {
    let Some(mut iter) = open() else { return };
    let mut first = Vec::new();
    iter.scan(&mut first).expect("scan");
    let child = Kill(Command::new("sleep").arg("60").spawn().expect("sleep"));
    let pid = child.0.id();
    assert!(!first.iter().any(|p| p.pid == pid && p.comm == "sleep"));
    // The fork's exec may not have happened yet: wait (bounded) for the new name.
    wait_for_comm(pid, b"sleep");
    let mut second = Vec::new();
    iter.scan(&mut second).expect("scan");
    let p = second.iter().find(|p| p.pid == pid).expect("the new child is in the second scan");
    assert_eq!((p.comm.as_str(), p.ppid), ("sleep", std::process::id()));
}

/// Where a cgroup hierarchy is mounted: cgroup2's (`None` for `controller`), or the v1 one that
/// holds `controller`.
fn cgroup_mount(controller: Option<&str>) -> Option<CgroupMount> {
    let mounts = parse_mountinfo(&std::fs::read("/proc/self/mountinfo").ok()?);
    mounts.into_iter().find(|m| match controller {
        None => m.v2,
        Some(c) => m.controllers.iter().any(|have| have == c),
    })
}

/// A process's cgroup2 path and its v1 memory path (where a v1 memory hierarchy is mounted).
fn cgroup_paths(pid: u32) -> Option<(String, Option<String>)> {
    let memberships = parse_cgroup(&std::fs::read(format!("/proc/{pid}/cgroup")).ok()?)?;
    let v2 = memberships.iter().find(|m| m.is_v2())?.path.clone();
    let memory = memberships.iter().find(|m| m.controllers.iter().any(|c| c == "memory")).map(|m| m.path.clone());
    Some((v2, memory))
}

/// The inode of `path` (as /proc/PID/cgroup names it) under `mount`, whose view starts at its
/// mountinfo root.
fn inode(mount: &CgroupMount, path: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let below = path.strip_prefix(mount.root.trim_end_matches('/'))?;
    std::fs::metadata(mount.mount_point.join(below.trim_start_matches('/'))).ok().map(|m| m.ino())
}

#[test]
fn both_readers_name_each_process_cgroups_by_their_directories_inodes() {
    let Some(v2_mount) = cgroup_mount(None) else {
        eprintln!("SKIP: the scan's cgroup ids: no cgroup2 mount");
        return;
    };
    let memory_mount = cgroup_mount(Some("memory"));
    for way in [Way::Best, Way::File] {
        let Some(mut iter) = open_with(way) else { return };
        // A process moved between the reads is left out: its /proc/PID/cgroup is read before the
        // scan and after, and compared only where the two agree.
        let before: HashMap<u32, (String, Option<String>)> = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, cgroup_paths(pid)?)))
            .collect();
        let mut scan = Vec::new();
        iter.scan(&mut scan).expect("scan");
        let (mut checked, mut memory_checked) = (0, 0);
        for p in &scan {
            // A zombie's cgroup may have been removed (a cgroup whose tasks have all exited may
            // be) and another made under its name since: its id is the old directory's.
            if matches!(p.state, 'Z' | 'X') {
                continue;
            }
            let (Some(was), Some(now)) = (before.get(&p.pid), cgroup_paths(p.pid)) else { continue };
            if *was != now {
                continue;
            }
            let ids = p.cgroup_ids.unwrap_or_else(|| panic!("{}: pid {} has no cgroup ids", iter.how(), p.pid));
            let Some(want) = inode(&v2_mount, &now.0) else { continue };
            assert_eq!(ids[0], want, "{}: pid {}'s cgroup2 id against {}'s inode", iter.how(), p.pid, now.0);
            checked += 1;
            if let (Some(mount), Some(path)) = (&memory_mount, &now.1) {
                let Some(want) = inode(mount, path) else { continue };
                assert_eq!(ids[1], want, "{}: pid {}'s memory cgroup id against {}'s inode", iter.how(), p.pid, path);
                memory_checked += 1;
            }
        }
        assert!(checked >= 10, "{}: only {checked} processes compared", iter.how());
        if memory_mount.is_some() {
            assert!(memory_checked >= 10, "{}: only {memory_checked} memory cgroups compared", iter.how());
        }
        let me = scan.iter().find(|p| p.pid == std::process::id()).expect("this process is scanned");
        assert_ne!(me.cgroup_ids, None);
    }
}
