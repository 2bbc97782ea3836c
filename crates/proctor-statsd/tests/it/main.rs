//! Integration tests of `proctor-statsd`: the server over real loopback sockets, a Graphite sink
//! written here, the admin interface, and (when `scripts/test.d/50-statsd.sh` provides them)
//! the real Etsy statsd 0.9.0 and the Python `statsd` and `datadog` clients.

mod clients;
mod etsy;
mod support;

use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use proctor_statsd::graphite::{GraphiteBackend, GraphiteConfig};
use proctor_statsd::Backend;

use support::{admin, send_tcp, GraphiteSink, TestServer};

#[test]
fn udp_tcp_and_unix_lines_reach_graphite() {
    let sink = GraphiteSink::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let unix_path = dir.path().join("statsd.sock");
    let server = TestServer::builder().graphite(sink.address()).unix(&unix_path).start();

    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.send_to(b"u.c:1|c\nu.c:2|c|@0.5\ng:5|g\ng:+2|g", server.udp).expect("send");
    udp.send_to(b"t:10|ms:20|ms:30|ms\ns:a|s\ns:b|s\ns:a|s\nbroken", server.udp).expect("send");
    send_tcp(server.tcp, b"tcp.c:3|c\ntcp.c:4|c\nlast:1|c");
    UnixDatagram::unbound().expect("unix").send_to(b"unix.g:-1|g", &unix_path).expect("send");
    server.wait_metrics(13);
    let stats = admin(server.admin, "stats");
    assert!(stats.contains("graphite.last_exception: 0\n"), "{stats}");
    let lines = server.stop_and_take_flush(&sink);

    for expected in [
        "stats_counts.u.c 5",
        "stats.gauges.g 7",
        "stats.timers.t.upper_90 30",
        "stats.timers.t.mean 20",
        "stats.timers.t.count 3",
        "stats.sets.s.count 2",
        "stats_counts.tcp.c 7",
        "stats_counts.last 1",
        "stats.gauges.unix.g -1",
        "stats_counts.statsd.bad_lines_seen 1",
        "stats_counts.statsd.metrics_received 13",
    ] {
        assert!(lines.iter().any(|line| line == expected), "missing {expected:?} in {lines:#?}");
    }
}

/// A Graphite backend pointed at a loopback port that nothing listens on (bound, then closed).
fn graphite_that_is_down(max_pending_bytes: usize) -> (std::net::SocketAddr, GraphiteBackend) {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let mut config = GraphiteConfig::new(closed.to_string());
    config.connect_timeout = Duration::from_millis(200);
    config.max_pending_bytes = max_pending_bytes;
    (closed, GraphiteBackend::new(config, 0))
}

#[test]
fn a_graphite_that_is_down_loses_nothing_until_the_buffer_is_full() {
    let (closed, mut backend) = graphite_that_is_down(8 << 20);
    let counters = backend.counters();
    let data = support::flush_with_counter("down.c", 1.0, 100);
    assert!(backend.flush(&data, 100).is_err());
    assert!(backend.flush(&support::flush_with_counter("down.c", 2.0, 110), 110).is_err());
    assert_eq!(counters.failed_sends.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(counters.dropped_lines.load(std::sync::atomic::Ordering::Relaxed), 0);

    // Graphite comes back on the same port: both waiting payloads go out, in order.
    let sink = GraphiteSink::start_on(closed);
    backend.flush(&support::flush_with_counter("down.c", 3.0, 120), 120).expect("sent");
    let payload = sink.next_payload();
    let counts: Vec<&str> = payload.lines().filter(|l| l.starts_with("stats_counts.down.c ")).collect();
    assert_eq!(counts, ["stats_counts.down.c 1 100", "stats_counts.down.c 2 110", "stats_counts.down.c 3 120"]);
}

#[test]
fn a_full_retry_buffer_drops_the_oldest_flush_and_counts_its_lines() {
    // A 1-byte buffer keeps only the newest payload.
    let (_closed, mut backend) = graphite_that_is_down(1);
    let counters = backend.counters();
    let data = support::flush_with_counter("c", 1.0, 100);
    let lines_per_flush =
        proctor_statsd::graphite::render(&data, &Default::default(), &Default::default(), 0.0).lines().count() as u64;
    for _ in 0..3 {
        assert!(backend.flush(&data, 100).is_err());
    }
    assert_eq!(counters.dropped_lines.load(std::sync::atomic::Ordering::Relaxed), 2 * lines_per_flush);
}

#[test]
fn admin_commands_answer_like_etsy() {
    let server = TestServer::builder().start();
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.send_to(b"app.a:1|c\napp.b:2|c\nother:3|c\nlat:5|ms\ntemp:7|g\nnope", server.udp).expect("send");
    server.wait_metrics(6);

    assert_eq!(admin(server.admin, "health"), "health: up\n");
    assert_eq!(admin(server.admin, "health down"), "health: down\n");
    assert_eq!(admin(server.admin, "health"), "health: down\n");
    assert_eq!(admin(server.admin, "bogus"), "ERROR\n");
    assert!(admin(server.admin, "help").starts_with("Commands: stats, counters"));
    let counters = admin(server.admin, "counters");
    assert!(counters.contains("'app.a': 1,"), "{counters}");
    assert!(counters.contains("'statsd.bad_lines_seen': 1,"), "{counters}");
    assert!(admin(server.admin, "timers").contains("'lat': [ 5 ]"));
    assert!(admin(server.admin, "gauges").contains("'temp': 7"));
    let deleted = admin(server.admin, "delcounters app.* missing");
    assert!(deleted.contains("deleted: app.a\n") && deleted.contains("deleted: app.b\n"), "{deleted}");
    assert!(deleted.contains("metric missing not found\n") && deleted.ends_with("END\n\n"), "{deleted}");
    assert!(!admin(server.admin, "counters").contains("app.a"));
    let stats = admin(server.admin, "stats");
    assert!(stats.contains("messages.bad_lines_seen: 1\n"), "{stats}");
    assert!(stats.contains("proctor.packets_received: 1\n"), "{stats}");
    assert!(stats.contains("proctor.kernel_dropped_packets: 0\n"), "{stats}");
    assert!(!stats.contains("graphite."), "no graphite backend, no graphite lines: {stats}");
    server.stop();
}

#[test]
fn self_metrics_count_what_was_refused() {
    let server = TestServer::builder().max_keys(2).start();
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.send_to(b"k1:1|c\nk2:1|c\nk3:1|c\nx:1|c|@0\ny:Infinity|g\nz:1|q", server.udp).expect("send");
    server.wait_metrics(6);
    let handle = server.handle.clone();
    server.stop();
    let metrics = handle.self_metrics();
    assert_eq!(metrics.key_limit_dropped_metrics, 1);
    let bad: Vec<(&str, u64)> =
        metrics.bad_lines.iter().filter(|(_, n)| *n > 0).map(|(r, n)| (r.as_str(), *n)).collect();
    assert_eq!(bad, [("unknown_type", 1), ("not_finite", 1), ("bad_sample_rate", 1)]);
    let series = metrics.series();
    assert!(series.iter().all(|s| s.name.starts_with("proctor_statsd_")));
    assert!(series.iter().any(|s| s.name == "proctor_statsd_bad_lines_total" && s.value == 1.0));
    let flush = handle.last_flush().expect("final flush");
    let keys: Vec<&str> = flush.counters.iter().map(|c| c.key.as_str()).filter(|k| k.starts_with('k')).collect();
    assert_eq!(keys.len(), 2);
}
