//! Every exec and exit (issue 35) against what the kernel tells a parent: processes this test
//! starts and waits for with `wait4` (their exit status, CPU time and peak resident size as
//! `getrusage` gives them), and a shell's 50 short-lived children, each of which must arrive
//! with its exec (name, path, arguments) and its exit. Runs where the kernel lets this process
//! load BPF (root here); elsewhere a SKIP line says why.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_bpf::{Event, ExecEvent, ExitEvent, Subscription};

fn open() -> Option<Subscription> {
    match Subscription::open() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("SKIP: BPF process events: {why}");
            None
        }
    }
}

/// Waits for a child with `wait4`: its status and resource use.
fn wait4(child: std::process::Child) -> (i32, libc::rusage) {
    let pid = child.id();
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 writes both outputs we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(got, pid as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    (status, usage)
}

/// Drains until `done` holds over everything drained so far, for at most 20 s.
fn drain_until(sub: &Subscription, all: &mut Vec<Arc<Event>>, done: impl Fn(&[Arc<Event>]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(sub.drain(all), 0, "events were dropped");
        if done(all) {
            return;
        }
        assert!(Instant::now() < deadline, "the events never came: {} drained", all.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exits_of(all: &[Arc<Event>], pid: u32) -> Vec<&ExitEvent> {
    all.iter()
        .filter_map(|e| match &**e {
            Event::Exit(x) if x.pid == pid => Some(x),
            _ => None,
        })
        .collect()
}

fn final_of(all: &[Arc<Event>], pid: u32) -> Option<&proctor_bpf::FinalEvent> {
    all.iter().find_map(|e| match &**e {
        Event::Final(f) if f.pid == pid => Some(f),
        _ => None,
    })
}

fn execs_of(all: &[Arc<Event>], pid: u32) -> Vec<&ExecEvent> {
    all.iter()
        .filter_map(|e| match &**e {
            Event::Exec(x) if x.pid == pid => Some(x),
            _ => None,
        })
        .collect()
}

fn micros(tv: libc::timeval) -> i64 {
    tv.tv_sec * 1_000_000 + tv.tv_usec
}

#[test]
fn an_exit_says_what_wait4_says() {
    let Some(sub) = open() else { return };
    let forks_before = sub.counts().process_forks;
    // dd touches a 64 MiB buffer (its peak resident size) and spends CPU copying zeros; it
    // exits with 0. The shell after it exits with 3.
    let dd = Command::new("dd").args(["if=/dev/zero", "of=/dev/null", "bs=64M", "count=8"]).spawn().expect("dd");
    let dd_pid = dd.id();
    let (dd_status, dd_usage) = wait4(dd);
    let sh = Command::new("sh").args(["-c", "exit 3"]).spawn().expect("sh");
    let sh_pid = sh.id();
    let (sh_status, _) = wait4(sh);
    let mut all = Vec::new();
    drain_until(&sub, &mut all, |all| {
        !exits_of(all, dd_pid).is_empty() && !exits_of(all, sh_pid).is_empty() && final_of(all, dd_pid).is_some()
    });

    let dd_exit = exits_of(&all, dd_pid);
    assert_eq!(dd_exit.len(), 1, "one exit per process");
    let dd_exit = dd_exit[0];
    assert_eq!(dd_exit.wait_status as i32, dd_status);
    assert_eq!(dd_exit.ppid, std::process::id());
    assert_eq!(dd_exit.comm, "dd");
    // ru_maxrss is in KiB: the kernel's own peak, the same number.
    let page_kib = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64) / 1024;
    assert_eq!(dd_exit.maxrss_pages * page_kib, dd_usage.ru_maxrss as u64, "peak resident size");
    assert!(dd_exit.maxrss_pages * page_kib >= 64 << 10, "dd's 64 MiB buffer is in its peak");
    // wait4's CPU time is the scheduler's total split as user and system. The event reads the
    // total as the scheduler last accounted it (at its last tick or switch) before the process
    // is gone: short by up to a tick and what the exit does after the tracepoint (2–5 ms of ~35
    // here, HZ=250, on a quiet machine; 13 ms of 75 in a run beside other tests' binaries, which
    // failed the 10 ms bound this had). That part grows with load, so the bound here is only
    // that the event has most of it; the completed figure below is the exact check.
    let rusage_us = micros(dd_usage.ru_utime) + micros(dd_usage.ru_stime);
    let event_us = (dd_exit.runtime_ns / 1000) as i64;
    assert!(event_us <= rusage_us + 1, "event {event_us} µs, wait4 {rusage_us} µs");
    assert!(event_us * 2 >= rusage_us, "event {event_us} µs, wait4 {rusage_us} µs");
    // Completed by the last switch's figure: what wait4 says, within what the kernel still
    // charges the dying thread after it (its final schedule) and a microsecond of rounding.
    let last = final_of(&all, dd_pid).expect("dd's final switch");
    let whole_us = (dd_exit.runtime_with(last) / 1000) as i64;
    assert!((whole_us - rusage_us).abs() <= 200, "completed {whole_us} µs, wait4 {rusage_us} µs (at exit {event_us})");
    assert!(dd_exit.time_boottime_ns > dd_exit.start_boottime_ns);
    let dd_exec = execs_of(&all, dd_pid);
    assert_eq!(dd_exec.len(), 1);
    assert_eq!(dd_exec[0].args, ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=8"]);
    assert!(dd_exec[0].args_complete);
    assert!(dd_exec[0].filename.ends_with("/dd"), "{}", dd_exec[0].filename);
    assert_eq!(dd_exec[0].start_boottime_ns, dd_exit.start_boottime_ns, "one process: one start");
    assert_eq!(dd_exec[0].cgroup_id, dd_exit.cgroup_id);
    // Its cgroup ids are the pair the task scan gives its parent (this test), whose cgroups it
    // was forked into.
    if let Ok(mut iter) = proctor_bpf::TaskIter::open() {
        let mut scan = Vec::new();
        iter.scan(&mut scan).expect("scan");
        let me = scan.iter().find(|p| p.pid == std::process::id()).expect("this process is scanned");
        assert_eq!(me.cgroup_ids, Some([dd_exit.cgroup_id, dd_exit.memcg_id]), "dd's exit against its parent's scan");
    }

    let sh_exit = exits_of(&all, sh_pid);
    assert_eq!(sh_exit.len(), 1);
    assert_eq!(sh_exit[0].wait_status as i32, sh_status);
    assert_eq!(sh_exit[0].wait_status >> 8, 3, "exit 3");
    assert!(sub.counts().process_forks >= forks_before + 2, "both forks counted");
}

#[test]
fn a_shells_short_lived_children_each_arrive_with_exec_and_exit() {
    let Some(sub) = open() else { return };
    let sh = Command::new("sh")
        .args(["-c", "for i in $(seq 50); do /bin/true proctor-events-test $i; done"])
        .spawn()
        .expect("sh");
    let sh_pid = sh.id();
    let _ = wait4(sh);
    let mut all = Vec::new();
    drain_until(&sub, &mut all, |all| !exits_of(all, sh_pid).is_empty());
    // The children (and `seq`'s) were all reaped by the shell before it exited, so their exits
    // came before its own.
    let children: Vec<&ExecEvent> = all
        .iter()
        .filter_map(|e| match &**e {
            Event::Exec(x) if x.ppid == sh_pid && x.comm == "true" => Some(x),
            _ => None,
        })
        .collect();
    let mut numbers: Vec<String> = children.iter().map(|c| c.args.last().cloned().unwrap_or_default()).collect();
    numbers.sort_by_key(|n| n.parse::<u32>().unwrap_or(0));
    let want: Vec<String> = (1..=50).map(|i| i.to_string()).collect();
    assert_eq!(numbers, want, "every child's exec, with its arguments");
    for c in &children {
        assert_eq!(c.args[..2], ["/bin/true", "proctor-events-test"]);
        let exits = exits_of(&all, c.pid);
        let exit = exits.iter().find(|x| x.start_boottime_ns == c.start_boottime_ns);
        let exit = exit.unwrap_or_else(|| panic!("pid {} exec'd and never exited", c.pid));
        assert_eq!(exit.ppid, sh_pid);
        assert_eq!(exit.comm, "true");
        assert_eq!(exit.wait_status, 0);
        assert!(exit.maxrss_pages > 0);
    }
    let counts = sub.counts();
    assert_eq!(counts.lost_execs + counts.lost_exits + counts.bad_records, 0, "{counts:?}");
}

#[test]
fn two_subscribers_each_get_every_event() {
    let Some(a) = open() else { return };
    let b = Subscription::open().expect("a second subscription where the first opened");
    let child = Command::new("true").spawn().expect("true");
    let pid = child.id();
    let _ = wait4(child);
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    drain_until(&a, &mut ea, |all| !exits_of(all, pid).is_empty());
    drain_until(&b, &mut eb, |all| !exits_of(all, pid).is_empty());
    assert_eq!(execs_of(&ea, pid).len(), 1);
    assert_eq!(execs_of(&eb, pid).len(), 1);
}

#[test]
fn a_hostile_command_line_and_name_arrive_byte_for_byte() {
    let Some(sub) = open() else { return };
    // An escape, a newline, a right-to-left override and a comma in the arguments; the shell
    // renames itself with an escape and parentheses, as `stat` parsers trip on.
    let hostile = "\u{1b}[31mred\nline,\u{202e}gpj.exe";
    let child =
        Command::new("sh").args(["-c", "printf '\\033) x (' > /proc/$$/comm; exit 0", hostile]).spawn().expect("sh");
    let pid = child.id();
    let _ = wait4(child);
    let mut all = Vec::new();
    drain_until(&sub, &mut all, |all| !exits_of(all, pid).is_empty());
    let exec = execs_of(&all, pid);
    assert_eq!(exec[0].args, ["sh", "-c", "printf '\\033) x (' > /proc/$$/comm; exit 0", hostile]);
    assert_eq!(exits_of(&all, pid)[0].comm, "\u{1b}) x (", "the name it gave itself, as stat has it");
}

/// A drain holds every event written before it: each of 500 children, waited for (so its exit
/// was written before the drain began), has its exit in the drains up to the one right after
/// it, while a shell's storm of short children writes events on the other CPU (records still
/// being written there when a drain reaches them, and the reader thread's own drains, must not
/// hold an exit back to a later drain).
#[test]
fn a_drain_holds_the_exit_of_every_child_reaped_before_it() {
    let Some(sub) = open() else { return };
    let mut storm = Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 5000 ]; do /bin/true; i=$((i+1)); done"])
        .spawn()
        .expect("sh");
    let mut all = Vec::new();
    let mut late = Vec::new();
    for _ in 0..500 {
        let child = Command::new("/bin/true").spawn().expect("true");
        let pid = child.id();
        let (status, _) = wait4(child);
        assert_eq!(status, 0);
        assert_eq!(sub.drain(&mut all), 0, "events were dropped");
        if exits_of(&all, pid).is_empty() {
            late.push(pid);
        }
        // Only this loop's children are looked for again: the rest can go.
        all.retain(|e| matches!(&**e, Event::Exit(x) if late.contains(&x.pid)));
    }
    let _ = storm.kill();
    let _ = storm.wait();
    let counts = sub.counts();
    eprintln!(
        "drains that waited for a record being written: {} ({} past the wait, {} µs in all)",
        counts.settle_waits,
        counts.settle_unsettled,
        counts.settle_wait_ns / 1000
    );
    // Any child whose exit came only in a later drain: the drain right after its wait missed it.
    let mut rest = Vec::new();
    sub.drain(&mut rest);
    let came_later: Vec<u32> = late.iter().copied().filter(|pid| !exits_of(&rest, *pid).is_empty()).collect();
    assert!(late.is_empty(), "exits not in the drain right after their wait: {late:?} (came later: {came_later:?})");
}
