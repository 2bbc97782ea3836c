//! What tracing a PSS read's mmap lock waits costs the reader: `cargo run --release -p
//! proctor-sampler --example lockwait_cost -- PID [READS]` reads PID's smaps_rollup READS times
//! (default 50) plain and then traced (`proctor_sampler::lockwait`), alternating, and prints the
//! median CPU and wall time of each, with the events each trace held, and what the target's
//! threads waited on the traced reads against what those reads held (the ledger's figure).
//! Needs root and tracefs.

use std::time::Instant;

use proctor_procfs::system::thread_cpu_ns;
use proctor_procfs::Root;
use proctor_sampler::lockwait::LockWaits;

fn main() {
    let mut args = std::env::args().skip(1);
    let pid: u32 = args.next().and_then(|p| p.parse().ok()).expect("usage: lockwait_cost PID [READS]");
    let reads: usize = args.next().map_or(50, |n| n.parse().expect("READS is a number"));
    let root = Root::default();
    let mut tracer = LockWaits::open(&root).unwrap_or_else(|why| panic!("no trace: {why}"));
    let path = format!("/proc/{pid}/smaps_rollup");
    let (mut plain, mut traced, mut events, mut waited, mut held) = (Vec::new(), Vec::new(), Vec::new(), 0u64, 0u64);
    for _ in 0..reads {
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        std::fs::read(&path).expect("read smaps_rollup");
        plain.push((thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as u64));
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        let (_, w) = tracer.around(pid, || std::fs::read(&path).expect("read smaps_rollup"));
        traced.push((thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as u64));
        let w = w.expect("a trace");
        events.push(w.events);
        waited += w.waited_ns;
        held += w.held_ns;
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (mut pc, mut pw): (Vec<u64>, Vec<u64>) = plain.into_iter().unzip();
    let (mut tc, mut tw): (Vec<u64>, Vec<u64>) = traced.into_iter().unzip();
    println!("plain:  CPU {:>8} ns  wall {:>8} ns (medians of {reads})", median(&mut pc), median(&mut pw));
    println!(
        "traced: CPU {:>8} ns  wall {:>8} ns, {} events a trace (median), the target waited {waited} ns in all",
        median(&mut tc),
        median(&mut tw),
        median(&mut events)
    );
    println!(
        "the traced reads held its lock {held} ns in all; its threads waited {:.1} % of that",
        waited as f64 / held.max(1) as f64 * 100.0
    );
}
