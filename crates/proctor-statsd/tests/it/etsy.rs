//! Side by side with the real Etsy statsd 0.9.0: the same packets to both, each flushing to its
//! own loopback Graphite sink, and the Graphite lines must be equal.
//!
//! Runs when `PROCTOR_ETSY_STATSD` names Etsy's `stats.js` (set by `scripts/test.d/50-statsd.sh`,
//! which installs `statsd@0.9.0`); otherwise it prints a SKIP line. Values that measure time
//! (`calculationtime`, `processing_time`, `timestamp_lag`, the backend's `last_flush`,
//! `flush_time`, `flush_length`) and timestamps are masked; every other value is compared as
//! text, so number formatting counts too. Lines are compared as sorted sets, because Graphite
//! does not care about order and Etsy's follows JavaScript property order.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};

use proctor_statsd::flush::{Bin, HistogramSpec};
use proctor_statsd::graphite::GraphiteNaming;
use proctor_statsd::{FlushConfig, IdlePolicy};

use crate::support::{admin_list, wait_for, GraphiteSink, TestServer};

const FLUSH_MS: u64 = 2000;

struct Etsy {
    child: Child,
    udp: SocketAddr,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Etsy {
    fn drop(&mut self) {
        // Only the process this test started, by its own handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn start_etsy(stats_js: &str, sink: SocketAddr, extra: serde_json::Value) -> Etsy {
    let dir = tempfile::tempdir().expect("tempdir");
    let (udp_port, admin_port) = (free_udp_port(), free_tcp_port());
    let mut config = serde_json::json!({
        "address": "127.0.0.1",
        "port": udp_port,
        "mgmt_address": "127.0.0.1",
        "mgmt_port": admin_port,
        "flushInterval": FLUSH_MS,
        "graphiteHost": "127.0.0.1",
        "graphitePort": sink.port(),
        "percentThreshold": [90, -10, 50.5, 99],
        "histogram": [
            {"metric": "hist", "bins": [0.5, 10, 100, "inf"]},
            {"metric": "lat", "bins": [1, 5]},
        ],
    });
    if let (Some(base), serde_json::Value::Object(extra)) = (config.as_object_mut(), extra) {
        base.extend(extra);
    }
    let path = dir.path().join("config.js");
    std::fs::write(&path, config.to_string()).expect("write config");
    let log = std::fs::File::create(dir.path().join("etsy.log")).expect("log");
    let child = Command::new(std::env::var("PROCTOR_NODE").unwrap_or_else(|_| "node".to_owned()))
        .arg(stats_js)
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start node");
    let etsy = Etsy {
        child,
        udp: SocketAddr::from(([127, 0, 0, 1], udp_port)),
        admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
        _dir: dir,
    };
    wait_for("etsy statsd's admin port", || std::net::TcpStream::connect(etsy.admin).is_ok());
    etsy
}

/// The packets both servers get: every feature where proctor claims Etsy's behaviour.
fn corpus() -> Vec<String> {
    let mut packets: Vec<String> = [
        "c.basic:1|c",
        "c.basic:2|c:3|c",
        "c.rate:1|c|@0.1",
        "c.rate:5|c|@0.25",
        "c.big:1e21|c",
        "c.tiny:0.0000001|c",
        "c.hex:0x10|c",
        "c.space: 7 |c",
        "g.set:10|g",
        "g.set:+5|g",
        "g.set:-3|g",
        "g.zero:0|g",
        "g.zero:+4|g",
        "g.neg:-5|g",
        "g.frac:0.1|g",
        "g.frac:+0.2|g",
        "lat.one:42|ms",
        "lat.rate:3|ms|@0.5",
        "lat.multi:1|ms:2|ms:3.5|ms",
        "s.users:alice|s",
        "s.users:bob|s",
        "s.users:alice|s",
        "s.empty:|s",
        "tagged:1|c|#env:prod,region:eu-west",
        "tagged.t:5|ms|#a:b",
        "tagged.g:3|g|#x;y:z",
        "weird key/with$chars:1|c",
        "tabs\tand  spaces:2|c",
        "nonsense",
        "a:abc|c",
        "b:-1|ms",
        "c:1|c|@x",
        "d:1|c|@-1",
        "m1:1|c\nm2:2|c\n\nm3:3|ms\n",
        "crlf:1|c\r\n",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // Enough samples for every percentile to differ, with values whose sums round.
    for i in 0..60u32 {
        packets.push(format!("lat.many:{}|ms", f64::from((i * 37) % 101) * 0.7 + 0.01));
        packets.push(format!("hist.req:{}|ms", f64::from((i * 53) % 97) * 1.3));
    }
    packets
}

fn line_count(packets: &[String]) -> u64 {
    packets.iter().map(|p| p.split('\n').filter(|l| !l.is_empty()).count() as u64).sum()
}

fn metrics_received(admin_address: SocketAddr) -> Option<u64> {
    let reply = admin_list(admin_address, "counters");
    let line = reply.lines().find(|l| l.contains("statsd.metrics_received'"))?;
    line.split(':').nth(1)?.trim().trim_end_matches(',').parse().ok()
}

/// The Graphite lines of the first payload whose `metrics_received` count is `lines`.
fn payload_with(sink: &GraphiteSink, lines: u64) -> Vec<String> {
    loop {
        let payload = sink.next_payload();
        let has_all = payload.lines().any(|line| {
            let mut fields = line.split(' ');
            let name = fields.next().unwrap_or("");
            let value = fields.next().unwrap_or("");
            name.contains("statsd.metrics_received")
                && (name.starts_with("stats_counts.") || name.contains(".count"))
                && value == lines.to_string()
        });
        if has_all {
            return normalise(&payload);
        }
    }
}

fn normalise(payload: &str) -> Vec<String> {
    const TIMING: [&str; 6] = [
        "calculationtime",
        "processing_time",
        "timestamp_lag",
        "graphiteStats.last_flush",
        "flush_time",
        "flush_length",
    ];
    let mut lines: Vec<String> = payload
        .lines()
        .map(|line| {
            let mut fields = line.split(' ');
            let name = fields.next().unwrap_or("");
            let value = fields.next().unwrap_or("");
            if TIMING.iter().any(|t| name.contains(t)) {
                format!("{name} *")
            } else {
                format!("{name} {value}")
            }
        })
        .collect();
    lines.sort();
    lines
}

fn compare(extra: serde_json::Value, naming: GraphiteNaming, idle: IdlePolicy) {
    let Ok(stats_js) = std::env::var("PROCTOR_ETSY_STATSD") else {
        eprintln!("SKIP: PROCTOR_ETSY_STATSD is not set; scripts/test.d/50-statsd.sh installs Etsy statsd and sets it");
        return;
    };
    let packets = corpus();
    let lines = line_count(&packets);
    let client = UdpSocket::bind("127.0.0.1:0").expect("bind client");
    for attempt in 1..=5 {
        // Fresh servers for every attempt: gauges keep their value across flushes, so a round
        // split by a flush leaves the two servers' gauges apart for every later round.
        let etsy_sink = GraphiteSink::start();
        let proctor_sink = GraphiteSink::start();
        let etsy = start_etsy(&stats_js, etsy_sink.address(), extra.clone());
        let flush = FlushConfig {
            interval_ms: FLUSH_MS,
            percent_thresholds: vec![90.0, -10.0, 50.5, 99.0],
            histograms: vec![
                HistogramSpec {
                    metric: "hist".into(),
                    bins: vec![Bin::Below(0.5), Bin::Below(10.0), Bin::Below(100.0), Bin::Inf],
                },
                HistogramSpec { metric: "lat".into(), bins: vec![Bin::Below(1.0), Bin::Below(5.0)] },
            ],
        };
        let mut builder = TestServer::builder().flush(flush).graphite_named(proctor_sink.address(), naming.clone());
        builder = builder.prefix_stats(&naming.prefix_stats).idle(idle);
        let proctor = builder.start();
        // Compare steady-state flushes: from the second flush on both also send timestamp_lag.
        etsy_sink.next_payload();
        proctor_sink.next_payload();

        // Start right after proctor flushed, so its window is fresh.
        proctor_sink.next_payload();
        etsy_sink.drain();
        for packet in &packets {
            client.send_to(packet.as_bytes(), etsy.udp).expect("send etsy");
            client.send_to(packet.as_bytes(), proctor.udp).expect("send proctor");
        }
        let mut complete = false;
        wait_for("both servers to count the round", || {
            let etsy_count = metrics_received(etsy.admin).unwrap_or(0);
            let proctor_count = metrics_received(proctor.admin).unwrap_or(0);
            if etsy_count == lines && proctor_count == lines {
                complete = true;
                return true;
            }
            // A flush between two packets splits the round over two windows: try again.
            etsy_count > lines || proctor_count > lines || etsy_sink_or_proctor_flushed(&etsy_sink, &proctor_sink)
        });
        if complete {
            let expected = payload_with(&etsy_sink, lines);
            let actual = payload_with(&proctor_sink, lines);
            // The corpus yields well over a hundred lines; fewer means the comparison is hollow.
            assert!(expected.len() > 150, "only {} lines from Etsy", expected.len());
            let only_proctor: Vec<&String> = actual.iter().filter(|line| !expected.contains(line)).collect();
            let only_etsy: Vec<&String> = expected.iter().filter(|line| !actual.contains(line)).collect();
            assert!(
                only_proctor.is_empty() && only_etsy.is_empty() && actual.len() == expected.len(),
                "proctor and Etsy statsd 0.9.0 differ\nonly proctor: {only_proctor:#?}\nonly etsy: {only_etsy:#?}"
            );
            return;
        }
        eprintln!("round {attempt} was split by a flush; sending again");
    }
    panic!("no round fitted in one flush window of both servers");
}

fn etsy_sink_or_proctor_flushed(etsy: &GraphiteSink, proctor: &GraphiteSink) -> bool {
    etsy.has_payload() || proctor.has_payload()
}

#[test]
fn graphite_lines_equal_etsy_legacy_namespace() {
    compare(serde_json::json!({}), GraphiteNaming::default(), IdlePolicy::default());
}

#[test]
fn graphite_lines_equal_etsy_new_namespace_prefixes_suffix_and_delete_idle() {
    let extra = serde_json::json!({
        "prefixStats": "mystatsd",
        "deleteIdleStats": true,
        "graphite": {
            "legacyNamespace": false,
            "globalPrefix": "app",
            "prefixCounter": "cnt",
            "prefixTimer": "",
            "globalSuffix": "sfx",
        },
    });
    let naming = GraphiteNaming {
        legacy_namespace: false,
        global_prefix: "app".into(),
        prefix_counter: "cnt".into(),
        prefix_timer: "".into(),
        global_suffix: Some("sfx".into()),
        prefix_stats: "mystatsd".into(),
        ..GraphiteNaming::default()
    };
    let idle = IdlePolicy { counters: 1, timers: 1, sets: 1, gauges: 1 };
    compare(extra, naming, idle);
}
