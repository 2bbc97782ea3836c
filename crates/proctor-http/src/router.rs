//! The routes and their handlers.
//!
//! Every handler answers from the latest snapshot or the history ring and returns; none reads
//! `/proc`, sleeps or waits on the sampler. The store reads (`/api/v1/history`'s part older than
//! the ring, `/api/v1/report`) run under `spawn_blocking`, one at a time between them, never on
//! a tokio worker, and no lock is held while an answer is serialized. Two routes change state,
//! `POST /api/v1/alerts/silences` and `DELETE /api/v1/alerts/silences/ID` (see
//! [`crate::alerts`]); every other is GET (and HEAD).

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::Router;
use proctor_agent::Shared;
use proctor_report::GroupSelect;
use proctor_store::Reader;
use proctor_stored::history_query::{join_history, plan_history, read_store_part, HistoryQuery};
use proctor_stored::range::{fold_tiered, FoldConfig, DEFAULT_FRAMES, MAX_TIERED_SPAN};
use proctor_stored::store_history::PointCache;
use proctor_vocab::history::{history_store, HistoryOut, SeriesListOut, SeriesOut};
use proctor_vocab::jupyter::jupyter_metrics;
use proctor_vocab::select::{matches, sort_rows};
use proctor_vocab::{process, report, snapshot, ProcessSort};

use crate::auth::Auth;
use crate::counters::HttpCounters;
use crate::params::{json_response, parse_pid, time_range, ApiError, Params};
use crate::prom;
use crate::state::{ApiConfig, AppState, StoreReads};

/// Processes the snapshot document lists unless `top` says otherwise.
pub const SNAPSHOT_TOP: usize = 15;

/// The most frames one `/api/v1/report` may ask to read.
pub const MAX_REPORT_FRAMES: usize = 20_000;

pub fn router(shared: Arc<Shared>, config: ApiConfig) -> Router {
    let store =
        Arc::new(StoreReads { permit: tokio::sync::Semaphore::new(1), cache: Mutex::new(PointCache::default()) });
    let http = Arc::clone(&config.counters);
    let auth = Auth { token: config.token.clone(), hosts: config.hosts.clone(), http: Arc::clone(&http) };
    let state = AppState { shared, config: Arc::new(config), http, metrics_cache: Arc::new(Mutex::new(None)), store };
    Router::new()
        .route("/api/v1/snapshot", get(snapshot))
        .route("/api/v1/history", get(history))
        .route("/api/v1/history/series", get(history_series))
        .route("/api/v1/report", get(report))
        .route("/api/v1/groups", get(groups))
        .route("/api/v1/processes", get(processes))
        .route("/api/v1/processes/{pid}", get(process))
        .route("/api/v1/processes/{pid}/tree", get(tree))
        .route("/api/v1/container", get(container))
        .route("/api/v1/agent", get(agent))
        .route("/api/v1/alerts", get(crate::alerts::alerts))
        .route("/api/v1/alerts/silences", post(crate::alerts::silence))
        .route("/api/v1/alerts/silences/{id}", delete(crate::alerts::expire))
        .route("/api/metrics/v1", get(jupyter))
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .route("/{*path}", get(asset))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(auth, crate::auth::guard))
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        message: "only GET is served, POST to /api/v1/alerts/silences and DELETE of /api/v1/alerts/silences/ID".into(),
    }
}

fn sort_param(p: &Params) -> Result<Option<ProcessSort>, ApiError> {
    p.get("sort").map(|s| ProcessSort::parse(s).map_err(|e| ApiError::bad_request(format!("'sort' {e}")))).transpose()
}

async fn snapshot(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["top", "sort"])?;
    let sort = sort_param(&p)?.unwrap_or(ProcessSort::Cpu);
    let top = p.number::<usize>("top")?.unwrap_or(SNAPSHOT_TOP);
    let s = st.shared.latest();
    Ok(json_response(&snapshot::snapshot(&s, sort, top, &st.extras(&s))))
}

