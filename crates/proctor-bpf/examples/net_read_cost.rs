//! What each part of the network reader costs the sampling thread, sample by sample:
//! `cargo run --release -p proctor-bpf --example net_read_cost -- [INTERVAL_MS [ROUNDS]]`
//! (default 1000 and 20; as root). Every INTERVAL_MS it times, in this thread's CPU, the walk
//! of the owned sockets, the table's batched read and the totals (a mapped array), in the
//! sampler's order, then the totals and the table once more at once: what they cost with caches
//! warm.
//! Prints the medians (and the extremes) in µs (docs/performance.md, issue 36).

use proctor_procfs::system::thread_cpu_ns as cpu_ns;

fn main() {
    let arg = |i: usize, default: u64| std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (interval_ms, rounds) = (arg(1, 1000), arg(2, 20));
    let table = proctor_bpf::NetTable::open().unwrap_or_else(|why| {
        eprintln!("per-process network is unavailable here: {why}");
        std::process::exit(1)
    });
    let (mut rows, mut connections) = (std::collections::HashMap::new(), Vec::new());
    let mut parts: [(&str, Vec<u64>); 4] =
        [("walk", vec![]), ("table", vec![]), ("totals", vec![]), ("totals and table again", vec![])];
    for _ in 0..rounds {
        std::thread::sleep(std::time::Duration::from_millis(interval_ms));
        let mut at = [cpu_ns(); 5];
        let _ = table.connections(&mut connections);
        at[1] = cpu_ns();
        table.read(&mut rows);
        at[2] = cpu_ns();
        let _ = table.totals();
        at[3] = cpu_ns();
        let _ = table.totals();
        table.read(&mut rows);
        at[4] = cpu_ns();
        for (i, (_, v)) in parts.iter_mut().enumerate() {
            v.push(at[i + 1] - at[i]);
        }
    }
    println!("every {interval_ms} ms, {rounds} rounds; µs of this thread's CPU: median (min, max)");
    for (name, v) in parts.iter_mut() {
        v.sort_unstable();
        let us = |ns: u64| ns / 1000;
        println!("  {name}: {} ({}, {})", us(v[v.len() / 2]), us(v[0]), us(v[v.len() - 1]));
    }
    println!("rows {}, connections {}", rows.len(), connections.len());
}
