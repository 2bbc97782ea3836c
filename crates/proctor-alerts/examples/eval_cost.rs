//! Evaluation cost of a rules file over this machine's processes, split into its parts:
//! `cargo run --release -p proctor-alerts --example eval_cost -- RULES.yml [ROUNDS]`.
//! (bench/alerts/eval.sh measures the whole agent; this says where the time goes.)

use std::time::{Duration, Instant};

use proctor_agent::Snapshot;
use proctor_alerts::engine::Alerting;
use proctor_alerts::state::AlertState;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a rules file");
    let rounds: usize = args.next().map_or(2000, |r| r.parse().expect("rounds"));
    // PROCS=600: sleepers of its own until the machine has that many processes (ended at exit).
    let want: usize = std::env::var("PROCS").ok().and_then(|p| p.parse().ok()).unwrap_or(0);
    let have = std::fs::read_dir("/proc").map_or(0, |d| {
        d.filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())).count()
    });
    let mut kids: Vec<std::process::Child> = (have..want)
        .map(|i| {
            std::process::Command::new("bash")
                .args(["-c", &format!("exec -a benchsleep-{} sleep 600", i % 20)])
                .spawn()
                .expect("sleep")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let set = proctor_alerts::engine::load_rules(std::path::Path::new(&path)).unwrap_or_else(|e| panic!("{e}"));
    let mut sampler =
        proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig { pss_budget: 0.0, ..Default::default() });
    let first = sampler.sample();
    std::thread::sleep(Duration::from_millis(100));
    let second = sampler.sample();
    let s = Snapshot::derive(second.clone(), Some(&first));
    let mut a = Alerting::new(set, AlertState::default());
    // PAUSE_MS between evaluations: caches go cold as they do between an agent's samples.
    let pause = Duration::from_millis(std::env::var("PAUSE_MS").ok().and_then(|p| p.parse().ok()).unwrap_or(0));
    let mut times = Vec::with_capacity(rounds);
    // The engine's own figure too: its thread's CPU clock, as /api/v1/alerts reports it (time
    // the thread spent descheduled on a busy machine is not in it).
    let mut cpu = Vec::with_capacity(rounds);
    for i in 0..rounds {
        std::thread::sleep(pause);
        // Each round a later time, as samples would be.
        let mut later = second.clone();
        later.unix_ns += i as u64 * 1_000_000_000;
        let snap = Snapshot::derive(later, Some(&first));
        let t = Instant::now();
        a.evaluate(&snap);
        times.push(t.elapsed().as_nanos() as f64 / 1e3);
        cpu.push(a.last_eval_cpu_ns as f64 / 1e3);
    }
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "{} processes, {} rules: evaluation median {:.0} µs, p90 {:.0} µs (wall, {rounds} rounds); thread CPU median {:.0} µs, p90 {:.0} µs",
        s.rows.len(),
        a.set.rules.len(),
        times[rounds / 2],
        times[rounds * 9 / 10],
        cpu[rounds / 2],
        cpu[rounds * 9 / 10]
    );
    println!("{:?}", a.eval_stats());
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
}
