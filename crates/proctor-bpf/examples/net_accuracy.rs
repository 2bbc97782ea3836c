//! The accuracy half of `bench/net` (issue 36): runs the workload command given (which starts
//! peers that each print `done pid=P sent=S received=R` when finished and then wait for a line
//! on stdin), and compares what the kernel table counted for each peer with what it says it
//! sent and received, and the table's whole (every process's IP bytes and packets and the
//! unowned) with the devices' own counters in /proc/net/dev over the same window.
//!   cargo run --release -p proctor-bpf --example net_accuracy -- python3 bench/net/workload.py
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Every device's (rx IP bytes, rx packets, tx IP bytes, tx packets), summed. Loopback counts
/// a packet once its link header is taken off (IP bytes); an Ethernet device counts the frame,
/// 14 bytes more a packet, taken off here.
fn devices() -> [u64; 4] {
    let text = std::fs::read_to_string("/proc/net/dev").expect("/proc/net/dev");
    let mut sum = [0u64; 4];
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let f: Vec<u64> = rest.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        if f.len() >= 10 {
            let link = if name.trim() == "lo" { 0 } else { 14 };
            let ip = [f[0].saturating_sub(link * f[1]), f[1], f[8].saturating_sub(link * f[9]), f[9]];
            for (s, v) in sum.iter_mut().zip(ip) {
                *s += v;
            }
        }
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert!(!args.is_empty(), "usage: net_accuracy WORKLOAD [ARGS...]");
    let table = proctor_bpf::NetTable::open().unwrap_or_else(|why| {
        eprintln!("SKIP: per-process network: {why}");
        std::process::exit(0);
    });
    let mut rows = HashMap::new();
    // A walk first, as the sampler does: it adds what the sockets counted to their rows.
    table.connections(&mut Vec::new()).expect("the socket walk");
    table.read(&mut rows);
    let dev0 = devices();
    let t0 = table.totals();
    let before = rows.clone();
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the workload");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut peers = Vec::new();
    for line in out.lines() {
        let line = line.expect("a line");
        if line == "all done" {
            break;
        }
        let Some(rest) = line.strip_prefix("done ") else {
            println!("{line}");
            continue;
        };
        let kv: HashMap<&str, String> =
            rest.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k, v.to_string())).collect();
        let num = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        peers.push((kv.get("name").cloned().unwrap_or_default(), num("pid") as u32, num("sent"), num("received")));
    }
    table.connections(&mut Vec::new()).expect("the socket walk");
    table.read(&mut rows);
    let t1 = table.totals();
    let dev1 = devices();
    let _ = writeln!(child.stdin.as_mut().expect("stdin"));
    let _ = child.wait();

    println!(
        "{:<28} {:>14} {:>14} {:>8} {:>14} {:>14} {:>8}",
        "process", "sent", "counted", "off %", "received", "counted", "off %"
    );
    let off = |got: u64, truth: u64| 100.0 * (got as f64 - truth as f64) / (truth.max(1) as f64);
    for (name, pid, sent, received) in &peers {
        let r = rows.get(pid).copied().unwrap_or_default();
        let b = before.get(pid).copied().unwrap_or_default();
        let s = (r.tcp.sent_bytes + r.udp.sent_bytes).saturating_sub(b.tcp.sent_bytes + b.udp.sent_bytes);
        let g =
            (r.tcp.received_bytes + r.udp.received_bytes).saturating_sub(b.tcp.received_bytes + b.udp.received_bytes);
        println!(
            "{:<28} {sent:>14} {s:>14} {:>8.3} {received:>14} {g:>14} {:>8.3}",
            format!("{name} ({pid})"),
            off(s, *sent),
            off(g, *received)
        );
    }
    // The table's whole against the devices': every packet once, IP bytes.
    let rx_pk = t1.rx.packets - t0.rx.packets;
    let tx_pk = t1.tx.packets - t0.tx.packets;
    let owned = |f: fn(&proctor_bpf::net::ProcNet) -> u64| -> u64 {
        let now: u64 = rows.values().map(f).sum();
        let was: u64 = before.iter().filter(|(p, _)| rows.contains_key(p)).map(|(_, r)| f(r)).sum();
        now.saturating_sub(was)
    };
    let rows_tx = owned(|r| r.tcp.tx.bytes + r.udp.tx.bytes);
    let rows_rx = owned(|r| r.tcp.rx.bytes + r.udp.rx.bytes);
    let unowned_tx = t1.tx_unowned.bytes - t0.tx_unowned.bytes;
    let unowned_rx = t1.rx_unowned().bytes - t0.rx_unowned().bytes;
    let (dev_rx, dev_tx) = (dev1[0] - dev0[0], dev1[2] - dev0[2]);
    println!();
    println!("direction  process rows   unowned row   rows + unowned   devices (IP bytes)   rows/devices   (rows+unowned)/devices   packets counted/devices");
    for (dir, rows, unowned, dev, pk, dev_pk) in [
        ("sent", rows_tx, unowned_tx, dev_tx, tx_pk, dev1[3] - dev0[3]),
        ("received", rows_rx, unowned_rx, dev_rx, rx_pk, dev1[1] - dev0[1]),
    ] {
        println!(
            "{dir:<10} {rows:>12} {unowned:>13} {:>16} {dev:>20} {:>14.4} {:>24.4} {:>10}/{dev_pk}",
            rows + unowned,
            rows as f64 / dev.max(1) as f64,
            (rows + unowned) as f64 / dev.max(1) as f64,
            pk
        );
    }
}
