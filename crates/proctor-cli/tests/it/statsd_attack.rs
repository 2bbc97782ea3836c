//! statsd memory under hostile keys (issue 15 item 3): 2,000 keys of 60 KB, and 30,000 distinct
//! 900-byte keys, against a real `proctor statsd`. Long keys are refused and counted by reason;
//! distinct keys stop at the byte cap; RSS stays bounded.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::bounded::{StderrLines, STARTUP};
use super::Guard;

/// The admin port's `stats` lines as (name, value).
fn stats(admin: &str) -> Vec<(String, f64)> {
    let Ok(mut stream) = TcpStream::connect(admin) else { return Vec::new() };
    let _ = stream.write_all(b"stats\n");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut out = Vec::new();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if line == "END" {
            break;
        }
        if let Some((name, value)) = line.split_once(": ") {
            if let Ok(value) = value.trim().parse() {
                out.push((name.to_string(), value));
            }
        }
    }
    out
}

fn stat(stats: &[(String, f64)], name: &str) -> f64 {
    stats.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v)
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix(" kB")?.parse::<f64>().ok()))
        .unwrap_or(0.0)
        / 1024.0
}

/// Waits until every packet sent so far is either received or counted as dropped by the kernel,
/// and (when `flushes_after` is given) until a flush has happened after that count.
fn settle(admin: &str, sent: f64, flushes_after: Option<f64>) -> Vec<(String, f64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = stats(admin);
        let arrived = stat(&now, "proctor.packets_received") + stat(&now, "proctor.kernel_dropped_packets");
        let flushed = flushes_after.is_none_or(|f| stat(&now, "proctor.flushes") > f);
        if arrived >= sent && flushed {
            return now;
        }
        assert!(Instant::now() < deadline, "sent {sent}, statsd says {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many packets of `bytes` to send before waiting for statsd: a quarter of what its
/// receive buffer holds (the kernel charges a datagram more than its payload), at least one.
fn window(receive_buffer_bytes: f64, bytes: usize) -> usize {
    ((receive_buffer_bytes / (4 * (bytes + 1024)) as f64) as usize).max(1)
}

/// Sends `count` packets made by `packet`, `window` at a time, and after each window waits until
/// statsd has received, or the kernel has counted as dropped, every packet sent so far
/// (`already` before these): the pace this receiver keeps however starved the machine is, so
/// what arrives does not depend on how busy the machine is.
fn send_paced(
    sender: &UdpSocket,
    udp: &str,
    admin: &str,
    already: f64,
    count: usize,
    window: usize,
    packet: impl Fn(usize) -> String,
) {
    for i in 0..count {
        sender.send_to(packet(i).as_bytes(), udp).expect("send");
        if (i + 1) % window == 0 || i + 1 == count {
            settle(admin, already + (i + 1) as f64, None);
        }
    }
}

#[test]
fn hostile_keys_are_refused_or_capped_and_memory_stays_bounded() {
    // Port 0 for both, and the ports statsd says it got: a port picked here and bound there
    // could be taken in between by another test's socket.
    let mut child = super::proctor_command()
        .args(["statsd", "--udp", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--flush-interval", "1s", "--max-mib", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("statsd");
    let pid = child.id();
    let mut stderr = StderrLines::take(&mut child);
    let _statsd = Guard(child);
    let udp = stderr.until("statsd's udp address", STARTUP, |line| {
        line.strip_prefix("proctor statsd: udp ")?.split(' ').next().map(str::to_string)
    });
    let admin = stderr.until("statsd's admin address", STARTUP, |line| {
        line.strip_prefix("proctor statsd: admin ").map(|rest| rest.trim().to_string())
    });
    let deadline = Instant::now() + STARTUP;
    while stats(&admin).is_empty() {
        assert!(Instant::now() < deadline, "statsd's admin port {admin} did not answer within {STARTUP:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rss_before = rss_mib(pid);
    let sender = UdpSocket::bind("127.0.0.1:0").expect("sender");
    let buffer = stat(&stats(&admin), "proctor.udp0.receive_buffer_bytes");
    // 2,000 keys of 60 KB, sent at the pace statsd reads them (below): refused as key_too_long,
    // nothing kept.
    send_paced(&sender, &udp, &admin, 0.0, 2000, window(buffer, 60_000), |i| format!("{}{i}:1|c", "k".repeat(60_000)));
    let long = settle(&admin, 2000.0, None);
    let long_received = stat(&long, "proctor.packets_received");
    eprintln!("2,000 × 60 KB keys: RSS {rss_before:.1} → {:.1} MiB; {long:?}", rss_mib(pid));
    assert!(long_received >= 500.0, "too few long packets arrived to say anything: {long:?}");
    assert_eq!(stat(&long, "proctor.bad_lines.key_too_long"), long_received, "{long:?}");
    // 30,000 distinct keys of 900 bytes: under the key length and count caps, over the 8 MiB cap.
    let flushes = stat(&long, "proctor.flushes");
    send_paced(&sender, &udp, &admin, 2000.0, 30_000, window(buffer, 900), |i| {
        format!("{}{i:06}:1|c", "d".repeat(894))
    });
    // Wait for the packets, then for a flush after them (the byte figures are a flush's).
    let after = settle(&admin, 32_000.0, Some(flushes));
    let mut after = settle(&admin, 32_000.0, Some(stat(&after, "proctor.flushes")));
    // Received is counted as a packet is read, kept and refused as its shard aggregates it: on
    // a loaded machine a flush can come while shards still hold queued metrics. Every metric
    // is accounted for by some later flush, or the assertion below fails.
    let deadline = Instant::now() + Duration::from_secs(20);
    let accounted = |a: &[(String, f64)]| {
        stat(a, "proctor.keys") + stat(a, "proctor.byte_limit_dropped_metrics")
            >= stat(a, "proctor.packets_received") - long_received
    };
    while !accounted(&after) && Instant::now() < deadline {
        after = settle(&admin, 32_000.0, Some(stat(&after, "proctor.flushes")));
    }
    let rss = rss_mib(pid);
    eprintln!("then 30,000 × 900 B keys: RSS {rss:.1} MiB; {after:?}");
    let distinct_received = stat(&after, "proctor.packets_received") - long_received;
    assert!(distinct_received >= 15_000.0, "too few distinct keys arrived to pass the cap: {after:?}");
    // 8 MiB of keys hold at most ~8,700 of these (900 bytes and 64 of overhead each); the rest
    // were refused for bytes and counted.
    let keys = stat(&after, "proctor.keys");
    let refused = stat(&after, "proctor.byte_limit_dropped_metrics");
    assert!(keys <= 8_800.0, "{after:?}");
    assert!(stat(&after, "proctor.aggregator_bytes") <= 8.0 * 1024.0 * 1024.0, "{after:?}");
    assert!(refused > 0.0 && keys + refused >= distinct_received, "{after:?}");
    assert!(rss < 64.0, "RSS {rss:.1} MiB");
}
