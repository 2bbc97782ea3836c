//! Delivery: one thread and one bounded queue per receiver, so a slow or failing receiver
//! delays only itself and never the evaluation, the sampler or the HTTP server. HTTP receivers
//! are retried with exponential backoff on a connection error, a 5xx or a 429; any other 4xx
//! is given up at once. A command (`exec`) runs once with a timeout, the events on its stdin.
//! Everything is counted.
//!
//! Nothing waits on a receiver without bound: each attempt has the timeout as its deadline
//! (connect to the response's end), a reload retires the receivers it removed without waiting
//! for them, and a stop gives the queues [`DeliveryConfig::shutdown_grace`] in all, then drops
//! what is left and says so.
//!
//! HTTP goes through `proctor-probe`'s client (the same TCP + rustls code as `proctor probe`).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver as Rx, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proctor_client::client::{Client, ClientConfig};
use proctor_client::http::RequestSpec;
use proctor_client::tls::{TlsConfig, Trust};
use serde::Serialize;

use crate::rules::Receiver;

/// What is sent: the body for HTTP receivers; for a command, the environment and the body on
/// its stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub body: Vec<u8>,
    pub env: Vec<(String, String)>,
}

/// A receiver's counters, as `/api/v1/alerts` and `/metrics` show them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReceiverStats {
    pub kind: &'static str,
    pub target: String,
    /// Payloads the receiver took (a 2xx, or a command that exited 0).
    pub delivered_total: u64,
    /// Attempts that failed (each retry that failed counts).
    pub failed_attempts_total: u64,
    pub retries_total: u64,
    /// Payloads given up: refused with a 4xx, out of attempts, or a failed command.
    pub given_up_total: u64,
    /// Payloads dropped because its queue was full.
    pub dropped_total: u64,
    pub queued: u64,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub last_delivered_at: Option<String>,
}

/// Delivery knobs; tests shorten the backoff.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub queue: usize,
    pub max_attempts: u32,
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    pub timeout: Duration,
    /// How long a stop waits for the queues in all: payloads not sent by then are dropped and
    /// reported, so a receiver that never answers cannot hold a shutdown.
    pub shutdown_grace: Duration,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            queue: 256,
            max_attempts: 6,
            backoff_first: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// When a worker is to stop: `None` while it runs; then the deadline after which it drops what
/// it still holds. Set by [`Delivery`], read by the worker between payloads and attempts.
type StopAt = Arc<Mutex<Option<Instant>>>;

struct Worker {
    receiver: Receiver,
    tx: Option<SyncSender<Payload>>,
    stats: Arc<Mutex<ReceiverStats>>,
    /// Payloads taken off the queue and not yet finished with (0 or 1).
    in_flight: Arc<AtomicU64>,
    /// Payloads the worker dropped because its stop deadline had passed.
    dropped_at_stop: Arc<AtomicU64>,
    stop: StopAt,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn start(r: &Receiver, config: &DeliveryConfig) -> Worker {
        let (tx, rx) = sync_channel::<Payload>(config.queue.max(1));
        let stats = Arc::new(Mutex::new(ReceiverStats { kind: r.kind(), target: r.target(), ..Default::default() }));
        let (in_flight, dropped_at_stop, stop) = (Arc::default(), Arc::default(), StopAt::default());
        let shared = Shared {
            stats: Arc::clone(&stats),
            in_flight: Arc::clone(&in_flight),
            dropped_at_stop: Arc::clone(&dropped_at_stop),
            stop: Arc::clone(&stop),
        };
        let (receiver, cfg) = (r.clone(), config.clone());
        let thread = std::thread::Builder::new()
            .name(format!("alerts-{}", r.kind()))
            .spawn(move || run(receiver, rx, shared, cfg))
            .ok();
        if thread.is_none() {
            lock(&stats).last_error = Some("could not start its thread".to_string());
        }
        Worker { receiver: r.clone(), tx: Some(tx), stats, in_flight, dropped_at_stop, stop, thread }
    }

