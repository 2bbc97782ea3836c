//! How soon, and how truly, the Jupyter document's `pss` covers a tree: issue 34 item 3.
//!
//!     jupyter_pss [--budget SHARE] [--secs N] [--check-every N] [--kill-half-at N]
//!
//! Runs the sampler exactly as `proctor.jupyter` does (the tree under this process, PSS on at
//! `--budget`, 0.02 by default; 1 s samples) and every second builds the Jupyter document
//! (`jupyter_metrics`). Whenever the document has a `pss`, and at least every `--check-every`
//! seconds (10) while it does, it sums `Pss:` over the tree's `smaps_rollup` read at that moment
//! on this thread and prints how far the document is from it. At the end: when the document
//! first had a `pss`, its error then, the worst error while it had one, and the longest single
//! hold of any member's mmap lock by the PSS worker. The `est` column counts the members whose
//! figure is a clone's reading standing in for their own (`proctor_sampler::pss`). `--kill-half-at N` kills every other child
//! N seconds in (SIGKILL, then reaped): the survivors' share of what they share grows, and the
//! document must not show the old sum meanwhile (the time without a `pss` is printed).
//!
//! Meant to be exec'd by `bench/jupyter/pss.py` in place of the Jupyter server, after the
//! tree's parent forked its children: the children are then this process's children, as they
//! are the server's in the field report.

use std::time::{Duration, Instant};

use proctor_agent::{Agent, AgentConfig};
use proctor_model::build_tree;
use proctor_sampler::SamplerConfig;
use proctor_vocab::jupyter::{jupyter_metrics, JupyterConfig};

fn fresh_sum(pids: &[u32]) -> (u64, usize) {
    let mut sum = 0;
    let mut read = 0;
    for pid in pids {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else { continue };
        if let Some(kb) = text.lines().find_map(|l| l.strip_prefix("Pss:")) {
            sum += kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024;
            read += 1;
        }
    }
    (sum, read)
}

fn main() {
    let mut budget = 0.02;
    let mut secs = 180.0;
    let mut check_every = 10.0;
    let mut kill_at = f64::INFINITY;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<f64>().ok()).expect("a number after the flag");
        match a.as_str() {
            "--budget" => budget = value(),
            "--secs" => secs = value(),
            "--check-every" => check_every = value(),
            "--kill-half-at" => kill_at = value(),
            _ => panic!("usage: jupyter_pss [--budget SHARE] [--secs N] [--check-every N] [--kill-half-at N]"),
        }
    }
    let me = std::process::id();
    let t0 = Instant::now();
    let config =
        SamplerConfig { pss_budget: budget, pss_root: Some(me), container_pid: me, ..SamplerConfig::default() };
    let agent = Agent::start(config, AgentConfig::brief(Duration::from_secs(1))).expect("start the sampler");
    let shared = agent.shared();
    let jupyter = JupyterConfig::new(me);
    println!("pid {me}, pss budget {budget}, {secs} s");
    println!(
        "{:>6} {:>5} {:>5} {:>5} {:>10} {:>8} {:>10} {:>8}",
        "t_s", "procs", "known", "est", "doc_pss", "oldest", "fresh", "err_%"
    );
    let (mut first, mut worst, mut last_check) = (None::<(f64, f64)>, 0.0f64, f64::NEG_INFINITY);
    let mut within_1 = None::<f64>;
    let mut last_doc = None;
    let (mut killed_at, mut back_at) = (None::<f64>, None::<f64>);
    while t0.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_secs(1));
        let s = shared.latest();
        let Some(tree) = build_tree(&s.rows, me) else { continue };
        if killed_at.is_none() && t0.elapsed().as_secs_f64() >= kill_at {
            let kids: Vec<i32> = s.rows.iter().filter(|r| r.ppid == me).map(|r| r.pid as i32).collect();
            for &pid in kids.iter().step_by(2) {
                // Our own children, by pid; reaped at once so the tree loses them.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
            }
            killed_at = Some(t0.elapsed().as_secs_f64());
            println!("killed {} of {} children", kids.len().div_ceil(2), kids.len());
            continue;
        }
        let doc = jupyter_metrics(&s, &jupyter, None).and_then(|m| m.pss);
        let t = t0.elapsed().as_secs_f64();
        let oldest = tree.total.pss_oldest_age_secs.map_or("-".to_string(), |a| format!("{a:.0}s"));
        let mut line = format!(
            "{t:>6.1} {:>5} {:>5} {:>5} {:>10} {oldest:>8}",
            tree.total.processes,
            tree.total.pss_known,
            tree.total.pss_estimated,
            doc.map_or("-".to_string(), |p| format!("{:.1}M", p as f64 / 1048576.0)),
        );
        if killed_at.is_some() && back_at.is_none() && doc.is_some() && !tree.rows.iter().any(|r| r.row.pss.is_none()) {
            back_at = Some(t);
        }
        if let Some(pss) = doc {
            if last_doc != Some(pss) || t - last_check >= check_every {
                last_check = t;
                let pids: Vec<u32> = tree.rows.iter().map(|r| r.row.pid).collect();
                let (fresh, read) = fresh_sum(&pids);
                let err = (pss as f64 - fresh as f64) / fresh as f64 * 100.0;
                line += &format!(" {:>9.1}M {err:>+8.2} ({read} read)", fresh as f64 / 1048576.0);
                first.get_or_insert((t, err));
                worst = worst.max(err.abs());
                if err.abs() <= 1.0 {
                    within_1.get_or_insert(t);
                }
            }
        }
        last_doc = doc;
        println!("{line}");
    }
    let s = shared.latest();
    let longest = s.rows.iter().filter_map(|r| r.stall.map(|st| st.max_ns)).max().unwrap_or(0);
    let stats = s.agent.pss;
    agent.stop();
    match first {
        Some((t, err)) => println!("first pss in the document: {t:.1} s, {err:+.2} % from a fresh sum"),
        None => println!("first pss in the document: never in {secs} s"),
    }
    match within_1 {
        Some(t) => println!("first within 1 % of a fresh sum: {t:.1} s"),
        None => println!("first within 1 % of a fresh sum: never"),
    }
    println!("worst error while shown: {worst:.2} %");
    if let Some(k) = killed_at {
        match back_at {
            Some(b) => println!("after killing half: no pss for {:.1} s, then shown again", b - k),
            None => println!("after killing half: no pss until the end"),
        }
    }
    println!("longest single hold of a member's mmap lock: {:.2} ms", longest as f64 / 1e6);
    if let Some(p) = stats {
        println!(
            "pss worker: {} reads ({} through pagemap), {} skipped unchanged, {} held back by a target's budget, {:.3} s CPU",
            p.reads,
            p.pagemap_reads,
            p.skipped_unchanged,
            p.skipped_target_budget,
            p.cpu_ns as f64 / 1e9
        );
        println!(
            "clones' readings checked against their own: {}, {} more than 1 % off, worst {:.3} %",
            p.estimates_checked,
            p.estimates_off,
            p.estimate_worst_error * 100.0
        );
    }
}
