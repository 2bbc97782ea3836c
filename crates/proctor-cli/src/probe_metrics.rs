//! `serve`'s `/metrics` for what `proctor probe --record` stores beside it (DATA/probe): serve
//! runs no prober, so the store is the link. A thread of its own reads the probe results
//! recorded since serve started, every few seconds, and counts them per probed URL: a latency
//! histogram (`proctor_probe_request_duration_seconds`, results that got a whole response) and
//! results by outcome (`proctor_probe_requests_total`), so a fleet's Prometheus sees probe
//! latency as it sees the rest. Nothing here runs on the sampling thread or a request.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use proctor_http::prom::{Family, Kind, Sample as PromSample};
use proctor_model::ProbeBatch;
use proctor_store::{Event, Reader, PROBE_STREAM};

/// How often the store is read.
const EVERY: Duration = Duration::from_secs(5);
/// How far back each read looks before the last one: a batch is stored up to a second after
/// its first result was sent, and frames already counted are known by their identity.
const OVERLAP_NS: u64 = 30_000_000_000;
/// Most URLs with series of their own; results for more are counted in `urls_not_shown`.
const MAX_URLS: usize = 32;
/// Most outcomes (error classes) per URL; more are counted as `other`.
const MAX_OUTCOMES: usize = 16;
/// The histogram's upper bounds, seconds (`+Inf` after them).
const BOUNDS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

#[derive(Debug, Default, Clone)]
struct UrlTotals {
    /// Per bound (and +Inf last), results at or below it, not cumulative.
    buckets: [u64; BOUNDS.len() + 1],
    sum_secs: f64,
    outcomes: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct Totals {
    urls: BTreeMap<String, UrlTotals>,
    urls_not_shown: u64,
    /// Frames counted, by (time, CRC, length), within the overlap of the last read.
    seen: HashSet<(u64, u32, u32)>,
    /// Why the last read failed, if it did.
    error: Option<String>,
}

impl Totals {
    fn add(&mut self, batch: &ProbeBatch, since_ns: u64) {
        let known = self.urls.contains_key(&batch.target);
        if !known && self.urls.len() >= MAX_URLS {
            self.urls_not_shown += batch.results.iter().filter(|r| r.sent_unix_ns >= since_ns).count() as u64;
            return;
        }
        let url = self.urls.entry(batch.target.clone()).or_default();
        for r in batch.results.iter().filter(|r| r.sent_unix_ns >= since_ns) {
            let outcome = match (&r.error, r.has_response) {
                (None, true) => "ok".to_string(),
                (Some(class), _) => class.clone(),
                (None, false) => "no_response".to_string(),
            };
            let outcome = if url.outcomes.contains_key(&outcome) || url.outcomes.len() < MAX_OUTCOMES {
                outcome
            } else {
                "other".to_string()
            };
            *url.outcomes.entry(outcome).or_default() += 1;
            if r.has_response {
                let secs = r.total_ns as f64 / 1e9;
                let i = BOUNDS.iter().position(|b| secs <= *b).unwrap_or(BOUNDS.len());
                url.buckets[i] += 1;
                url.sum_secs += secs;
            }
        }
    }

