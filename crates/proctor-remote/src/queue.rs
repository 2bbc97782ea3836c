//! One queue per remote: a thread that sends the agent's samples, in time order, and keeps a
//! cursor of what the receiver took.
//!
//! The store is the write-ahead log. While the queue keeps up, each new snapshot is taken
//! from the agent as it is published (no store read). When it falls behind — the receiver was
//! down, a send took long, the agent restarted — it reads the samples after its cursor back
//! from the store, at most [`QueueConfig::backfill_per_sec`] of them a second, until it meets
//! the agent's newest again. The cursor (the newest sample the receiver answered 2xx for) is a
//! small JSON file in the data directory, written after each 2xx, so a restart resumes there.
//! Only a 2xx or a 4xx moves the cursor. 5xx, 429, failed or timed-out connections, redirects
//! and any other status keep the batch and retry it with backoff (1 s doubling to 5 s, or the
//! receiver's `Retry-After`); a 4xx other than 429 drops the batch and counts it with the
//! receiver's message, as Prometheus does. Nothing here runs on the sampling thread or an HTTP handler.
//!
//! Both paths make series the same way (`source::families`), so a value does not change with the
//! path it took: the host, container, top-N process and group series. The agent's own series
//! (and statsd's, under `serve --statsd`) are not in the store; they are sent with samples taken
//! live and are missing for samples sent from the store.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_agent::agent::Shared;
use proctor_agent::snapshot::Snapshot;
use proctor_http::prom::{Family, MetricsConfig};
use proctor_model::Sample;
use serde::{Deserialize, Serialize};

use crate::post::{post, Endpoint, Reply};
use crate::series::Batch;
use crate::source::{families, StoreSource};
use crate::wire::{encode, Version};

/// What a queue speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protocol {
    /// Prometheus remote write. A queue asked for 2.0 falls back to 1.0 when the receiver
    /// answers in a way that says it does not take 2.0 (see [`verdict`]).
    RemoteWrite(Version),
    /// OTLP/HTTP metrics, with the agent's resource attributes (`otlp::resource`).
    Otlp { resource: Vec<(String, String)> },
}

impl Protocol {
    fn name(&self) -> &'static str {
        match self {
            Protocol::RemoteWrite(_) => "remote-write",
            Protocol::Otlp { .. } => "otlp",
        }
    }

    fn version(&self) -> &'static str {
        match self {
            Protocol::RemoteWrite(v) => v.header(),
            Protocol::Otlp { .. } => crate::otlp::SPEC_VERSION,
        }
    }
}

/// Families that only a live snapshot has (the agent's own, statsd's), for the snapshot given.
pub type LiveFamilies = Arc<dyn Fn(&Snapshot) -> Vec<Family> + Send + Sync>;

/// How one queue runs.
#[derive(Clone)]
pub struct QueueConfig {
    pub endpoint: Endpoint,
    pub protocol: Protocol,
    /// Added to every series that lacks the label (`instance`, `host`, `--external-label`);
    /// OTLP sends them as resource attributes instead, and has none here.
    pub external_labels: Vec<(String, String)>,
    /// The store the agent records into.
    pub store_dir: PathBuf,
    /// The cursor file.
    pub cursor_path: PathBuf,
    pub metrics: MetricsConfig,
    /// Most agent samples in one request.
    pub max_samples: usize,
    /// A batch taken live is sent once its oldest sample is this old (or it is full).
    pub deadline: Duration,
    /// Most agent samples a second read back from the store and sent.
    pub backfill_per_sec: f64,
    /// Samples the store does not have after this long (never recorded: a full recorder queue,
    /// a failed write) are skipped and counted, so the queue never waits on them for ever.
    pub store_grace: Duration,
    pub live: Option<LiveFamilies>,
}

impl std::fmt::Debug for QueueConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueConfig").field("url", &self.endpoint.url).field("protocol", &self.protocol).finish()
    }
}

/// The newest sample the receiver took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub unix_ns: u64,
    pub seq: u64,
}

#[derive(Serialize, Deserialize)]
struct CursorFile {
    url: String,
    unix_ns: u64,
    seq: u64,
}

/// The most of a cursor file read: a URL and two numbers.
const CURSOR_MAX_BYTES: u64 = 64 << 10;

