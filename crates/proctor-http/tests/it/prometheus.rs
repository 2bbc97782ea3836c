//! A real Prometheus server (Debian's `prometheus`) scrapes the agent on loopback, with a
//! Bearer token, and answers a query about it. Runs when PROCTOR_PROMETHEUS names the binary
//! (scripts/test.d/65-prometheus.sh installs it and sets it).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{request, Options, Server};

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: SIGTERM to the pid we started; Prometheus shuts down its TSDB cleanly on it.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn real_prometheus_scrapes_the_agent_with_a_token() {
    let Ok(binary) = std::env::var("PROCTOR_PROMETHEUS") else {
        eprintln!(
            "SKIP: PROCTOR_PROMETHEUS is unset; scripts/test.d/65-prometheus.sh runs this with Debian's prometheus"
        );
        return;
    };
    let server = Server::start(Options { token: Some("scrape-me"), ..Options::default() });
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: proctor\n    \
             authorization:\n      type: Bearer\n      credentials: scrape-me\n    static_configs:\n      - targets: ['{}']\n",
            server.addr
        ),
    )
    .expect("write config");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={listen}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let prometheus = Prometheus(child);
    let addr: std::net::SocketAddr = listen.parse().expect("addr");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    let mut answered = false;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let Ok(r) =
            std::panic::catch_unwind(|| request(addr, "GET", "/api/v1/query?query=proctor_agent_samples_total", &[]))
        else {
            continue;
        };
        last = r.body.clone();
        if r.status != 200 {
            continue;
        }
        let j = r.json();
        if let Some(v) = j["data"]["result"][0]["value"][1].as_str() {
            assert!(v.parse::<f64>().is_ok_and(|n| n >= 1.0), "{j}");
            answered = true;
            break;
        }
    }
    let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    assert!(
        answered,
        "Prometheus never stored a sample; last answer: {last}\nlog tail: {}",
        &log[log.len().saturating_sub(2000)..]
    );
    let targets = request(addr, "GET", "/api/v1/targets", &[]).json();
    let target = &targets["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{targets}");
    assert_eq!(target["lastError"], "", "{targets}");
    // The series it stored carry our labels, escaped and parsed back.
    let cpu = request(addr, "GET", "/api/v1/query?query=count(proctor_host_cpu_seconds_total)", &[]).json();
    let n: f64 = cpu["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    assert!(n >= 8.0, "8 modes per CPU: {cpu}");
    drop(prometheus);
}