    /// Tells the thread to finish by `deadline` and closes its queue; does not wait.
    fn retire(&mut self, deadline: Instant) {
        *lock(&self.stop) = Some(deadline);
        self.tx = None;
    }

    /// What it did not deliver: dropped at its deadline, and (if its thread is still inside an
    /// attempt, past waiting for) what it held. `None` when nothing was left.
    fn undelivered(&self) -> Option<String> {
        let finished = self.thread.as_ref().is_none_or(JoinHandle::is_finished);
        let s = lock(&self.stats);
        let mut lost = self.dropped_at_stop.load(Ordering::Relaxed);
        if !finished {
            lost += s.queued + self.in_flight.load(Ordering::Relaxed);
        }
        (lost > 0).then(|| {
            let why = s.last_error.as_deref().map_or(String::new(), |e| format!(" (last error: {e})"));
            format!("alerts: {} {}: {lost} notification(s) not delivered, dropped at stop{why}", s.kind, s.target)
        })
    }
}

/// The worker's side of its [`Worker`].
struct Shared {
    stats: Arc<Mutex<ReceiverStats>>,
    in_flight: Arc<AtomicU64>,
    dropped_at_stop: Arc<AtomicU64>,
    stop: StopAt,
}

/// The receivers' threads.
pub struct Delivery {
    workers: Vec<Worker>,
    /// Workers of receivers a reload removed, finishing within the grace on their own; only
    /// kept to be reported at the stop.
    retired: Vec<Worker>,
    config: DeliveryConfig,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery").field("receivers", &self.workers.len()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_text() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    crate::notify::rfc3339(secs)
}

impl Delivery {
    pub fn start(receivers: &[Receiver], config: &DeliveryConfig) -> Delivery {
        let workers = receivers.iter().map(|r| Worker::start(r, config)).collect();
        Delivery { workers, retired: Vec::new(), config: config.clone() }
    }

    /// Takes a new list of receivers (a reload) without waiting on any delivery: a receiver
    /// that stays keeps its thread, queue and counters; a new one gets a thread; one no longer
    /// listed is retired: it has the shutdown grace to send what it holds, on its own thread.
    pub fn reconfigure(&mut self, receivers: &[Receiver]) {
        let mut old: Vec<Option<Worker>> = std::mem::take(&mut self.workers).into_iter().map(Some).collect();
        for r in receivers {
            let kept = old.iter_mut().find(|w| w.as_ref().is_some_and(|w| &w.receiver == r)).and_then(Option::take);
            self.workers.push(kept.unwrap_or_else(|| Worker::start(r, &self.config)));
        }
        let deadline = Instant::now() + self.config.shutdown_grace;
        // Retired workers that have finished and lost nothing are forgotten, so reloads do not
        // pile them up.
        self.retired.retain(|w| w.undelivered().is_some() || !w.thread.as_ref().is_none_or(JoinHandle::is_finished));
        for mut w in old.into_iter().flatten() {
            w.retire(deadline);
            self.retired.push(w);
        }
    }

    pub fn receivers(&self) -> impl Iterator<Item = (usize, &Receiver)> {
        self.workers.iter().enumerate().map(|(i, w)| (i, &w.receiver))
    }

