//! The HTTP side: routes, query validation, Bearer auth and JSON errors.
//!
//! Every handler answers from the latest snapshot or the history ring and returns; none reads
//! `/proc`, sleeps or waits on the sampler. The disk reads, `/api/v1/history`'s part older
//! than the ring and `/api/v1/report` (both from the agent's own store), run under
//! `spawn_blocking`, one at a time between them, never on a tokio worker. No endpoint changes
//! state, so only GET and HEAD are routed. Errors are JSON (`{"error": {"code", "message"}}`) on every route.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use crate::agent::Shared;
use crate::jupyter::{jupyter_metrics, JupyterConfig};
use crate::prom::{self, Family, MetricsConfig};
use crate::store_history::{self, PointCache, StoreReport};
use crate::store_report;
use crate::wire;

/// Extra `/metrics` families from other parts of the agent (the embedded statsd server).
pub type ExtraMetrics = Arc<dyn Fn() -> Vec<Family> + Send + Sync>;

/// What the router needs besides the shared agent state.
#[derive(Clone)]
pub struct ApiConfig {
    /// When set, every request must carry `Authorization: Bearer TOKEN` (or the
    /// `proctor_token` cookie the dashboard's sign-in form sets).
    pub token: Option<Arc<str>>,
    pub metrics: MetricsConfig,
    pub jupyter: JupyterConfig,
    pub extra_metrics: Option<ExtraMetrics>,
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfig")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("metrics", &self.metrics)
            .field("jupyter", &self.jupyter)
            .field("extra_metrics", &self.extra_metrics.is_some())
            .finish()
    }
}

/// `/metrics` rendered once per snapshot and format: (seq, openmetrics, body).
type MetricsCache = Arc<Mutex<Option<(u64, bool, Bytes)>>>;

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    config: Arc<ApiConfig>,
    metrics_cache: MetricsCache,
    store: Arc<StoreReads>,
}

/// Store reads for `/api/v1/history` and `/api/v1/report`: one at a time (each decodes up to
/// [`store_history::MAX_FRAMES`] or [`store_report::MAX_FRAMES`] frames on a blocking thread),
/// and the history's points of the last one.
#[derive(Debug)]
struct StoreReads {
    permit: tokio::sync::Semaphore,
    cache: Mutex<PointCache>,
}

pub fn router(shared: Arc<Shared>, config: ApiConfig) -> Router {
    let store =
        Arc::new(StoreReads { permit: tokio::sync::Semaphore::new(1), cache: Mutex::new(PointCache::default()) });
    let state = AppState { shared, config: Arc::new(config), metrics_cache: Arc::new(Mutex::new(None)), store };
    Router::new()
        .route("/api/v1/snapshot", get(snapshot))
        .route("/api/v1/history", get(history))
        .route("/api/v1/history/series", get(history_series))
        .route("/api/v1/report", get(report))
        .route("/api/v1/processes", get(processes))
        .route("/api/v1/processes/{pid}", get(process))
        .route("/api/v1/processes/{pid}/tree", get(tree))
        .route("/api/v1/container", get(container))
        .route("/api/v1/agent", get(agent))
        .route("/api/metrics/v1", get(jupyter))
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .route("/{*path}", get(asset))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// A JSON error response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn bad_request(message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, code: "bad_request", message: message.into() }
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self { status: StatusCode::NOT_FOUND, code: "not_found", message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = wire::ErrorBody { error: wire::ErrorOut { code: self.code, message: self.message } };
        let mut resp = json_response(&body);
        *resp.status_mut() = self.status;
        resp
    }
}

fn json_response<T: Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let mut resp = Response::new(Body::from(bytes));
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        Err(e) => {
            let mut resp =
                Response::new(Body::from(format!("{{\"error\":{{\"code\":\"internal\",\"message\":\"{e}\"}}}}")));
            *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            resp
        }
    }
}