    fn families(&self) -> Vec<Family> {
        let mut hist = Family::new(
            "proctor_probe_request_duration_seconds",
            Kind::Histogram,
            "Latency of each recorded probe request that got a whole response, per URL (proctor probe --record into this agent's store).",
        );
        let mut requests = Family::new(
            "proctor_probe_requests",
            Kind::Counter,
            "Recorded probe requests by URL and outcome (ok, or the error class).",
        );
        for (url, t) in &self.urls {
            let mut cumulative = 0;
            for (i, n) in t.buckets.iter().enumerate() {
                cumulative += n;
                let le = BOUNDS.get(i).map_or_else(|| "+Inf".to_string(), |b| b.to_string());
                hist.samples.push(PromSample {
                    suffix: "_bucket",
                    labels: vec![("url", url.clone()), ("le", le)],
                    value: cumulative as f64,
                });
            }
            hist.samples.push(PromSample { suffix: "_sum", labels: vec![("url", url.clone())], value: t.sum_secs });
            hist.samples.push(PromSample {
                suffix: "_count",
                labels: vec![("url", url.clone())],
                value: cumulative as f64,
            });
            for (outcome, n) in &t.outcomes {
                requests.push(vec![("url", url.clone()), ("outcome", outcome.clone())], *n as f64);
            }
        }
        let not_shown = Family::new(
            "proctor_probe_urls_not_shown",
            Kind::Counter,
            "Recorded probe requests to URLs past the 32 with series of their own.",
        )
        .with(Some(self.urls_not_shown as f64));
        vec![hist, requests, not_shown]
    }
}

/// The running reader.
#[derive(Debug)]
pub struct ProbeWatch {
    totals: Arc<Mutex<Totals>>,
    /// Dropped to stop the thread: it waits on the other end between reads, so it wakes only
    /// to read (polling a flag every 100 ms was 10 wakeups a second, ~0.4 ms of CPU a second
    /// here, on an idle serve: bench/serve/idle_threads.py).
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ProbeWatch {
    /// Starts reading `data`/probe for results sent from now on.
    pub fn start(data: PathBuf) -> std::io::Result<ProbeWatch> {
        let totals: Arc<Mutex<Totals>> = Arc::default();
        let (stop, stopped) = mpsc::channel::<()>();
        let since_ns = crate::cmd::common::now_unix_ns();
        let t = Arc::clone(&totals);
        let thread = std::thread::Builder::new().name("proctor-probe-watch".into()).spawn(move || {
            let dir = data.join(PROBE_STREAM);
            let mut last_ns = since_ns;
            loop {
                let now = crate::cmd::common::now_unix_ns();
                if dir.is_dir() {
                    let read = read_new(&dir, last_ns.saturating_sub(OVERLAP_NS), now, since_ns, &t);
                    let mut totals = t.lock().unwrap_or_else(|e| e.into_inner());
                    totals.error = read.err();
                }
                last_ns = now;
                if stopped.recv_timeout(EVERY) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
            }
        })?;
        Ok(ProbeWatch { totals, stop: Some(stop), thread: Some(thread) })
    }

    /// A reader of the families that outlives a borrow of the watch (for `/metrics`).
    pub fn reader(&self) -> impl Fn() -> Vec<Family> + Send + Sync + 'static {
        let totals = Arc::clone(&self.totals);
        move || totals.lock().unwrap_or_else(|e| e.into_inner()).families()
    }
}

/// Counts the probe batches stored between `from_ns` and `to_ns` not counted before.
fn read_new(
    dir: &std::path::Path,
    from_ns: u64,
    to_ns: u64,
    since_ns: u64,
    totals: &Mutex<Totals>,
) -> Result<(), String> {
    let mut reader = Reader::open(dir).map_err(|e| e.to_string())?;
    let frames = reader.event_frames(from_ns, to_ns).map_err(|e| e.to_string())?;
    let mut keep = HashSet::new();
    for frame in frames {
        let h = &frame.frame.header;
        let id = (h.unix_ns, h.crc, h.payload_len);
        keep.insert(id);
        if totals.lock().unwrap_or_else(|e| e.into_inner()).seen.contains(&id) {
            continue;
        }
        if let Some(Event::Probe(batch)) = reader.read_event(&frame) {
            totals.lock().unwrap_or_else(|e| e.into_inner()).add(&batch, since_ns);
        }
    }
    // Only the frames this window still holds are remembered: the set stays as small as it is.
    totals.lock().unwrap_or_else(|e| e.into_inner()).seen = keep;
    Ok(())
}

impl crate::daemon::Service for ProbeWatch {
    fn stop(mut self: Box<Self>) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_model::ProbeResult;

    fn result(seq: u64, ms: u64, error: Option<&str>) -> ProbeResult {
        ProbeResult {
            seq,
            sent_unix_ns: 2_000 + seq,
            total_ns: ms * 1_000_000,
            status: error.is_none().then_some(200),
            error: error.map(str::to_string),
            has_response: error.is_none(),
            connect_ns: None,
            wait_ns: None,
        }
    }

    /// Latencies land in the histogram's buckets (cumulative on /metrics), failures by class,
    /// results sent before serve started are not counted.
    #[test]
    fn results_count_into_a_histogram_and_outcomes_per_url() {
        let mut t = Totals::default();
        let batch = ProbeBatch {
            run: "r".into(),
            target: "http://a/x".into(),
            results: vec![result(1, 3, None), result(2, 40, None), result(3, 0, Some("timeout"))],
        };
        t.add(&batch, 2_000);
        let old = ProbeBatch { results: vec![ProbeResult { sent_unix_ns: 10, ..result(4, 5, None) }], ..batch.clone() };
        t.add(&old, 2_000);
        let fams = t.families();
        let hist = &fams[0];
        let bucket =
            |le: &str| hist.samples.iter().find(|s| s.suffix == "_bucket" && s.labels[1].1 == le).map(|s| s.value);
        assert_eq!(
            (bucket("0.0025"), bucket("0.005"), bucket("0.05"), bucket("+Inf")),
            (Some(0.0), Some(1.0), Some(2.0), Some(2.0))
        );
        let count = hist.samples.iter().find(|s| s.suffix == "_count").map(|s| s.value);
        assert_eq!(count, Some(2.0));
        let outcomes: Vec<(String, f64)> = fams[1].samples.iter().map(|s| (s.labels[1].1.clone(), s.value)).collect();
        assert_eq!(outcomes, [("ok".to_string(), 2.0), ("timeout".to_string(), 1.0)]);
    }
}
