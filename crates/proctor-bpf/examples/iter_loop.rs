//! Scans through the task iterator in a loop, for a profiler: `cargo run --release -p proctor-bpf
//! --example iter_loop -- N` runs N scans (default 10,000), as the agent runs them
//! (`scan_by_pid`), and prints the CPU per process.
fn main() {
    let n: u64 = std::env::args().nth(1).map_or(10_000, |s| s.parse().expect("N is a number"));
    let mut iter = proctor_bpf::TaskIter::open().unwrap_or_else(|why| {
        eprintln!("the task iterator cannot be used here: {why}");
        std::process::exit(1);
    });
    let mut out = Vec::new();
    let (mut cpu_ns, mut processes) = (0u64, 0u64);
    for _ in 0..n {
        let cost = iter.scan_by_pid(&mut out).expect("scan");
        cpu_ns += cost.cpu_ns;
        processes += cost.processes;
    }
    println!("{n} scans, {:.3} µs CPU per process", cpu_ns as f64 / processes as f64 / 1000.0);
}