/// Compares without an early exit, so response time does not tell how much of a guess matched.
fn token_matches(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn presented_token(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(v) = headers.get(header::AUTHORIZATION) {
        let v = v.as_bytes();
        return v.strip_prefix(b"Bearer ").or_else(|| v.strip_prefix(b"bearer "));
    }
    let cookies = headers.get_all(header::COOKIE);
    for c in cookies {
        for part in c.as_bytes().split(|&b| b == b';') {
            let part = part.trim_ascii();
            if let Some(v) = part.strip_prefix(b"proctor_token=") {
                return Some(v);
            }
        }
    }
    None
}

/// The one place auth is decided, and where requests are counted.
async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let http = &state.shared.http;
    http.requests.fetch_add(1, Ordering::Relaxed);
    if let Some(token) = state.config.token.as_ref() {
        let ok = presented_token(req.headers()).is_some_and(|t| token_matches(t, token.as_bytes()));
        if !ok {
            http.unauthorized.fetch_add(1, Ordering::Relaxed);
            let wants_html = req.uri().path() == "/"
                && req
                    .headers()
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|a| a.contains("text/html"));
            let mut resp = if wants_html {
                let mut r = Response::new(Body::from(crate::assets::SIGN_IN_PAGE));
                r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
                r
            } else {
                ApiError {
                    status: StatusCode::UNAUTHORIZED,
                    code: "unauthorized",
                    message: "a Bearer token is required".into(),
                }
                .into_response()
            };
            *resp.status_mut() = StatusCode::UNAUTHORIZED;
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"proctor\""));
            return resp;
        }
    }
    let resp = next.run(req).await;
    if resp.status().is_client_error() {
        http.client_errors.fetch_add(1, Ordering::Relaxed);
    }
    resp
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        message: "only GET is served: no endpoint changes state".into(),
    }
}

/// Query parameters, each allowed at most once; any name outside `allowed` is a 400.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(raw: Option<String>, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for pair in raw.as_deref().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k =
                percent_decode(k).ok_or_else(|| ApiError::bad_request("query is not valid percent-encoded UTF-8"))?;
            let v =
                percent_decode(v).ok_or_else(|| ApiError::bad_request("query is not valid percent-encoded UTF-8"))?;
            if !allowed.contains(&k.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter '{k}'; this endpoint takes: {}",
                    if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
                )));
            }
            if !seen.insert(k.clone()) {
                return Err(ApiError::bad_request(format!("query parameter '{k}' given twice")));
            }
            out.push((k, v));
        }
        Ok(Params(out))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ApiError> {
        self.get(name)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| ApiError::bad_request(format!("'{name}' must be a non-negative integer, got '{v}'")))
            })
            .transpose()
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn parse_pid(raw: &str) -> Result<u32, ApiError> {
    match raw.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(ApiError::bad_request(format!("'{raw}' is not a pid"))),
    }
}

async fn snapshot(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let s = st.shared.latest();
    Ok(json_response(&wire::snapshot(&s, st.shared.config.interval.as_secs_f64(), &st.shared.http)))
}

async fn container(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    Ok(json_response(&wire::container(&st.shared.latest())))
}

async fn agent(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let s = st.shared.latest();
    Ok(json_response(&wire::agent(&s, st.shared.config.interval.as_secs_f64(), &st.shared.http)))
}

/// `since` (a span back from `now_ms`) or `from`, and `to` (Unix ms), as `/api/v1/history`
/// and `/api/v1/report` take them; `default_from`/`default_to` when not given.
fn time_range(p: &Params, now_ms: u64, default_from: u64, default_to: u64) -> Result<(u64, u64), ApiError> {
    if p.get("since").is_some() && p.get("from").is_some() {
        return Err(ApiError::bad_request("give 'since' or 'from', not both"));
    }
    let from = match (p.get("since"), p.number::<u64>("from")?) {
        (Some(span), _) => now_ms.saturating_sub(
            proctor_vocab::parse_duration(span)
                .map_err(|e| ApiError::bad_request(format!("'since' must be a span like 90s, 5m, 1h or 1d: {e}")))?
                .as_millis()
                .try_into()
                .unwrap_or(u64::MAX),
        ),
        (None, Some(from)) => from,
        (None, None) => default_from,
    };
    let to = p.number::<u64>("to")?.unwrap_or(default_to);
    if from > to {
        return Err(ApiError::bad_request("'from' is after 'to'"));
    }
    Ok((from, to))
}