/// The cursor in `path`, if there is a readable one for `url`. Opened as every data-directory
/// file is (proctor-procfs's `regular`): a FIFO here once held the queue's thread, and with it
/// `serve`'s stop, for ever.
pub fn load_cursor(path: &std::path::Path, url: &str) -> Result<Option<Cursor>, String> {
    let bytes = match proctor_procfs::regular::read(path, CURSOR_MAX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let file: CursorFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not a cursor file ({e})", path.display()))?;
    if file.url != url {
        return Err(format!("{}: the cursor of {}, not of {url}", path.display(), file.url));
    }
    Ok(Some(Cursor { unix_ns: file.unix_ns, seq: file.seq }))
}

/// Writes the cursor beside itself and renames it in place: a crash leaves the old or the new.
pub fn save_cursor(path: &std::path::Path, url: &str, cursor: Cursor) -> std::io::Result<()> {
    let text = serde_json::to_string(&CursorFile { url: url.to_string(), unix_ns: cursor.unix_ns, seq: cursor.seq })
        .map_err(std::io::Error::other)?;
    proctor_procfs::regular::replace(path, &path.with_extension("tmp"), text.as_bytes())
}

/// The file name of a remote's cursor: readable, and unique per URL.
pub fn cursor_file_name(url: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let readable: String = url
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
        .take(48)
        .collect();
    format!("{readable}-{hash:016x}.json")
}

/// What a queue has done, for `/api/v1/agent` and `/metrics` (the vocabulary's shape).
pub type QueueStatus = proctor_vocab::snapshot::RemoteWriteOut;

/// A running queue.
#[derive(Debug)]
pub struct Queue {
    status: Arc<Mutex<QueueStatus>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The read side of a queue's status.
#[derive(Debug, Clone)]
pub struct StatusHandle(Arc<Mutex<QueueStatus>>);

impl StatusHandle {
    /// The status with lag and backlog worked out against the agent's newest sample.
    pub fn read(&self, newest_unix_ns: u64, interval_ns: u64) -> QueueStatus {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(ms) = s.delivered_until_unix_ms {
            let lag_ns = newest_unix_ns.saturating_sub(ms * 1_000_000);
            s.lag_secs = Some(lag_ns as f64 / 1e9);
            s.backlog_samples = Some(lag_ns / interval_ns.max(1));
        }
        s
    }
}

impl Queue {
    pub fn start(shared: Arc<Shared>, config: QueueConfig) -> std::io::Result<Queue> {
        let status = Arc::new(Mutex::new(QueueStatus {
            url: config.endpoint.url.clone(),
            protocol: config.protocol.name(),
            protocol_version: config.protocol.version(),
            ..QueueStatus::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (Arc::clone(&status), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("proctor-remote".into())
            .spawn(move || Sender::new(shared, config, st, sp).run())?;
        Ok(Queue { status, stop, thread: Some(thread) })
    }

    pub fn status(&self) -> StatusHandle {
        StatusHandle(Arc::clone(&self.status))
    }

    /// Stops the thread (a send in flight ends within the endpoint's timeout).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the queue stands: the newest sample put in a batch (sent or not).
#[derive(Debug, Clone, Copy)]
struct Position {
    unix_ns: u64,
    seq: u64,
    /// The agent's run this sample came from is the running one (so the next live snapshot
    /// follows it when its seq is one more).
    current_run: bool,
}

/// The sample before the next one, for rates and group churn.
enum Prev {
    None,
    Live(Arc<Snapshot>),
    Stored(Box<Sample>),
}

impl Prev {
    fn sample(&self) -> Option<&Sample> {
        match self {
            Prev::None => None,
            Prev::Live(s) => Some(&s.sample),
            Prev::Stored(s) => Some(s),
        }
    }
}

/// What a reply means for the batch.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// A 2xx: the cursor moves past the batch. `rejected`: points an OTLP receiver said in its
    /// `partial_success` it did not take (counted; resending would be refused the same way).
    Delivered { rejected: Option<(u64, String)> },
    /// Kept and sent again after a backoff; counted under `reason`.
    Retry { reason: &'static str, text: String, retry_after: Option<Duration> },
    /// Refused for good: dropped, counted, the cursor moves.
    Drop(String),
    /// A remote-write 2.0 request the receiver did not take as 2.0: sent again at once as 1.0,
    /// and the queue speaks 1.0 from then on.
    NotV2(String),
}

/// Remote write: only a 2xx delivers and only a 4xx (not 429) drops, as Prometheus's remote
/// write does; every other answer keeps the batch. A redirect is not followed: the request
/// would go again, with its credentials, to wherever `Location` points, and a receiver that
/// moved is a change for a person to make (`--remote-write` the new URL), so it is retried and
/// the panel says where to. Version 2.0: a 2xx without any `X-Prometheus-Remote-Write-*-Written`
/// header, or a 415, means the receiver did not take 2.0 (some answer 204 and store nothing),
/// as the 2.0 specification says.
///
/// OTLP/HTTP, as its specification says: 429, 502, 503 and 504 are retried (with
/// `Retry-After`), every other 4xx and 5xx is not (dropped and counted); a 2xx may refuse some
/// points in its body.
fn verdict(url: &str, protocol: &Protocol, reply: Reply) -> Verdict {
    let Reply { status, retry_after, location, message, written, body } = reply;
    let retry = |reason, text| Verdict::Retry { reason, text, retry_after };
    let v2 = *protocol == Protocol::RemoteWrite(Version::V2);
    let otlp = matches!(protocol, Protocol::Otlp { .. });
    match status {
        200..=299 if v2 && written.is_none() => Verdict::NotV2(format!(
            "{status} from {url} without X-Prometheus-Remote-Write-*-Written headers: it did not take remote write 2.0; \
             sending 1.0 from now on"
        )),
        415 if v2 => Verdict::NotV2(format!(
            "415 from {url}: it does not take remote write 2.0 ({message}); sending 1.0 from now on"
        )),
        200..=299 => Verdict::Delivered { rejected: if otlp { crate::otlp::rejected(&body) } else { None } },
        429 => retry("429", format!("{status} from {url}: {message}")),
        502..=504 if otlp => retry("5xx", format!("{status} from {url}: {message}")),
        400..=599 if otlp => {
            Verdict::Drop(format!("{status} from {url}: {message} (not retryable in OTLP: batch dropped)"))
        }
        400..=499 => Verdict::Drop(format!("{status} from {url}: {message} (batch dropped)")),
        500..=599 => retry("5xx", format!("{status} from {url}: {message}")),
        300..=399 => match location {
            Some(to) => retry(
                "3xx",
                format!(
                    "{status} from {url}: redirects to {to}, not followed; point {} there (batch kept)",
                    if otlp { "--otlp" } else { "--remote-write" }
                ),
            ),
            None => retry("3xx", format!("{status} from {url}: a redirect, not followed (batch kept)")),
        },
        _ => retry("other", format!("{status} from {url}: not a final 2xx–5xx answer: {message} (batch kept)")),
    }
}

enum Sent {
    Delivered,
    Retry(Duration),
    Dropped,
}

struct Sender {
    shared: Arc<Shared>,
    config: QueueConfig,
    status: Arc<Mutex<QueueStatus>>,
    stop: Arc<AtomicBool>,
    store: StoreSource,
    batch: Batch,
    batch_started: Option<Instant>,
    /// The batch holds samples read back from the store.
    batch_from_store: bool,
    position: Option<Position>,
    prev: Prev,
    backoff: Duration,
    /// Since when the store has lacked samples the agent published.
    store_missing_since: Option<Instant>,
    /// What the queue speaks now: the configured protocol, until a 2.0 receiver shows it is not.
    protocol: Protocol,
    /// The host's boot, the start of its counters (OTLP's `start_time_unix_nano`).
    boot_unix_ns: u64,
}

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

impl Sender {
    fn new(shared: Arc<Shared>, config: QueueConfig, status: Arc<Mutex<QueueStatus>>, stop: Arc<AtomicBool>) -> Sender {
        let store = StoreSource::new(config.store_dir.clone());
        let mut sender = Sender {
            shared,
            config,
            status,
            stop,
            store,
            batch: Batch::default(),
            batch_started: None,
            batch_from_store: false,
            position: None,
            prev: Prev::None,
            backoff: BACKOFF_START,
            store_missing_since: None,
            protocol: Protocol::RemoteWrite(Version::V1),
            boot_unix_ns: 0,
        };
        sender.protocol = sender.config.protocol.clone();
        match load_cursor(&sender.config.cursor_path, &sender.config.endpoint.url) {
            Ok(Some(c)) => {
                sender.position = Some(Position { unix_ns: c.unix_ns, seq: c.seq, current_run: false });
                sender.update(|s| s.delivered_until_unix_ms = Some(c.unix_ns / 1_000_000));
            }
            Ok(None) => {}
            Err(e) => sender.update(|s| s.cursor_error = Some(e)),
        }
        sender
    }

    fn update(&self, f: impl FnOnce(&mut QueueStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps up to `d`, waking early when stopped.
    fn rest(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stopped() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    fn run(mut self) {
        while !self.stopped() {
            if self.due() {
                let samples = self.batch.samples;
                let from_store = self.batch_from_store;
                match self.send() {
                    Sent::Retry(wait) => self.rest(wait),
                    Sent::Delivered | Sent::Dropped => {
                        if from_store {
                            // The backfill's bound: samples per second read back and sent.
                            let pace = samples as f64 / self.config.backfill_per_sec.max(1.0);
                            self.rest(Duration::from_secs_f64(pace));
                        }
                    }
                }
                continue;
            }
            self.fill();
        }
    }

    /// Whether the batch should go now.
    fn due(&self) -> bool {
        if self.batch.is_empty() {
            return false;
        }
        self.batch.samples >= self.config.max_samples
            || self.batch_from_store
            || self.batch_started.is_some_and(|t| t.elapsed() >= self.config.deadline)
    }

    /// Takes what comes next into the batch: the agent's next snapshot when it follows the
    /// position, else samples read back from the store; waits a little when there is nothing.
    fn fill(&mut self) {
        let latest = self.shared.latest();
        let newest = (latest.sample.unix_ns, latest.sample.seq);
        let Some(pos) = self.position else {
            // A queue with no cursor starts at the agent's newest sample.
            self.take_live(latest);
            return;
        };
        if newest.0 <= pos.unix_ns {
            self.store_missing_since = None;
            let _ = self.shared.wait_newer(newest.1, self.wait());
            return;
        }
        if pos.current_run && newest.1 == pos.seq + 1 && !self.batch_from_store {
            self.store_missing_since = None;
            self.take_live(latest);
            return;
        }
        // Behind: the samples after the position come from the store.
        // A backfill batch holds at most a second's worth at the backfill rate, then rests.
        let most = self.config.max_samples.min(self.config.backfill_per_sec.ceil() as usize);
        let room = most.saturating_sub(self.batch.samples).max(1);
        self.batch_from_store = true;
        if matches!(self.prev, Prev::None) {
            if let Some(prev) = self.store.sample_at(pos.unix_ns) {
                self.prev = Prev::Stored(Box::new(prev));
            }
        }
        let read = self.store.after(pos.unix_ns, newest.0, room);
        self.update(|s| s.backfilling = true);
        if read.is_empty() {
            if !self.batch.is_empty() {
                return; // send what was read; the rest follows
            }
            let since = *self.store_missing_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.config.store_grace {
                // Not in the store after the grace: never recorded. Go on live from the newest.
                let missing = if pos.current_run { newest.1.saturating_sub(pos.seq + 1) } else { 0 };
                self.update(|s| s.samples_not_in_store_total += missing);
                self.store_missing_since = None;
                self.batch_from_store = false;
                self.take_live(latest);
            } else {
                let _ = self.shared.wait_newer(newest.1, Duration::from_millis(200));
            }
            return;
        }
        self.store_missing_since = None;
        for sample in read {
            let current_run = proctor_store::same_run(&sample, &latest.sample) || sample.seq == latest.sample.seq;
            let fams = families(&sample, self.prev.sample(), &self.config.metrics, None);
            self.batch.add(&fams, sample.unix_ns, sample.seq, &self.config.external_labels);
            self.boot_unix_ns = boot_unix_ns(&sample).unwrap_or(self.boot_unix_ns);
            self.position = Some(Position { unix_ns: sample.unix_ns, seq: sample.seq, current_run });
            self.prev = Prev::Stored(Box::new(sample));
        }
        self.batch_started.get_or_insert_with(Instant::now);
    }

    fn take_live(&mut self, latest: Arc<Snapshot>) {
        let live = self.config.live.as_ref().map(|f| f(&latest));
        let fams = families(&latest.sample, self.prev.sample(), &self.config.metrics, Some(&latest));
        let mut all = fams;
        all.extend(live.unwrap_or_default());
        self.batch.add(&all, latest.sample.unix_ns, latest.sample.seq, &self.config.external_labels);
        self.boot_unix_ns = boot_unix_ns(&latest.sample).unwrap_or(self.boot_unix_ns);
        self.position = Some(Position { unix_ns: latest.sample.unix_ns, seq: latest.sample.seq, current_run: true });
        self.batch_started.get_or_insert_with(Instant::now);
        if !self.batch_from_store {
            self.update(|s| s.backfilling = false);
        }
        self.prev = Prev::Live(latest);
    }

    /// How long to wait for the next snapshot: until the batch is due, at most a second.
    fn wait(&self) -> Duration {
        match self.batch_started {
            Some(t) => self
                .config
                .deadline
                .saturating_sub(t.elapsed())
                .clamp(Duration::from_millis(10), Duration::from_secs(1)),
            None => Duration::from_secs(1),
        }
    }

    fn send(&mut self) -> Sent {
        let (body, headers) = match &self.protocol {
            Protocol::RemoteWrite(v) => (
                encode(&self.batch, *v),
                [
                    ("Content-Type", v.content_type()),
                    ("Content-Encoding", "snappy"),
                    ("X-Prometheus-Remote-Write-Version", v.header()),
                ],
            ),
            Protocol::Otlp { resource } => (
                crate::otlp::encode(&self.batch, resource, self.boot_unix_ns),
                [("Content-Type", crate::otlp::CONTENT_TYPE), ("Content-Encoding", "gzip"), ("", "")],
            ),
        };
        let headers: Vec<(&str, &str)> = headers.into_iter().filter(|(n, _)| !n.is_empty()).collect();
        let reply = post(&self.config.endpoint, &headers, &body);
        let outcome = match reply.map(|r| verdict(&self.config.endpoint.url, &self.protocol, r)) {
            Ok(Verdict::NotV2(text)) => {
                self.protocol = Protocol::RemoteWrite(Version::V1);
                self.update(|s| {
                    s.v2_fallbacks_total += 1;
                    s.protocol_version = Version::V1.header();
                    s.fallback = Some(text);
                });
                // Sent again at once, as 1.0: nothing was stored.
                return Sent::Retry(Duration::ZERO);
            }
            Ok(Verdict::Delivered { rejected }) => {
                if let Some((points, message)) = rejected {
                    let url = self.config.endpoint.url.clone();
                    self.update(|s| {
                        s.points_rejected_total += points;
                        s.last_error = Some(format!("{url} took the batch but refused {points} points: {message}"));
                    });
                }
                let (samples, points, bytes) = (self.batch.samples as u64, self.batch.points as u64, body.len() as u64);
                let last = self.batch.last;
                self.update(|s| {
                    s.samples_sent_total += samples;
                    s.points_sent_total += points;
                    s.requests_sent_total += 1;
                    s.bytes_sent_total += bytes;
                    if let Some((ns, _)) = last {
                        s.delivered_until_unix_ms = Some(ns / 1_000_000);
                    }
                });
                Sent::Delivered
            }
            Ok(Verdict::Drop(text)) => {
                let samples = self.batch.samples as u64;
                // A 5xx is dropped only by OTLP's rules, and counted apart from the retried ones.
                let reason = if text.starts_with('5') { "5xx_dropped" } else { "4xx" };
                self.failed(reason, text);
                self.update(|s| s.samples_dropped_total += samples);
                Sent::Dropped
            }
            Ok(Verdict::Retry { reason, text, retry_after }) => {
                let wait = retry_after.map_or(self.backoff, |r| r.min(Duration::from_secs(300)));
                self.failed(reason, text);
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                return Sent::Retry(wait);
            }
            Err(e) => {
                let wait = self.backoff;
                self.failed("network", e);
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                return Sent::Retry(wait);
            }
        };
        // Delivered or dropped: the cursor moves past the batch.
        self.backoff = BACKOFF_START;
        if let Some((unix_ns, seq)) = self.batch.last {
            let saved = save_cursor(&self.config.cursor_path, &self.config.endpoint.url, Cursor { unix_ns, seq });
            self.update(|s| s.cursor_error = saved.err().map(|e| format!("cannot write the cursor: {e}")));
        }
        self.batch.clear();
        self.batch_started = None;
        self.batch_from_store = false;
        outcome
    }

    fn failed(&self, reason: &str, message: String) {
        self.update(|s| {
            *s.failed_total.entry(reason.to_string()).or_default() += 1;
            s.last_error = Some(message);
        });
    }
}

/// The host's boot time in a sample, in Unix nanoseconds.
fn boot_unix_ns(sample: &Sample) -> Option<u64> {
    sample.host.stat.as_ref()?.boot_time_secs.map(|s| s * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, location: Option<&str>) -> Reply {
        Reply {
            status,
            retry_after: None,
            location: location.map(str::to_string),
            message: "m".to_string(),
            written: None,
            body: Vec::new(),
        }
    }

    const V1: Protocol = Protocol::RemoteWrite(Version::V1);

    /// Issue 33 item 8: a receiver answering 307, 301 or 100 had its batches dropped as "4xx"
    /// and the cursor moved past them. Only a 2xx delivers, only a 4xx drops.
    #[test]
    fn only_a_2xx_delivers_and_only_a_4xx_drops() {
        let url = "http://r/w";
        assert_eq!(verdict(url, &V1, reply(204, None)), Verdict::Delivered { rejected: None });
        assert!(matches!(verdict(url, &V1, reply(400, None)), Verdict::Drop(_)));
        for (status, reason) in
            [(429, "429"), (503, "5xx"), (307, "3xx"), (301, "3xx"), (100, "other"), (101, "other"), (600, "other")]
        {
            match verdict(url, &V1, reply(status, Some("http://elsewhere/w"))) {
                Verdict::Retry { reason: got, text, .. } => {
                    assert_eq!(got, reason, "{status}: {text}");
                    assert!(text.starts_with(&format!("{status} from {url}")), "{text}");
                }
                other => panic!("{status} must keep the batch, got {other:?}"),
            }
        }
        let Verdict::Retry { text, .. } = verdict(url, &V1, reply(308, Some("https://new/w"))) else { panic!("kept") };
        assert!(text.contains("https://new/w"), "says where it redirects: {text}");
    }

    /// Issue 37 item 3: a 2xx to a 2.0 request without the written headers (some receivers
    /// answer 204 and store nothing) or a 415 means the receiver does not take 2.0; a 2xx with
    /// them is a delivery. Version 1.0 asks for no headers.
    #[test]
    fn a_2xx_without_written_headers_means_the_receiver_did_not_take_2_0() {
        let url = "http://r/w";
        let v2 = Protocol::RemoteWrite(Version::V2);
        let Verdict::NotV2(text) = verdict(url, &v2, reply(204, None)) else { panic!("not taken as 2.0") };
        assert!(text.contains("did not take remote write 2.0"), "{text}");
        assert!(matches!(verdict(url, &v2, reply(415, None)), Verdict::NotV2(_)));
        let taken = Reply { written: Some(0), ..reply(204, None) };
        assert_eq!(verdict(url, &v2, taken), Verdict::Delivered { rejected: None });
        assert_eq!(verdict(url, &V1, reply(204, None)), Verdict::Delivered { rejected: None });
        assert!(matches!(verdict(url, &V1, reply(415, None)), Verdict::Drop(_)), "1.0 has nothing to fall back to");
    }

    /// OTLP/HTTP's rules: 429, 502, 503, 504 retried; 400, 401, 500 not; a 2xx's
    /// `partial_success` counted.
    #[test]
    fn otlp_retries_only_what_its_specification_says() {
        let url = "http://r/v1/metrics";
        let otlp = Protocol::Otlp { resource: Vec::new() };
        for status in [429, 502, 503, 504] {
            assert!(matches!(verdict(url, &otlp, reply(status, None)), Verdict::Retry { .. }), "{status}");
        }
        for status in [400, 401, 404, 413, 500, 501] {
            let got = verdict(url, &otlp, reply(status, None));
            assert!(
                matches!(&got, Verdict::Drop(t) if t.contains("not retryable in OTLP") && t.starts_with(&status.to_string())),
                "{status}: {got:?}"
            );
        }
        let partial = crate::otlp::proto::ExportMetricsServiceResponse {
            partial_success: Some(crate::otlp::proto::ExportMetricsPartialSuccess {
                rejected_data_points: 2,
                error_message: "too old".into(),
            }),
        };
        let with_body = Reply { body: prost::Message::encode_to_vec(&partial), ..reply(200, None) };
        assert_eq!(verdict(url, &otlp, with_body), Verdict::Delivered { rejected: Some((2, "too old".into())) });
        assert_eq!(verdict(url, &otlp, reply(200, None)), Verdict::Delivered { rejected: None });
    }
}
