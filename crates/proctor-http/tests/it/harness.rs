//! A server on 127.0.0.1:0 with its own runtime thread, and a minimal blocking HTTP client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_agent::disk::DiskWatch;
use proctor_agent::{Agent, AgentConfig, Recording};
use proctor_http::prom::MetricsConfig;
use proctor_http::ApiConfig;
use proctor_sampler::SamplerConfig;
use proctor_vocab::jupyter::JupyterConfig;

pub struct Server {
    pub addr: SocketAddr,
    agent: Option<Agent>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub struct Options {
    pub sampler: SamplerConfig,
    pub agent: AgentConfig,
    pub token: Option<&'static str>,
    pub metrics: MetricsConfig,
    /// Record into this store directory (as `proctor serve` does by default).
    pub record: Option<std::path::PathBuf>,
    /// Root of the tree `/api/metrics/v1` reports on (default: this test process).
    pub jupyter_pid: u32,
    /// Which `Host`s are answered (serve's rule for a tokenless loopback bind by default).
    pub hosts: proctor_http::HostRule,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            sampler: SamplerConfig { pss_budget: 0.05, ..SamplerConfig::default() },
            agent: AgentConfig { interval: Duration::from_millis(100), ..AgentConfig::default() },
            token: None,
            metrics: MetricsConfig::default(),
            record: None,
            jupyter_pid: std::process::id(),
            hosts: proctor_http::HostRule::Loopback { also: Vec::new() },
        }
    }
}

impl Server {
    pub fn start(o: Options) -> Server {
        let jupyter = JupyterConfig::new(o.jupyter_pid);
        let recording = match &o.record {
            Some(dir) => {
                let (writer, _) =
                    proctor_store::Writer::open(dir, proctor_store::StoreConfig::default()).expect("open the store");
                Recording::writer(writer)
            }
            None => Recording::Off,
        };
        let agent = Agent::start_recording(o.sampler, o.agent, recording).expect("agent starts");
        let disk = DiskWatch::start(std::path::Path::new("/"), Duration::from_secs(5), Duration::from_secs(2))
            .expect("disk watcher");
        let config = ApiConfig {
            token: o.token.map(Arc::from),
            metrics: o.metrics,
            jupyter,
            disk: Some(Arc::new(disk)),
            extra_metrics: None,
            counters: Arc::default(),
            hosts: o.hosts.clone(),
            alerts: None,
            remote_write: None,
        };
        let counters = Arc::clone(&config.counters);
        let app = proctor_http::router(agent.shared(), config);
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                let limits = proctor_http::ConnLimits::for_this_process();
                proctor_http::serve(
                    listener,
                    app,
                    async move {
                        let _ = rx.await;
                    },
                    limits,
                    counters,
                )
                .await
                .expect("serve");
            });
        });
        Server { addr, agent: Some(agent), stop: Some(tx), thread: Some(thread) }
    }

    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[])
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        request(self.addr, method, path, headers)
    }

    /// Waits until `check` holds for a fresh GET of `path` (at most 10 s).
    pub fn wait_for(&self, path: &str, check: impl Fn(&Response) -> bool) -> Response {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.get(path);
            if check(&r) || Instant::now() > deadline {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(a) = self.agent.take() {
            a.stop();
        }
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status code");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect::<Vec<_>>();
    let chunked = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked { dechunk(body) } else { body.to_string() };
    Response { status, headers, body }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as u64
}

/// Appends samples with the given wall times (one writer session, so one new segment): one real
/// host sample of this machine moved on by 1 s of monotonic time per step, with 10 user and 30
/// idle ticks more each step (busy 25 % after the first); `edit(i, sample)` adds what a test needs.
pub fn write_host_run(dir: &std::path::Path, times_ms: &[u64], mut edit: impl FnMut(u64, &mut proctor_model::Sample)) {
    let (mut writer, _) = proctor_store::Writer::open(dir, proctor_store::StoreConfig::default()).expect("open store");
    let mut sampler =
        proctor_sampler::Sampler::new(SamplerConfig { processes: false, pss_budget: 0.0, ..SamplerConfig::default() });
    let base = sampler.sample();
    for (i, &t) in (0u64..).zip(times_ms) {
        let mut sample = base.clone();
        sample.seq = base.seq + i;
        sample.unix_ns = t * 1_000_000;
        sample.mono_ns = base.mono_ns + i * 1_000_000_000;
        let stat = sample.host.stat.as_mut().expect("/proc/stat");
        stat.total.user += 10 * i;
        stat.total.idle += 30 * i;
        edit(i, &mut sample);
        writer.append(&sample).expect("append");
    }
}

/// A ring of 10 points (50 ms × 500 ms) without processes, recording into `record`, once it
/// has taken `samples` samples.
pub fn small_ring_server(record: Option<&std::path::Path>, samples: u64) -> Server {
    let agent = AgentConfig {
        interval: Duration::from_millis(50),
        history: Duration::from_millis(500),
        ..AgentConfig::default()
    };
    let sampler = SamplerConfig { processes: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let server =
        Server::start(Options { agent, sampler, record: record.map(std::path::Path::to_owned), ..Options::default() });
    server.wait_for("/api/v1/agent", |r| r.json()["samples_total"].as_u64().is_some_and(|n| n >= samples));
    server
}
