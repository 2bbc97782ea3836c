//! What a walk of the kernel's TCP tables costs with other network namespaces to enter
//! (`NetTable::connections_in`, the path of a kernel that refuses the storage iterator):
//! `cargo run --release -p proctor-bpf --example net_namespaces -- N ROUNDS` starts N sleepers,
//! each in a network namespace of its own (`unshare --net`), then times ROUNDS walks of this
//! namespace alone and ROUNDS walks with the N others, alternated; prints the process's CPU
//! (user + system, the entering threads included) a walk, medians. Ends the sleepers it started.

fn cpu_ns() -> u64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the rusage we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(u.ru_utime) + ns(u.ru_stime)
}

fn median(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let (n, rounds) = (args.next().unwrap_or(8), args.next().unwrap_or(50));
    proctor_bpf::net::walk_tcp_tables();
    let table = match proctor_bpf::NetTable::open() {
        Ok(t) => t,
        Err(why) => {
            eprintln!("unavailable: {why}");
            std::process::exit(1);
        }
    };
    let own = std::fs::read_link("/proc/self/ns/net").expect("this namespace");
    let mut sleepers: Vec<_> = (0..n)
        .map(|_| std::process::Command::new("unshare").args(["--net", "sleep", "600"]).spawn().expect("unshare"))
        .collect();
    let pids: Vec<u32> = sleepers.iter().map(|c| c.id()).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|p| std::fs::read_link(format!("/proc/{p}/ns/net")).ok().is_none_or(|ns| ns == own)) {
        assert!(std::time::Instant::now() < deadline, "the namespaces were not made in 10 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut conns = Vec::new();
    let (mut alone, mut with) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..rounds {
        let t = cpu_ns();
        table.connections_in(&mut conns, &[], std::time::Duration::ZERO).expect("the walk");
        alone.push(cpu_ns() - t);
        let t = cpu_ns();
        let (_, ns) = table.connections_in(&mut conns, &pids, std::time::Duration::from_secs(60)).expect("the walks");
        with.push(cpu_ns() - t);
        last = Some(ns);
    }
    for c in &mut sleepers {
        let _ = c.kill();
        let _ = c.wait();
    }
    let (a, w) = (median(alone), median(with));
    println!("{n} other namespaces, {rounds} rounds: {:?}", last.expect("a round"));
    println!("this namespace alone     {:>9.1} µs CPU a walk (median)", a / 1e3);
    println!("with the {n} others       {:>9.1} µs CPU a walk (median)", w / 1e3);
    println!("each other namespace     {:>9.1} µs CPU", (w - a) / n.max(1) as f64 / 1e3);
}