async fn history(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["series", "since", "from", "to", "max_points"])?;
    let names: Vec<String> = p
        .get("series")
        .ok_or_else(|| {
            ApiError::bad_request("'series' is required: a comma-separated list (see /api/v1/history/series)")
        })?
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if names.is_empty() || names.len() > 256 {
        return Err(ApiError::bad_request("'series' must name between 1 and 256 series"));
    }
    let now_ms = st.shared.latest().unix_ms();
    let (from, to) = time_range(&p, now_ms, 0, u64::MAX)?;
    let max_points = p.number::<usize>("max_points")?.unwrap_or(0);
    // Under the ring's lock: check the names, and see whether the range reaches before the ring.
    let (maker, ring_first) = st.shared.with_history(|h| {
        if let Some(unknown) = names.iter().find(|n| !h.knows(n)) {
            return Err(ApiError::bad_request(format!("unknown series '{unknown}' (see /api/v1/history/series)")));
        }
        let ring_first = h.first_ms().unwrap_or(u64::MAX);
        Ok((if from < ring_first { Some(h.maker().clone()) } else { None }, ring_first))
    })?;
    let dir = st.shared.latest().agent.recording.dir.clone();
    // The store answers before the ring's oldest point, the ring from it on, so a sample is
    // never counted twice at the seam. The ring keeps moving while the store is read, so the
    // store is read a little past the seam (SEAM_SLACK_MS) and cut at the ring's oldest point
    // as it is when the answer is put together: no gap unless the read took longer than that.
    let store = match (maker, dir) {
        (Some(maker), Some(dir)) => {
            let store_to = to.min(ring_first.saturating_sub(1).saturating_add(SEAM_SLACK_MS));
            let budget = if max_points == 0 {
                store_history::MAX_FRAMES
            } else {
                max_points.clamp(store_history::MIN_FRAMES, store_history::MAX_FRAMES)
            };
            Some(read_store(&st, dir, maker, from, store_to, budget).await)
        }
        _ => None,
    };
    st.shared.with_history(|h| {
        let ring_first = h.first_ms().unwrap_or(u64::MAX);
        let ring = h.points(from.max(ring_first), to);
        let (store_points, report) = store.unzip();
        let mut store_points = store_points.unwrap_or_default();
        store_points.retain(|p| p.time_ms < ring_first);
        // max_points is shared between the two parts by the time each covers.
        let (store_max, ring_max) = match (max_points, store_points.is_empty()) {
            (0, _) | (_, true) => (max_points, max_points),
            (n, false) => {
                let newest = ring.last().map_or(to.min(ring_first), |p| p.time_ms);
                let store_span = ring_first.min(newest).saturating_sub(from) as f64;
                let whole = newest.saturating_sub(from).max(1) as f64;
                let store_max = ((n as f64 * store_span / whole).round() as usize).clamp(1, n.saturating_sub(1).max(1));
                (store_max, n.saturating_sub(store_max).max(1))
            }
        };
        let refs: Vec<_> = store_points.iter().map(|p| p.as_ref()).collect();
        let old = h.maker().assemble(&names, &refs, store_max);
        let new = h.maker().assemble(&names, &ring, ring_max);
        let store_count = old.times_ms.len();
        let ring_count = new.times_ms.len();
        let mut times_unix_ms = old.times_ms;
        times_unix_ms.extend(new.times_ms);
        let series = old
            .series
            .into_iter()
            .zip(new.series)
            .map(|(mut a, b)| {
                a.values.extend(b.values);
                wire::SeriesOut { name: a.name, values: a.values }
            })
            .collect();
        Ok(json_response(&wire::HistoryOut {
            from_unix_ms: from,
            to_unix_ms: to.min(h.last_ms().unwrap_or(0).max(from)),
            store_points: store_count,
            ring_points: ring_count,
            store: report.map(wire::history_store),
            times_unix_ms,
            series,
        }))
    })
}

/// How far past the ring's oldest point the store is read (see `history`).
const SEAM_SLACK_MS: u64 = 10_000;

/// The store's part of a history answer, read on a blocking thread while holding the one
/// permit (other store reads wait for it without occupying a worker).
async fn read_store(
    st: &AppState,
    dir: std::path::PathBuf,
    maker: crate::history::PointMaker,
    from: u64,
    to: u64,
    budget: usize,
) -> (Vec<crate::history::Point>, StoreReport) {
    let counters = &st.shared.http;
    counters.history_store_requests.fetch_add(1, Ordering::Relaxed);
    if from > to {
        return (Vec::new(), StoreReport { from_ms: from, to_ms: to, ..StoreReport::default() });
    }
    let Ok(_permit) = st.store.permit.acquire().await else {
        return (Vec::new(), StoreReport { problems: vec!["store reads are closed".into()], ..StoreReport::default() });
    };
    let reads = Arc::clone(&st.store);
    let answer = tokio::task::spawn_blocking(move || {
        let mut cache = reads.cache.lock().unwrap_or_else(|e| e.into_inner());
        store_history::read_points(&dir, &maker, from, to, budget, &mut cache)
    })
    .await;
    match answer {
        Ok((points, report)) => {
            counters.history_store_frames_decoded.fetch_add(report.frames_decoded as u64, Ordering::Relaxed);
            (points, report)
        }
        Err(e) => (
            Vec::new(),
            StoreReport { problems: vec![format!("the store read failed: {e}")], ..StoreReport::default() },
        ),
    }
}