    /// Queues `payload` for receiver `index` without waiting; a full queue drops it, counted.
    pub fn send(&self, index: usize, payload: Payload) {
        let Some(w) = self.workers.get(index) else { return };
        let Some(tx) = &w.tx else { return };
        // Counted under the lock the worker takes to count it out: a worker quicker than this
        // thread would otherwise count it out before it was counted in, and `queued` stay one
        // too high for good.
        let mut s = lock(&w.stats);
        match tx.try_send(payload) {
            Ok(()) => s.queued += 1,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                s.dropped_total += 1;
                s.last_error = Some("queue full: the receiver is slower than the alerts".to_string());
            }
        }
    }

    pub fn stats(&self) -> Vec<ReceiverStats> {
        self.workers.iter().map(|w| lock(&w.stats).clone()).collect()
    }

    /// Stops taking payloads and gives the queues the shutdown grace to send what they hold
    /// (one attempt each, no retries); what is left then is dropped. Returns a line for each
    /// receiver that lost notifications so, for the log.
    pub fn stop(mut self) -> Vec<String> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Vec<String> {
        let deadline = Instant::now() + self.config.shutdown_grace;
        for w in &mut self.workers {
            w.retire(deadline);
        }
        // A thread inside an attempt that began before the stop may outlive the grace by up to
        // the timeout: it is not waited for past the deadline (and what it held is reported).
        let all = || self.workers.iter().chain(&self.retired);
        while Instant::now() < deadline && !all().all(|w| w.thread.as_ref().is_none_or(JoinHandle::is_finished)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let lines = all().filter_map(Worker::undelivered).collect();
        for w in self.workers.iter_mut().chain(&mut self.retired) {
            if let Some(t) = w.thread.take_if(|t| t.is_finished()) {
                let _ = t.join();
            }
        }
        self.workers.clear();
        self.retired.clear();
        lines
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn run(receiver: Receiver, rx: Rx<Payload>, shared: Shared, config: DeliveryConfig) {
    let Shared { stats, in_flight, dropped_at_stop, stop } = shared;
    let tls = match &receiver {
        Receiver::Webhook(u) | Receiver::Slack(u) | Receiver::Alertmanager(u) if u.starts_with("https") => {
            match TlsConfig::new(Trust::WebpkiRoots) {
                Ok(t) => Some(t),
                Err(e) => {
                    lock(&stats).last_error = Some(format!("TLS: {e}"));
                    None
                }
            }
        }
        _ => None,
    };
    let stop_at = || *lock(&stop);
    let stopping = || stop_at().is_some();
    // An attempt's timeout: its own, cut to what is left of the stop's grace.
    let within = |timeout: Duration| match stop_at() {
        Some(deadline) => timeout.min(deadline.saturating_duration_since(Instant::now())),
        None => timeout,
    };
    loop {
        let payload = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(p) => p,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // Moved between the counts under the stats lock, which `undelivered` reads them under:
        // a payload is queued, in flight or dropped, never two at once nor none.
        {
            let mut s = lock(&stats);
            s.queued = s.queued.saturating_sub(1);
            in_flight.store(1, Ordering::Relaxed);
        }
        if stop_at().is_some_and(|deadline| Instant::now() >= deadline) {
            let mut s = lock(&stats);
            s.dropped_total += 1;
            dropped_at_stop.fetch_add(1, Ordering::Relaxed);
            in_flight.store(0, Ordering::Relaxed);
            continue;
        }
        let mut wait = config.backoff_first;
        for attempt in 1..=config.max_attempts.max(1) {
            let result = match &receiver {
                Receiver::Exec { argv, timeout_secs } => {
                    run_command(argv, &payload.env, &payload.body, within(Duration::from_secs_f64(*timeout_secs)))
                }
                Receiver::Alertmanager(url) => {
                    post(&alertmanager_url(url), &payload.body, tls.as_ref(), within(config.timeout))
                }
                Receiver::Webhook(url) | Receiver::Slack(url) => {
                    post(url, &payload.body, tls.as_ref(), within(config.timeout))
                }
            };
            let mut s = lock(&stats);
            match result {
                Attempt::Delivered(status) => {
                    s.delivered_total += 1;
                    s.last_status = status;
                    s.last_delivered_at = Some(now_text());
                    break;
                }
                Attempt::Refused(status, why) => {
                    s.failed_attempts_total += 1;
                    s.given_up_total += 1;
                    s.last_status = Some(status);
                    s.last_error = Some(why);
                    break;
                }
                Attempt::Failed(status, why) => {
                    s.failed_attempts_total += 1;
                    s.last_status = status;
                    s.last_error = Some(why);
                    let once = matches!(receiver, Receiver::Exec { .. });
                    if once || attempt == config.max_attempts || stopping() {
                        s.given_up_total += 1;
                        break;
                    }
                    s.retries_total += 1;
                }
            }
            drop(s);
            // Backoff, cut short by a stop.
            let until = Instant::now() + wait;
            while Instant::now() < until && !stopping() {
                std::thread::sleep(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
            }
            wait = (wait * 2).min(config.backoff_max);
        }
        in_flight.store(0, Ordering::Relaxed);
    }
}

enum Attempt {
    Delivered(Option<u16>),
    /// Refused for good (a 4xx other than 429).
    Refused(u16, String),
    /// Worth another try (no connection, a 5xx, a 429, a command that failed).
    Failed(Option<u16>, String),
}

/// `POST /api/v2/alerts` under the URL given, unless the URL already names it.
pub fn alertmanager_url(url: &str) -> String {
    if url.trim_end_matches('/').ends_with("/api/v2/alerts") {
        url.to_string()
    } else {
        format!("{}/api/v2/alerts", url.trim_end_matches('/'))
    }
}

fn post(url: &str, body: &[u8], tls: Option<&TlsConfig>, timeout: Duration) -> Attempt {
    let target = match proctor_client::url::parse(url) {
        Ok(t) => t,
        Err(e) => return Attempt::Refused(0, format!("{url}: {e}")),
    };
    if target.tls && tls.is_none() {
        return Attempt::Failed(None, "no TLS configuration".to_string());
    }
    let config = Arc::new(ClientConfig {
        target,
        request: RequestSpec {
            method: "POST".to_string(),
            headers: vec![("Content-Type".to_string(), "application/json".to_string())],
            body: body.to_vec(),
            close: true,
        },
        timeout,
        reuse: false,
        tls: tls.cloned(),
    });
    let outcome = Client::new(config).request();
    match outcome.status {
        Some(status) if (200..300).contains(&status) => Attempt::Delivered(Some(status)),
        Some(429) => Attempt::Failed(Some(429), "429 Too Many Requests".to_string()),
        Some(status) if (400..500).contains(&status) => Attempt::Refused(status, format!("refused with HTTP {status}")),
        Some(status) => Attempt::Failed(Some(status), format!("HTTP {status}")),
        None => {
            let why = outcome
                .error
                .map_or_else(|| "no response".to_string(), |(class, detail)| format!("{class:?}: {detail}"));
            Attempt::Failed(None, why)
        }
    }
}

/// Runs `argv` (no shell) with `env` added and `input` on its stdin, for at most `timeout`;
/// killed (by the pid it was started as) if it runs longer. The input goes through a
/// non-blocking pipe from this loop, so a command that never reads it only loses it (its stdin
/// is closed when it exits or is killed); the events are never put in argv or the environment,
/// whose size the kernel limits (`E2BIG`).
fn run_command(argv: &[String], env: &[(String, String)], input: &[u8], timeout: Duration) -> Attempt {
    use std::os::fd::AsRawFd;
    let Some((program, args)) = argv.split_first() else {
        return Attempt::Refused(0, "an empty command".to_string());
    };
    let child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Attempt::Failed(None, format!("{program}: {e}")),
    };
    let mut stdin = child.stdin.take().filter(|pipe| {
        // SAFETY: fcntl on a pipe this function owns; only its status flags change.
        unsafe {
            let fd = pipe.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        }
    });
    let mut unsent = input;
    let started = Instant::now();
    loop {
        // As much of the input as the pipe takes now; closed once all is written (the
        // command's EOF) or the command stopped reading it (EPIPE: SIGPIPE is ignored).
        if let Some(pipe) = stdin.as_mut() {
            use std::io::Write;
            match pipe.write(unsent) {
                Ok(n) => unsent = &unsent[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => unsent = &[],
            }
            if unsent.is_empty() {
                stdin = None;
            }
        }
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Attempt::Delivered(None),
            Ok(Some(status)) => return Attempt::Failed(None, format!("{program} exited with {status}")),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Attempt::Failed(
                    None,
                    format!("{program} ran past its {} s timeout and was killed", timeout.as_secs_f64()),
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(if stdin.is_some() { 1 } else { 10 })),
            Err(e) => return Attempt::Failed(None, format!("{program}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A loopback HTTP server answering each request with the next status of `statuses`, and
    /// counting what it got.
    fn server(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&got);
        std::thread::spawn(move || {
            for (stream, status) in listener.incoming().zip(statuses) {
                let Ok(mut stream) = stream else { continue };
                let mut buf = vec![0u8; 65536];
                let mut text = String::new();
                // Read the head, then the body by Content-Length.
                while !text.contains("\r\n\r\n") {
                    let Ok(n) = stream.read(&mut buf) else { break };
                    if n == 0 {
                        break;
                    }
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0);
                while text.split("\r\n\r\n").nth(1).map_or(0, str::len) < len {
                    let Ok(n) = stream.read(&mut buf) else { break };
                    if n == 0 {
                        break;
                    }
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
                lock(&seen).push(text);
                let _ = write!(stream, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        (url, got)
    }

    fn quick() -> DeliveryConfig {
        DeliveryConfig {
            backoff_first: Duration::from_millis(10),
            backoff_max: Duration::from_millis(40),
            max_attempts: 4,
            ..DeliveryConfig::default()
        }
    }

    fn wait_for(d: &Delivery, done: impl Fn(&ReceiverStats) -> bool) -> ReceiverStats {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let s = d.stats().remove(0);
            if done(&s) || Instant::now() > until {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_5xx_is_retried_with_backoff_and_a_4xx_is_given_up() {
        let (url, got) = server(vec![503, 500, 200, 400]);
        let d = Delivery::start(&[Receiver::Webhook(url)], &quick());
        d.send(0, Payload { body: b"{\"n\":1}".to_vec(), env: vec![] });
        let s = wait_for(&d, |s| s.delivered_total == 1);
        assert_eq!((s.delivered_total, s.failed_attempts_total, s.retries_total), (1, 2, 2), "{s:?}");
        d.send(0, Payload { body: b"{\"n\":2}".to_vec(), env: vec![] });
        let s = wait_for(&d, |s| s.given_up_total == 1);
        assert_eq!((s.given_up_total, s.last_status), (1, Some(400)), "{s:?}");
        let got = lock(&got).clone();
        assert_eq!(got.len(), 4);
        assert!(got[0].starts_with("POST /hook HTTP/1.1") && got[0].ends_with("{\"n\":1}"), "{}", got[0]);
        assert!(got[0].to_ascii_lowercase().contains("content-type: application/json"));
    }

    #[test]
    fn an_unreachable_receiver_is_counted_and_given_up() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        drop(listener);
        let d = Delivery::start(&[Receiver::Webhook(url)], &quick());
        d.send(0, Payload { body: b"{}".to_vec(), env: vec![] });
        let s = wait_for(&d, |s| s.given_up_total == 1);
        assert_eq!((s.failed_attempts_total, s.retries_total, s.given_up_total), (4, 3, 1), "{s:?}");
        assert!(s.last_error.as_deref().is_some_and(|e| e.contains("Refused")), "{s:?}");
    }

    #[test]
    fn a_command_gets_the_values_in_its_environment_and_a_timeout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let script = format!("echo \"$PROCTOR_ALERT_RULE $PROCTOR_ALERT_STATE\" > {}", out.display());
        let d = Delivery::start(
            &[
                Receiver::Exec { argv: vec!["sh".into(), "-c".into(), script], timeout_secs: 5.0 },
                Receiver::Exec { argv: vec!["sleep".into(), "10".into()], timeout_secs: 0.2 },
            ],
            &quick(),
        );
        let env = vec![
            ("PROCTOR_ALERT_RULE".to_string(), "Busy".to_string()),
            ("PROCTOR_ALERT_STATE".to_string(), "firing".to_string()),
        ];
        d.send(0, Payload { body: vec![], env: env.clone() });
        d.send(1, Payload { body: vec![], env });
        let s = wait_for(&d, |s| s.delivered_total == 1);
        assert_eq!(s.delivered_total, 1, "{s:?}");
        assert_eq!(std::fs::read_to_string(&out).expect("written"), "Busy firing\n");
        let started = Instant::now();
        let s = loop {
            let s = d.stats().remove(1);
            if s.given_up_total == 1 || started.elapsed() > Duration::from_secs(10) {
                break s;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(s.last_error.as_deref().is_some_and(|e| e.contains("timeout")), "{s:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "the timeout did not kill it");
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        // Accepts but never answers: the worker is stuck on its first payload.
        let d = Delivery::start(
            &[Receiver::Webhook(url)],
            &DeliveryConfig { queue: 2, timeout: Duration::from_secs(3), ..quick() },
        );
        let started = Instant::now();
        for _ in 0..10 {
            d.send(0, Payload { body: b"{}".to_vec(), env: vec![] });
        }
        assert!(started.elapsed() < Duration::from_millis(500));
        let s = d.stats().remove(0);
        assert!(s.dropped_total >= 7, "{s:?}");
        drop(listener);
    }

    /// Waits (bounded) until `d`'s first receiver has taken a payload into an attempt.
    fn wait_in_flight(d: &Delivery) {
        let until = Instant::now() + Duration::from_secs(30);
        while d.workers[0].in_flight.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < until, "the payload never went out");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Issue 33 item 7: a webhook that accepts and never replies made a stop wait an attempt's
    /// timeout for every queued payload (SIGTERM took 326 s). A stop now waits the grace, drops
    /// the rest and says how many; the attempt's timeout here is far longer than the bound.
    #[test]
    fn a_stop_waits_no_longer_than_its_grace_and_says_what_it_dropped() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let config =
            DeliveryConfig { timeout: Duration::from_secs(600), shutdown_grace: Duration::from_millis(200), ..quick() };
        let d = Delivery::start(&[Receiver::Webhook(url)], &config);
        for _ in 0..5 {
            d.send(0, Payload { body: b"{}".to_vec(), env: vec![] });
        }
        wait_in_flight(&d);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(d.stop());
        });
        let lines = rx.recv_timeout(Duration::from_secs(60)).expect("the stop returned");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("5 notification(s) not delivered"), "{lines:?}");
        drop(listener);
    }

    /// Issue 33 item 7: a reload that changed the receivers replaced the delivery, and dropping
    /// the old one joined its threads: rule evaluation stopped while a receiver hung. Now the
    /// removed receiver is retired without waiting, and one that stays keeps its counters.
    #[test]
    fn a_reload_never_waits_on_a_delivery() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let hung = Receiver::Webhook(format!("http://{}/hook", listener.local_addr().expect("addr")));
        let (url, _) = server(vec![200, 200]);
        let kept = Receiver::Webhook(url);
        let config =
            DeliveryConfig { timeout: Duration::from_secs(600), shutdown_grace: Duration::from_secs(1), ..quick() };
        let mut d = Delivery::start(&[hung, kept.clone()], &config);
        d.send(0, Payload { body: b"{}".to_vec(), env: vec![] });
        d.send(1, Payload { body: b"{}".to_vec(), env: vec![] });
        wait_in_flight(&d);
        let until = Instant::now() + Duration::from_secs(20);
        while d.stats()[1].delivered_total == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            d.reconfigure(std::slice::from_ref(&kept));
            let _ = tx.send(d);
        });
        let d = rx.recv_timeout(Duration::from_secs(60)).expect("the reload returned");
        let stats = d.stats();
        assert_eq!((stats.len(), stats[0].delivered_total), (1, 1), "{stats:?}");
        d.send(0, Payload { body: b"{}".to_vec(), env: vec![] });
        let s = wait_for(&d, |s| s.delivered_total == 2);
        assert_eq!(s.delivered_total, 2, "{s:?}");
        // The retired receiver's payload is reported at the stop, after its grace.
        let lines = d.stop();
        assert!(lines.iter().any(|l| l.contains("1 notification(s) not delivered")), "{lines:?}");
        drop(listener);
    }
}