async fn groups(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["top"])?;
    let top = p.number::<usize>("top")?.unwrap_or(0);
    let s = st.shared.latest();
    match proctor_vocab::groups::groups(&s, top) {
        Some(doc) => Ok(json_response(&doc)),
        None => Err(ApiError::not_found(
            "this agent keeps no groups: start proctor serve with --groups cgroup, --groups user or --groups RULES.yml",
        )),
    }
}

async fn container(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    Ok(json_response(&snapshot::container(&st.shared.latest())))
}

async fn agent(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let s = st.shared.latest();
    Ok(json_response(&snapshot::agent(&s, &st.extras(&s))))
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
    let (from_ms, to_ms) = time_range(&p, now_ms, 0, u64::MAX)?;
    let max_points = p.number::<usize>("max_points")?.unwrap_or(0);
    let query = HistoryQuery { names, from_ms, to_ms, max_points };
    let plan = plan_history(&st.shared, &query)
        .map_err(|unknown| ApiError::bad_request(format!("unknown series '{unknown}' (see /api/v1/history/series)")))?;
    let (store_points, store_report) = match plan {
        None => (Vec::new(), None),
        Some(part) => {
            HttpCounters::bump(&st.http.history_store_requests, 1);
            let Ok(_permit) = st.store.permit.acquire().await else {
                return Err(ApiError::not_found("store reads are closed"));
            };
            let reads = Arc::clone(&st.store);
            let answer = tokio::task::spawn_blocking(move || {
                let mut cache = reads.cache.lock().unwrap_or_else(|e| e.into_inner());
                read_store_part(&part, &mut cache)
            })
            .await;
            match answer {
                Ok((points, report)) => {
                    HttpCounters::bump(&st.http.history_store_frames_decoded, report.frames_decoded as u64);
                    (points, Some(report))
                }
                Err(e) => {
                    let mut report = proctor_stored::store_history::StoreReport::default();
                    report.stats.problems.push(format!("the store read failed: {e}"));
                    (Vec::new(), Some(report))
                }
            }
        }
    };
    let answer = join_history(&st.shared, &query, store_points);
    // Serialized here, with no lock held.
    Ok(json_response(&HistoryOut {
        from_unix_ms: answer.from_ms,
        to_unix_ms: answer.to_ms,
        store_points: answer.store_points,
        ring_points: answer.ring_points,
        store: store_report.map(history_store),
        times_unix_ms: answer.times_ms,
        series: answer.series.into_iter().map(|s| SeriesOut { name: s.name, values: s.values }).collect(),
    }))
}

