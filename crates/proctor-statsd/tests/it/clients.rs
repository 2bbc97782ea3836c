//! Real client libraries against the server: Python's `statsd` (UDP and TCP clients) and
//! Datadog's `datadog` DogStatsD client (UDP and Unix socket, with tags, `h` and `d` types).
//!
//! Runs when `PROCTOR_STATSD_PYTHON` names a Python that has both packages (set by
//! `scripts/test.d/50-statsd.sh`, which makes the venv); otherwise it prints a SKIP line.

use std::process::Command;

use proctor_statsd::flush::FlushData;

use crate::support::TestServer;

fn python() -> Option<String> {
    let python = std::env::var("PROCTOR_STATSD_PYTHON").ok();
    if python.is_none() {
        eprintln!("SKIP: PROCTOR_STATSD_PYTHON is not set; scripts/test.d/50-statsd.sh makes the venv and sets it");
    }
    python
}

fn run_python(python: &str, script: &str) {
    let output = Command::new(python).arg("-c").arg(script).output().expect("run python");
    assert!(output.status.success(), "python failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn counter(flush: &FlushData, key: &str) -> Option<f64> {
    flush.counters.iter().find(|c| c.key == key).map(|c| c.count)
}

fn gauge(flush: &FlushData, key: &str) -> Option<f64> {
    flush.gauges.iter().find(|g| g.key == key).map(|g| g.value)
}

fn timer_stat(flush: &FlushData, key: &str, stat: &str) -> Option<f64> {
    let timer = flush.timers.iter().find(|t| t.key == key)?;
    timer.stats.iter().find(|(name, _)| name == stat).map(|(_, v)| *v)
}

fn bad_lines(handle: &proctor_statsd::ServerHandle) -> u64 {
    handle.self_metrics().bad_lines.iter().map(|(_, n)| n).sum()
}

fn set_count(flush: &FlushData, key: &str) -> Option<f64> {
    flush.sets.iter().find(|s| s.key == key).map(|s| s.count)
}

#[test]
fn python_statsd_over_udp_and_tcp() {
    let Some(python) = python() else { return };
    let server = TestServer::builder().start();
    let script = format!(
        r#"
import statsd
udp = statsd.StatsClient("127.0.0.1", {udp_port}, prefix="py")
udp.incr("hits", 3)
udp.incr("hits")
udp.decr("hits", 2)
udp.timing("lat", 12)
udp.timing("lat", 30)
udp.gauge("temp", 20)
udp.gauge("temp", -5, delta=True)
udp.set("users", "alice")
udp.set("users", "bob")
udp.set("users", "alice")
tcp = statsd.TCPStatsClient("127.0.0.1", {tcp_port}, prefix="pytcp")
tcp.incr("hits", 7)
tcp.timing("lat", 5)
tcp.gauge("temp", 1.5)
tcp.close()
"#,
        udp_port = server.udp.port(),
        tcp_port = server.tcp.port(),
    );
    run_python(&python, &script);
    server.wait_metrics(13);
    let handle = server.handle.clone();
    server.stop();
    let flush = handle.last_flush().expect("a flush");
    assert_eq!(counter(&flush, "py.hits"), Some(2.0));
    assert_eq!(timer_stat(&flush, "py.lat", "count"), Some(2.0));
    assert_eq!(timer_stat(&flush, "py.lat", "upper"), Some(30.0));
    assert_eq!(gauge(&flush, "py.temp"), Some(15.0));
    assert_eq!(set_count(&flush, "py.users"), Some(2.0));
    assert_eq!(counter(&flush, "pytcp.hits"), Some(7.0));
    assert_eq!(timer_stat(&flush, "pytcp.lat", "mean"), Some(5.0));
    assert_eq!(gauge(&flush, "pytcp.temp"), Some(1.5));
    assert_eq!(bad_lines(&handle), 0);
}

#[test]
fn datadog_dogstatsd_over_udp_and_unix_socket() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let unix_path = dir.path().join("dsd.sock");
    let server = TestServer::builder().unix(&unix_path).start();
    let script = format!(
        r#"
from datadog.dogstatsd import DogStatsd
def client(**where):
    return DogStatsd(disable_telemetry=True, origin_detection_enabled=False, **where)
udp = client(host="127.0.0.1", port={udp_port})
udp.increment("dd.hits", 2, tags=["env:prod", "region:eu"])
udp.increment("dd.hits", 1, tags=["env:prod", "region:eu"])
udp.gauge("dd.temp", 21.5, tags=["room:lab"])
udp.histogram("dd.size", 100)
udp.histogram("dd.size", 300)
udp.distribution("dd.dist", 7)
udp.timing("dd.lat", 40)
udp.set("dd.users", "carol")
udp.flush()
udp.close_socket()
uds = client(socket_path="{unix_path}")
uds.increment("dd.uds", 5)
uds.flush()
uds.close_socket()
"#,
        udp_port = server.udp.port(),
        unix_path = unix_path.display(),
    );
    run_python(&python, &script);
    server.wait_metrics(9);
    let handle = server.handle.clone();
    server.stop();
    let flush = handle.last_flush().expect("a flush");
    assert_eq!(counter(&flush, "dd.hits;env=prod;region=eu"), Some(3.0));
    assert_eq!(gauge(&flush, "dd.temp;room=lab"), Some(21.5));
    // `h` and `d` are timers in proctor (Etsy would count them as counters).
    assert_eq!(timer_stat(&flush, "dd.size", "mean"), Some(200.0));
    assert_eq!(timer_stat(&flush, "dd.dist", "count"), Some(1.0));
    assert_eq!(timer_stat(&flush, "dd.lat", "upper"), Some(40.0));
    assert_eq!(set_count(&flush, "dd.users"), Some(1.0));
    assert_eq!(counter(&flush, "dd.uds"), Some(5.0));
    assert_eq!(bad_lines(&handle), 0);
}
