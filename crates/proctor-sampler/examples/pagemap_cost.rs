//! A process's PSS both ways: `cargo run --release -p proctor-sampler --example pagemap_cost --
//! PID [READS]` reads PID's `smaps_rollup` and then its `pagemap` ([`proctor_sampler::pagemap`])
//! READS times (default 20), alternating, and prints the median CPU and wall time of each, the
//! `pagemap` reads' holds (how many, their sum, the longest: each a walk of 2 MiB), and the PSS
//! each gave. A `smaps_rollup` read holds the lock once per mapping: for one big mapping, its
//! wall time. Needs root (`pagemap` hides frame numbers otherwise).

use std::time::Instant;

use proctor_procfs::system::thread_cpu_ns;
use proctor_procfs::Root;
use proctor_sampler::pagemap::PageCounter;

fn main() {
    let mut args = std::env::args().skip(1);
    let pid: u32 = args.next().and_then(|p| p.parse().ok()).expect("usage: pagemap_cost PID [READS]");
    let reads: usize = args.next().map_or(20, |n| n.parse().expect("READS is a number"));
    let root = Root::default();
    let mut counter = PageCounter::open(&root).unwrap_or_else(|why| panic!("no pagemap: {why}"));
    let (mut rollup, mut paged, mut holds) = (Vec::new(), Vec::new(), Vec::new());
    let (mut rollup_pss, mut paged_pss) = (0, 0);
    let mut buf = Vec::new();
    for _ in 0..reads {
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        let r = proctor_sampler::pss::read_pss(&root, pid, wall, &mut buf).expect("read smaps_rollup");
        rollup.push((thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as u64));
        rollup_pss = r.rollup.pss_bytes.unwrap_or(0);
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        let (r, h) = counter.read(&root, pid);
        paged.push((thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as u64));
        paged_pss = r.expect("read pagemap").pss_bytes.unwrap_or(0);
        holds.push(h);
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2] as f64 / 1e6
    };
    let cpu = |v: &[(u64, u64)]| median(v.iter().map(|x| x.0).collect());
    let wall = |v: &[(u64, u64)]| median(v.iter().map(|x| x.1).collect());
    println!("pid {pid}, {reads} reads each way, medians");
    println!(
        "smaps_rollup: {:.2} ms CPU, {:.2} ms wall, PSS {:.1} MiB",
        cpu(&rollup),
        wall(&rollup),
        rollup_pss as f64 / 1048576.0
    );
    println!(
        "pagemap:      {:.2} ms CPU, {:.2} ms wall, PSS {:.1} MiB; {} holds, {:.2} ms held, longest {:.3} ms (longest of all reads {:.3} ms)",
        cpu(&paged),
        wall(&paged),
        paged_pss as f64 / 1048576.0,
        median(holds.iter().map(|h| u64::from(h.count)).collect()) * 1e6,
        median(holds.iter().map(|h| h.total_ns).collect()),
        median(holds.iter().map(|h| h.longest_ns).collect()),
        holds.iter().map(|h| h.longest_ns).max().unwrap_or(0) as f64 / 1e6,
    );
}