/// The top processes and headline figures of a range, folded from the agent's own store on a
/// blocking thread while holding the store-read permit the history shares (one store read at a
/// time, whichever route asked). No store (recording off, or one that cannot be opened) is an
/// answer with `available: false`, not an error.
async fn report(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["since", "from", "to", "top"])?;
    let latest = st.shared.latest();
    let now_ms = latest.unix_ms();
    let (from, to) = time_range(&p, now_ms, now_ms.saturating_sub(3_600_000), now_ms)?;
    let top = p.number::<usize>("top")?.unwrap_or(10);
    if top == 0 || top > store_report::MAX_TOP {
        return Err(ApiError::bad_request(format!("'top' must be between 1 and {}, got {top}", store_report::MAX_TOP)));
    }
    let recording = &latest.agent.recording;
    let Some(dir) = recording.dir.clone() else {
        return Ok(json_response(&store_report::unavailable(
            "recording is off (proctor serve --no-record): there is no store to report from",
            from,
            to,
        )));
    };
    let failed = recording.error.clone();
    drop(latest);
    let counters = &st.shared.http;
    counters.report_store_requests.fetch_add(1, Ordering::Relaxed);
    let Ok(_permit) = st.store.permit.acquire().await else {
        return Ok(json_response(&store_report::unavailable("store reads are closed", from, to)));
    };
    let answer =
        tokio::task::spawn_blocking(move || store_report::read_report(&dir, from, to, store_report::MAX_FRAMES, top))
            .await;
    let mut out = match answer {
        Ok(out) => out,
        Err(e) => store_report::unavailable(format!("the store read failed: {e}"), from, to),
    };
    counters.report_store_frames_decoded.fetch_add(out.frames_read as u64, Ordering::Relaxed);
    if let Some(error) = failed {
        // Serve could not open the store for writing (another writer, say): what is there is
        // still reported, with the reason nothing new is being added.
        out.problems.insert(0, format!("not recording: {error}"));
    }
    Ok(json_response(&out))
}

async fn history_series(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    Ok(st.shared.with_history(|h| {
        json_response(&wire::SeriesListOut {
            series: h.names().to_vec(),
            top_process_pids: h.top_pids(0, u64::MAX).into_iter().map(|(pid, _)| pid).take(50).collect(),
            oldest_unix_ms: h.first_ms(),
            newest_unix_ms: h.last_ms(),
        })
    }))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SortKey {
    Pid,
    Name,
    Cpu,
    Rss,
    Pss,
    Vsize,
    Threads,
    Swap,
}

async fn processes(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["sort", "order", "filter", "user", "state", "limit", "offset"])?;
    let sort = match p.get("sort").unwrap_or("cpu") {
        "pid" => SortKey::Pid,
        "name" => SortKey::Name,
        "cpu" => SortKey::Cpu,
        "rss" | "mem" => SortKey::Rss,
        "pss" => SortKey::Pss,
        "vsize" => SortKey::Vsize,
        "threads" => SortKey::Threads,
        "swap" => SortKey::Swap,
        other => {
            return Err(ApiError::bad_request(format!(
                "'sort' must be one of pid, name, cpu, rss, pss, vsize, threads, swap; got '{other}'"
            )))
        }
    };
    let descending = match p.get("order") {
        None => !matches!(sort, SortKey::Pid | SortKey::Name),
        Some("desc") => true,
        Some("asc") => false,
        Some(other) => return Err(ApiError::bad_request(format!("'order' must be asc or desc, got '{other}'"))),
    };
    let filter = p.get("filter").map(str::to_lowercase);
    let user = p.number::<u32>("user")?;
    let state_filter = match p.get("state").map(|s| {
        let mut chars = s.chars();
        (chars.next(), chars.next())
    }) {
        None => None,
        Some((Some(c), None)) => Some(c),
        Some(_) => return Err(ApiError::bad_request("'state' must be one state letter, e.g. R, S, D, Z")),
    };
    let limit = p.number::<usize>("limit")?;
    let offset = p.number::<usize>("offset")?.unwrap_or(0);
    let s = st.shared.latest();
    let mut rows: Vec<&proctor_model::ProcessRow> = s
        .rows
        .iter()
        .filter(|r| user.is_none_or(|u| r.uid == Some(u)))
        .filter(|r| state_filter.is_none_or(|st| r.state == st))
        .filter(|r| {
            let Some(f) = filter.as_ref() else { return true };
            r.comm.to_lowercase().contains(f)
                || r.pid.to_string() == *f
                || r.cmdline.as_ref().is_some_and(|c| c.iter().any(|a| a.to_lowercase().contains(f)))
        })
        .collect();
    let num = |v: Option<f64>| v.unwrap_or(f64::NEG_INFINITY);
    rows.sort_by(|a, b| {
        let ord = match sort {
            SortKey::Pid => a.pid.cmp(&b.pid),
            SortKey::Name => a.comm.cmp(&b.comm),
            SortKey::Cpu => {
                num(a.cpu_percent).total_cmp(&num(b.cpu_percent)).then(a.cpu_ticks_total.cmp(&b.cpu_ticks_total))
            }
            SortKey::Rss => a.rss_bytes.cmp(&b.rss_bytes),
            SortKey::Pss => a.pss.and_then(|p| p.pss_bytes).cmp(&b.pss.and_then(|p| p.pss_bytes)),
            SortKey::Vsize => a.vsize_bytes.cmp(&b.vsize_bytes),
            SortKey::Threads => a.threads.cmp(&b.threads),
            SortKey::Swap => a.swap_bytes.cmp(&b.swap_bytes),
        };
        let ord = if descending { ord.reverse() } else { ord };
        ord.then(a.pid.cmp(&b.pid))
    });
    let matched = rows.len();
    let page = rows.into_iter().skip(offset).take(limit.unwrap_or(usize::MAX));
    Ok(json_response(&wire::ProcessListOut {
        time_unix_ms: s.unix_ms(),
        total: s.rows.len(),
        matched,
        processes: page.map(|r| wire::process(&s, r)).collect(),
    }))
}

