//! One scan through the task reader (the open-coded scan, or the iterator's file), printed: `cargo run -p proctor-bpf --example iter_scan
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
    println!("{}: {cost:?}", iter.how());
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
