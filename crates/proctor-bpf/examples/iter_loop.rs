//! Scans through the task iterator in a loop, for a profiler: `cargo run --release -p proctor-bpf
//! --example iter_loop -- N [MIB]` runs N scans (default 10,000), as the agent runs them
//! (`scan_by_pid`), and prints the CPU per process, the kernel's part (the program's run, or the
//! file's reads) and the reader's. With MIB, a line of every 64 bytes of a buffer that size is
//! written before each scan (outside the timed scan), so the scan finds its data cold, as the
//! agent's once-a-second scan does.
fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(10_000, |s| s.parse().expect("N is a number"));
    let mib: usize = args.next().map_or(0, |s| s.parse().expect("MIB is a number"));
    let mut iter = proctor_bpf::TaskIter::open().unwrap_or_else(|why| {
        eprintln!("the task iterator cannot be used here: {why}");
        std::process::exit(1);
    });
    let mut out = Vec::new();
    let mut buffer = vec![0u8; mib << 20];
    let (mut cpu_ns, mut kernel_ns, mut processes) = (0u64, 0u64, 0u64);
    for i in 0..n {
        for at in (0..buffer.len()).step_by(64) {
            buffer[at] = i as u8;
        }
        std::hint::black_box(&buffer);
        let cost = iter.scan_by_pid(&mut out).expect("scan");
        cpu_ns += cost.cpu_ns;
        kernel_ns += cost.kernel_cpu_ns;
        processes += cost.processes;
    }
    let per = |ns: u64| ns as f64 / processes.max(1) as f64 / 1000.0;
    println!(
        "{n} scans of {} processes{}: {:.3} µs CPU per process (kernel {:.3}, reader {:.3})",
        processes / n.max(1),
        if mib > 0 { format!(", {mib} MiB written before each") } else { String::new() },
        per(cpu_ns),
        per(kernel_ns),
        per(cpu_ns - kernel_ns)
    );
}
