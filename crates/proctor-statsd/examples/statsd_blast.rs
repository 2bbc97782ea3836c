//! A bounded loopback statsd load generator for `bench/statsd/run.sh`.
//!
//! Sends exactly `--packets` UDP datagrams to `--target` (loopback only) with `sendmmsg`, at
//! full speed or paced to `--rate` packets per second, then prints one JSON line with what it
//! sent and how long it took. It never retries and never reads: a receiver that falls behind
//! loses packets, which is what the benchmark measures.
//!
//! cargo run --release -p proctor-statsd --example statsd_blast -- --target 127.0.0.1:8125 --packets 5000000 [--rate 100000]

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let target: SocketAddr =
        arg(&args, "--target").unwrap_or_else(|| "127.0.0.1:8125".into()).parse().expect("--target ADDR:PORT");
    assert!(target.ip().is_loopback(), "the blaster only sends to loopback addresses");
    let packets: u64 = arg(&args, "--packets").unwrap_or_else(|| "1000000".into()).parse().expect("--packets N");
    let rate: u64 = arg(&args, "--rate").unwrap_or_else(|| "0".into()).parse().expect("--rate PPS");
    assert!(packets <= 50_000_000, "at most 50 M packets per run");

    // 64 distinct packets, half counters and half timers, cycled.
    let payloads: Vec<Vec<u8>> = (0..64u32)
        .map(|k| {
            if k % 2 == 0 {
                format!("bench.c{k}:1|c").into_bytes()
            } else {
                format!("bench.t{k}:{}|ms", k * 3).into_bytes()
            }
        })
        .collect();
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(target).expect("connect");
    let batch = if rate == 0 { 64 } else { (rate / 2000).clamp(1, 64) as usize };
    let mut iovecs: Vec<libc::iovec> =
        payloads.iter().map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }).collect();
    // SAFETY: zeroed mmsghdr is valid; each is pointed at one iovec below.
    let mut headers: Vec<libc::mmsghdr> = (0..64).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (header, iovec) in headers.iter_mut().zip(iovecs.iter_mut()) {
        header.msg_hdr.msg_iov = iovec;
        header.msg_hdr.msg_iovlen = 1;
    }
    let started = Instant::now();
    let mut sent: u64 = 0;
    let mut send_errors: u64 = 0;
    while sent < packets {
        if rate > 0 {
            let due = Duration::from_secs_f64(sent as f64 / rate as f64);
            let elapsed = started.elapsed();
            if due > elapsed {
                std::thread::sleep(due - elapsed);
            }
        }
        let count = batch.min((packets - sent) as usize);
        // SAFETY: `headers[..count]` point at live payloads.
        let rc = unsafe { libc::sendmmsg(socket.as_raw_fd(), headers.as_mut_ptr(), count as u32, 0) };
        if rc < 0 {
            send_errors += 1;
            std::thread::yield_now();
            continue;
        }
        sent += rc as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"sent\":{sent},\"seconds\":{seconds:.4},\"rate\":{:.0},\"send_errors\":{send_errors}}}",
        sent as f64 / seconds
    );
}