/// The top processes and headline figures of a range, folded from the agent's own store on a
/// blocking thread while holding the store-read permit the history shares (one store read at a
/// time, whichever route asked). No store (recording off, or one that cannot be opened) is an
/// answer with `available: false`, not an error.
async fn report(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["since", "from", "to", "top", "frames", "groups"])?;
    // `groups=all` (at most 64) or `groups=NAME,NAME`: the groups stored with the samples.
    let groups = match p.get("groups") {
        None | Some("") => None,
        Some("all") => Some(GroupSelect::All { max: 64 }),
        Some(names) => {
            let names: Vec<String> = names.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect();
            if names.len() > 64 {
                return Err(ApiError::bad_request("'groups' names at most 64 groups (or 'all')"));
            }
            Some(GroupSelect::Named(names))
        }
    };
    let latest = st.shared.latest();
    let now_ms = latest.unix_ms();
    let (from, to) = time_range(&p, now_ms, now_ms.saturating_sub(3_600_000), now_ms)?;
    let top = p.number::<usize>("top")?.unwrap_or(10);
    if top == 0 || top > report::MAX_TOP {
        return Err(ApiError::bad_request(format!("'top' must be between 1 and {}, got {top}", report::MAX_TOP)));
    }
    let budget = p.number::<usize>("frames")?.unwrap_or(DEFAULT_FRAMES);
    if budget == 0 || budget > MAX_REPORT_FRAMES {
        return Err(ApiError::bad_request(format!("'frames' must be between 1 and {MAX_REPORT_FRAMES}, got {budget}")));
    }
    let recording = &latest.agent.recording;
    let Some(dir) = recording.dir.clone() else {
        return Ok(json_response(&report::unavailable(
            "recording is off (proctor serve --no-record): there is no store to report from",
            from,
            to,
        )));
    };
    let failed = recording.error.clone();
    drop(latest);
    HttpCounters::bump(&st.http.report_store_requests, 1);
    let Ok(_permit) = st.store.permit.acquire().await else {
        return Ok(json_response(&report::unavailable("store reads are closed", from, to)));
    };
    let answer = tokio::task::spawn_blocking(move || {
        let shown = dir.display().to_string();
        let mut reader = match Reader::open(&dir) {
            Ok(r) => r,
            Err(e) => {
                let mut out = report::unavailable(format!("cannot read the store in {shown}: {e}"), from, to);
                out.dir = Some(shown);
                return out;
            }
        };
        // Older than the raw samples, the rollup tiers answer (hour rows for two years are
        // 17,520 rows): the span allowed is the hour tier's.
        let config = FoldConfig { budget, max_points: 1, keep_points: false, max_span: Some(MAX_TIERED_SPAN), groups };
        let (from_ns, to_ns) = (from.saturating_mul(1_000_000), to.saturating_mul(1_000_000).saturating_add(999_999));
        match fold_tiered(&dir, &mut reader, from_ns, to_ns, config) {
            Ok((fold, tier)) => {
                let mut out = report::report(&fold, &shown, top, "the agent's store");
                out.tier = tier.as_ref().map(report::TierOut::from);
                out
            }
            Err(e) => {
                let mut out = report::unavailable(format!("cannot list the store's frames: {e}"), from, to);
                out.dir = Some(shown);
                out
            }
        }
    })
    .await;
    let mut out = match answer {
        Ok(out) => out,
        Err(e) => report::unavailable(format!("the store read failed: {e}"), from, to),
    };
    HttpCounters::bump(&st.http.report_store_frames_decoded, out.frames_read as u64);
    if let Some(error) = failed {
        // Serve could not open the store for writing (another writer, say): what is there is
        // still reported, with the reason nothing new is being added.
        out.problems.insert(0, format!("not recording: {error}"));
    }
    Ok(json_response(&out))
}

async fn history_series(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let list = st.shared.with_history(|h| SeriesListOut {
        series: h.names().to_vec(),
        top_process_pids: h.top_pids(0, u64::MAX).into_iter().map(|(pid, _)| pid).take(50).collect(),
        oldest_unix_ms: h.first_ms(),
        newest_unix_ms: h.last_ms(),
    });
    Ok(json_response(&list))
}

