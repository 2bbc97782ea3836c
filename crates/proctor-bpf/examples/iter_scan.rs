//! One scan through the task iterator, printed: `cargo run -p proctor-bpf --example iter_scan
//! [N]` prints the cost of a scan, then N processes (default 10) as pid, ppid, state, threads,
//! utime+stime ticks, rss pages and name; or why the iterator cannot be used here.
fn main() {
    let n: usize = std::env::args().nth(1).map_or(10, |s| s.parse().expect("N is a number"));
    let mut iter = match proctor_bpf::TaskIter::open() {
        Ok(iter) => iter,
        Err(why) => {
            eprintln!("the task iterator cannot be used here: {why}");
            std::process::exit(1);
        }
    };
    let mut out = Vec::new();
    let cost = iter.scan(&mut out).expect("scan");
    println!("{cost:?}");
    if std::env::var_os("ITER_SCAN_TIDS").is_some() {
        let tids: Vec<u64> = iter
            .raw()
            .chunks_exact(proctor_bpf::RECORD_BYTES)
            .map(|r| u64::from_ne_bytes(r[8..16].try_into().expect("8 bytes")))
            .collect();
        println!("tids in the order the kernel gave them: {tids:?}");
    }
    for p in out.iter().take(n) {
        println!(
            "{:>7} {:>7} {} {:>3} {:>8} {:>8} {}",
            p.pid,
            p.ppid,
            p.state,
            p.num_threads,
            p.utime_ticks + p.stime_ticks,
            p.rss_pages,
            p.comm.escape_debug()
        );
    }
}
