//! The real machine: this test process, children it starts, and churn while scanning.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proctor_model::container_truth;
use proctor_procfs::Root;
use proctor_sampler::pss::read_pss;
use proctor_sampler::{Sampler, SamplerConfig};

/// A child that is killed (by its pid, which we own) when the guard drops.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Guard {
    Guard(Command::new("sleep").arg("60").stdin(Stdio::null()).spawn().expect("spawn sleep"))
}

#[test]
fn sees_itself_with_real_values() {
    let config = SamplerConfig { cmdline: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    let sample = sampler.sample();
    let me = sample.process(std::process::id()).expect("this process is in the scan");
    assert!(me.resident_bytes.is_some_and(|r| r > 0));
    assert!(me.num_threads >= 1);
    assert!(me.status.is_some());
    assert!(sample.host.stat.is_some() && sample.host.meminfo.is_some());
    assert!(sample.cost.cpu_ns > 0 && sample.cost.files_read > 0);
    assert!(sample.cost.errors.keys().all(|(_, reason)| *reason != "parse"), "{:?}", sample.cost.errors);
}

#[test]
fn effective_cpus_agree_with_nproc() {
    let mut sampler = Sampler::new(SamplerConfig { processes: false, ..SamplerConfig::default() });
    let truth = container_truth(&sampler.sample());
    // nproc counts the affinity mask, the upper bound proctor also starts from.
    let nproc: f64 = String::from_utf8(Command::new("nproc").output().expect("nproc").stdout)
        .expect("utf8")
        .trim()
        .parse()
        .expect("a number");
    let effective = truth.effective_cpus.expect("known");
    assert!(effective <= nproc + 1e-9, "{effective} > nproc {nproc}");
    assert_eq!(truth.affinity_cpus, Some(nproc as usize));
    assert!(truth.host_online_cpus.is_some_and(|h| h as f64 >= effective));
    assert!(truth.memory_limit_bytes.is_some());
}

#[test]
fn reads_pss_of_a_child_and_the_worker_refreshes_it() {
    let child = sleeper();
    let pid = child.0.id();
    let epoch = Instant::now();
    let reading = read_pss(&Root::default(), pid, epoch, &mut Vec::new()).expect("own child is readable");
    assert!(reading.rollup.pss_bytes.is_some_and(|p| p > 0));
    assert!(reading.rollup.uss_bytes().is_some_and(|u| u <= reading.rollup.rss_bytes.unwrap_or(0)));

    let config = SamplerConfig { cmdline: false, pss_budget: 0.5, pss_root: Some(pid), ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    // The worker runs on its own thread; wait (bounded) for it to reach the child.
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let sample = sampler.sample();
        if let Some(p) = sample.process(pid).and_then(|p| p.pss) {
            break Some(p);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let found = found.expect("the PSS worker read the child within 20 s");
    assert!(found.rollup.pss_bytes.is_some_and(|p| p > 0));
    let stats = sampler.pss_stats().expect("worker running");
    assert!(stats.reads >= 1);
    assert!(stats.cpu_ns > 0);
}

#[test]
fn cmdline_worker_fills_command_lines() {
    let child = sleeper();
    let pid = child.0.id();
    let mut sampler = Sampler::new(SamplerConfig { pss_budget: 0.0, ..SamplerConfig::default() });
    let deadline = Instant::now() + Duration::from_secs(20);
    let cmdline = loop {
        let sample = sampler.sample();
        if let Some(c) = sample.process(pid).and_then(|p| p.cmdline.clone()) {
            break c;
        }
        assert!(Instant::now() < deadline, "cmdline never arrived");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(&*cmdline, &["sleep".to_string(), "60".to_string()]);
}

#[test]
fn a_command_line_is_read_again_after_an_exec() {
    // A shell that waits for a line on stdin, then execs `sleep`: same pid and start time, a
    // new name and a new command line (as an entrypoint's `exec "$@"` does).
    let mut child = Guard(
        Command::new("sh").args(["-c", "read line; exec sleep 60"]).stdin(Stdio::piped()).spawn().expect("spawn sh"),
    );
    let pid = child.0.id();
    let mut sampler = Sampler::new(SamplerConfig { pss_budget: 0.0, ..SamplerConfig::default() });
    let wait_for = |sampler: &mut Sampler, want: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let sample = sampler.sample();
            let p = sample.process(pid).expect("the child is in the scan");
            let cmdline: Option<Vec<String>> = p.cmdline.as_ref().map(|c| c.to_vec());
            if cmdline.as_deref().is_some_and(|c| c == want) {
                return (p.comm.to_string(), p.start_ticks);
            }
            assert!(Instant::now() < deadline, "command line {cmdline:?}, not {want:?}, 20 s on (name {})", p.comm);
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let (before, started) = wait_for(&mut sampler, &["sh", "-c", "read line; exec sleep 60"]);
    assert_eq!(before, "sh");
    let mut stdin = child.0.stdin.take().expect("piped stdin");
    std::io::Write::write_all(&mut stdin, b"go\n").expect("write to the shell");
    let (after, started_after) = wait_for(&mut sampler, &["sleep", "60"]);
    assert_eq!((after.as_str(), started_after), ("sleep", started), "the same process, renamed");
}

#[test]
fn churn_processes_exiting_during_scans_are_skipped_not_errors() {
    let config = SamplerConfig { pss_budget: 0.0, ..SamplerConfig::default() };
    let mut sampler = Sampler::new(config);
    let spawner = std::thread::spawn(|| {
        for _ in 0..300 {
            if let Ok(mut c) = Command::new("true").spawn() {
                let _ = c.wait();
            }
        }
    });
    let mut samples = 0;
    let mut gone = 0;
    while !spawner.is_finished() || samples < 5 {
        let s = sampler.sample();
        samples += 1;
        gone += s.cost.processes_gone;
        let pids: Vec<u32> = s.processes.iter().map(|p| p.pid).collect();
        let mut sorted = pids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(pids, sorted, "sorted, no duplicates");
        for (reader, reason) in s.cost.errors.keys() {
            assert!(matches!(*reason, "gone" | "permission"), "{reader}: {reason}");
        }
        assert!(s.processes.iter().any(|p| p.pid == std::process::id()));
    }
    spawner.join().expect("spawner finished");
    // Not asserted > 0: whether an exit lands mid-read is up to the scheduler.
    eprintln!("{samples} samples during churn, {gone} processes gone mid-read");
}