async fn processes(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(q, &["sort", "order", "filter", "user", "state", "limit", "offset", "pss_first"])?;
    let pss_first = pss_first_param(&p)?;
    let sort = sort_param(&p)?.unwrap_or(ProcessSort::Cpu);
    let descending = match p.get("order") {
        None => sort.descending_by_default(),
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
    // The page shows these rows: their PSS is read first where they need a reading.
    for pid in pss_first {
        if s.row(pid).is_some_and(|r| r.pss.is_none_or(|p| p.stale || p.estimated_from.is_some())) {
            st.shared.ask_pss(pid);
        }
    }
    let mut rows: Vec<&proctor_model::ProcessRow> = s
        .rows
        .iter()
        .filter(|r| user.is_none_or(|u| r.uid == Some(u)))
        .filter(|r| state_filter.is_none_or(|st| r.state == st))
        .filter(|r| filter.as_deref().is_none_or(|f| matches(r, f)))
        .collect();
    sort_rows(&proctor_vocab::fields::RowCtx::of(&s), &mut rows, sort, descending);
    let matched = rows.len();
    let page = rows.into_iter().skip(offset).take(limit.unwrap_or(usize::MAX));
    Ok(json_response(&process::ProcessListOut {
        time_unix_ms: s.unix_ms(),
        total: s.rows.len(),
        matched,
        processes: page.map(|r| process::process(&s, r)).collect(),
    }))
}

/// The most pids one `pss_first` may name: as many as `top` asks for a second.
const PSS_FIRST_MAX: usize = 16;

/// `pss_first=PID,PID,…`: the processes a client shows without a PSS, to be read first.
fn pss_first_param(p: &Params) -> Result<Vec<u32>, ApiError> {
    let Some(list) = p.get("pss_first") else { return Ok(Vec::new()) };
    // Counted before any is parsed: a long list costs no more than a short one.
    let named = list.split(',').count();
    if named > PSS_FIRST_MAX {
        return Err(ApiError::bad_request(format!("'pss_first' names at most {PSS_FIRST_MAX} pids, got {named}")));
    }
    let pids = list.split(',').map(|pid| pid.parse::<u32>().ok().filter(|&p| p > 0)).collect::<Option<Vec<u32>>>();
    let pids = pids
        .ok_or_else(|| ApiError::bad_request(format!("'pss_first' must be pids separated by commas, got '{list}'")))?;
    Ok(pids)
}

async fn process(
    State(st): State<AppState>,
    pid: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let pid = parse_pid(&path_arg(pid)?)?;
    let s = st.shared.latest();
    let row = s.row(pid).ok_or_else(|| ApiError::not_found(format!("no process {pid} in the latest sample")))?;
    let sharing = process::sharing(&s, pid);
    // Someone is looking at this process: its PSS (and its family's, for the sharing summary)
    // is read first where it needs a reading (a clone's standing in is not its own), within the
    // PSS worker's budgets.
    if row.pss.is_none_or(|p| p.stale || p.estimated_from.is_some()) {
        st.shared.ask_pss(pid);
    }
    if sharing.as_ref().is_some_and(|f| f.members_read < f.members) {
        for r in s.rows.iter().filter(|r| r.ppid == pid && r.pss.is_none()).take(16) {
            st.shared.ask_pss(r.pid);
        }
    }
    Ok(json_response(&process::ProcessDetailOut { process: process::process(&s, row), sharing }))
}

async fn tree(
    State(st): State<AppState>,
    pid: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let pid = parse_pid(&path_arg(pid)?)?;
    let s = st.shared.latest();
    let t = proctor_model::build_tree(&s.rows, pid)
        .ok_or_else(|| ApiError::not_found(format!("no process {pid} in the latest sample")))?;
    Ok(json_response(&process::tree(&s, &t)))
}

async fn jupyter(State(st): State<AppState>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    Params::parse(q, &[])?;
    let s = st.shared.latest();
    let cfg = &st.config.jupyter;
    let disk = st.config.disk.as_ref().and_then(|d| d.status().usage);
    let m = jupyter_metrics(&s, cfg, disk)
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
            let families = prom::families(&s, &st.config.metrics, &st.http.out());
            let part = Bytes::from(prom::render_families(&families, openmetrics));
            *st.metrics_cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((seq, openmetrics, part.clone()));
            part
        }
    };
    let body = match (st.config.extra_metrics.as_ref(), openmetrics) {
        (None, false) if st.config.alerts.is_none() => snapshot_part,
        (extra, _) => {
            let mut joined = snapshot_part.to_vec();
            if let Some(extra) = extra {
                joined.extend_from_slice(prom::render_families(&extra(), openmetrics).as_bytes());
            }
            if let Some(alerts) = &st.config.alerts {
                joined.extend_from_slice(
                    prom::render_families(&crate::alerts::families(&alerts.status()), openmetrics).as_bytes(),
                );
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

/// A path segment, or the JSON 400 every other bad request gets (axum's own rejection is
/// text/plain), e.g. for percent-escapes that are not UTF-8 (`/%ff%fe`).
fn path_arg(arg: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    match arg {
        Ok(Path(value)) => Ok(value),
        Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
    }
}

async fn asset(path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    let path = path_arg(path)?;
    crate::assets::response(&path).ok_or_else(|| ApiError::not_found(format!("no route /{path}")))
}