async fn process(
    State(st): State<AppState>,
    Path(pid): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let pid = parse_pid(&pid)?;
    let s = st.shared.latest();
    let row = s.row(pid).ok_or_else(|| ApiError::not_found(format!("no process {pid} in the latest sample")))?;
    Ok(json_response(&wire::process(&s, row)))
}

async fn tree(
    State(st): State<AppState>,
    Path(pid): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let pid = parse_pid(&pid)?;
    let s = st.shared.latest();
    let t = proctor_model::build_tree(&s.rows, pid)
        .ok_or_else(|| ApiError::not_found(format!("no process {pid} in the latest sample")))?;
    Ok(json_response(&wire::tree(&s, &t)))
}

async fn jupyter(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let s = st.shared.latest();
    let cfg = &st.config.jupyter;
    let m = jupyter_metrics(&s, cfg)
        .ok_or_else(|| ApiError::not_found(format!("the Jupyter root process {} is not running", cfg.pid)))?;
    Ok(json_response(&m))
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let s = st.shared.latest();
    let seq = s.sample.seq;
    // The snapshot's families are rendered once per snapshot and format (without OpenMetrics'
    // `# EOF`); the statsd families change between flushes, so they are rendered per request
    // and appended.
    let cached = st
        .metrics_cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|(cseq, com, _)| *cseq == seq && *com == openmetrics)
        .map(|(_, _, part)| part.clone());
    let snapshot_part = match cached {
        Some(part) => part,
        None => {
            let families = prom::families(&s, &st.config.metrics, st.shared.http.requests.load(Ordering::Relaxed));
            let part = Bytes::from(prom::render_families(&families, openmetrics));
            *st.metrics_cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((seq, openmetrics, part.clone()));
            part
        }
    };
    let body = match (st.config.extra_metrics.as_ref(), openmetrics) {
        (None, false) => snapshot_part,
        (extra, _) => {
            let mut joined = snapshot_part.to_vec();
            if let Some(extra) = extra {
                joined.extend_from_slice(prom::render_families(&extra(), openmetrics).as_bytes());
            }
            if openmetrics {
                joined.extend_from_slice(prom::EOF.as_bytes());
            }
            Bytes::from(joined)
        }
    };
    let mut resp = Response::new(Body::from(body));
    let ct = if openmetrics { prom::OPENMETRICS_CONTENT_TYPE } else { prom::TEXT_CONTENT_TYPE };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    Ok(resp)
}

async fn index(RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    crate::assets::response("index.html")
        .ok_or_else(|| ApiError::not_found("the dashboard is not built into this binary"))
}

async fn asset(Path(path): Path<String>) -> Result<Response, ApiError> {
    crate::assets::response(&path).ok_or_else(|| ApiError::not_found(format!("no route /{path}")))
}
