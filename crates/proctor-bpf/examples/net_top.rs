//! Prints the per-process network table every second: `cargo run -p proctor-bpf --example net_top`.
fn main() {
    let table = match proctor_bpf::NetTable::open() {
        Ok(t) => t,
        Err(why) => {
            eprintln!("unavailable: {why}");
            std::process::exit(1);
        }
    };
    let mut rows = std::collections::HashMap::new();
    let mut conns = Vec::new();
    for _ in 0..std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(3) {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let walk = table.connections(&mut conns);
        let cost = table.read(&mut rows);
        println!("{cost:?} totals {:?} connections {} ({walk:?})", table.totals(), conns.len());
        for (pid, r) in &rows {
            println!("  {pid}: {r:?}");
        }
    }
}
