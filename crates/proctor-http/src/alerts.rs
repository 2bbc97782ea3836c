//! `/api/v1/alerts` (the alert engine's published status), `POST /api/v1/alerts/silences` and
//! `DELETE /api/v1/alerts/silences/ID` (the routes that change state: a silence made and one
//! ended early) and the alerts' `/metrics` families.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use proctor_alerts::engine::{AlertsOut, SilenceRequest};
use serde::Deserialize;

use crate::auth::HostRule;
use crate::params::{json_response, ApiError};
use crate::prom::{Family, Kind};
use crate::state::AppState;

/// A silence request's body is at most this long.
pub const MAX_SILENCE_BODY: usize = 16 * 1024;

fn engine(st: &AppState) -> Result<&proctor_alerts::engine::Handle, ApiError> {
    st.config.alerts.as_deref().ok_or_else(|| ApiError {
        status: StatusCode::NOT_FOUND,
        code: "no_alerts",
        message: "this agent runs no alert rules: start `proctor serve --rules FILE`".into(),
    })
}

/// The engine's status; an agent without rules answers `{"enabled": false, "reason": …}` (200,
/// so a page that asks is not a failed request).
pub(crate) async fn alerts(State(st): State<AppState>) -> Result<Response, ApiError> {
    match st.config.alerts.as_deref() {
        Some(engine) => Ok(json_response(&*engine.status())),
        None => Ok(json_response(&serde_json::json!({
            "enabled": false,
            "reason": "this agent runs no alert rules: start `proctor serve --rules FILE`",
        }))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SilenceBody {
    rule: String,
    #[serde(default)]
    matchers: BTreeMap<String, String>,
    duration_secs: f64,
    #[serde(default)]
    comment: String,
}

/// The routes that change state are behind the token, and never on a public bind that has
/// none (`--insecure`), where anyone who can reach the port could silence every alert.
fn may_change(st: &AppState) -> Result<(), ApiError> {
    if st.config.token.is_none() && st.config.hosts == HostRule::Any {
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            message: "silences need a token on a non-loopback bind: start serve with --token or --token-file".into(),
        });
    }
    Ok(())
}

pub(crate) async fn silence(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    may_change(&st)?;
    // A browser form cannot send JSON without a CORS preflight, which no route answers.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
    if !json {
        return Err(ApiError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: "send the silence as Content-Type: application/json".into(),
        });
    }
    let too_large = || ApiError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "too_large",
        message: format!("a silence is at most {MAX_SILENCE_BODY} bytes"),
    };
    // A length past the bound is refused before a byte of the body is read; a chunked body is
    // read up to the bound and no further. Either way the refusal is the JSON error shape.
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_SILENCE_BODY as u64) {
        return Err(too_large());
    }
    let read = tokio::time::timeout(crate::serve::BODY_TIMEOUT, axum::body::to_bytes(body, MAX_SILENCE_BODY));
    let body = read.await.map_err(|_| ApiError {
        status: StatusCode::REQUEST_TIMEOUT,
        code: "request_timeout",
        message: format!("the silence's body did not arrive whole within {:?}", crate::serve::BODY_TIMEOUT),
    })?;
    let body = body.map_err(|e| {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if c.is::<http_body_util::LengthLimitError>() {
                return too_large();
            }
            cause = c.source();
        }
        ApiError::bad_request(format!("the silence's body broke off: {e}"))
    })?;
    let req: SilenceBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!("a silence is {{\"rule\", \"matchers\", \"duration_secs\", \"comment\"}}: {e}"))
    })?;
    let out = engine(&st)?
        .silence(SilenceRequest {
            rule: req.rule,
            matchers: req.matchers,
            duration_secs: req.duration_secs,
            comment: req.comment,
        })
        .map_err(ApiError::bad_request)?;
    let mut resp = json_response(&out);
    *resp.status_mut() = StatusCode::CREATED;
    Ok(resp)
}

/// `DELETE /api/v1/alerts/silences/ID`: ends a silence now (`proctor alerts silence --expire
/// ID`, as `amtool silence expire`). A browser cannot send a DELETE across origins without a
/// CORS preflight, which no route answers.
pub(crate) async fn expire(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    may_change(&st)?;
    let text = id.map(|Path(p)| p).map_err(|_| ApiError::bad_request("a silence's id is a number".to_string()))?;
    let id: u64 =
        text.parse().map_err(|_| ApiError::bad_request(format!("a silence's id is a number, not {text:?}")))?;
    let out = engine(&st)?.expire(id).map_err(|message| ApiError {
        status: StatusCode::NOT_FOUND,
        code: "no_silence",
        message,
    })?;
    Ok(json_response(&out))
}

/// The alerts' families: one `proctor_alerts` series per rule and state (bounded by the rules),
/// evaluation cost, and each receiver's counters.
pub fn families(out: &AlertsOut) -> Vec<Family> {
    let mut alerts =
        Family::new("proctor_alerts", Kind::Gauge, "Alert instances per rule and state (pending, firing).");
    for r in &out.rules {
        for state in ["pending", "firing"] {
            let n = r.instances.iter().filter(|i| i.state == state).count();
            alerts.push(
                vec![("rule", r.name.clone()), ("severity", r.severity.clone()), ("state", state.to_string())],
                n as f64,
            );
        }
    }
    let mut evals =
        Family::new("proctor_alerts_evaluations", Kind::Counter, "Evaluations of the rule set (one per sample).");
    evals.push(vec![], out.evaluations_total as f64);
    let mut cpu =
        Family::new("proctor_alerts_evaluation_cpu_seconds", Kind::Counter, "CPU time spent evaluating rules.");
    cpu.push(vec![], out.evaluation_cpu_seconds_total);
    let mut last =
        Family::new("proctor_alerts_last_evaluation_cpu_seconds", Kind::Gauge, "CPU time of the last evaluation.");
    last.push(vec![], out.last_evaluation_cpu_seconds);
    let mut skipped = Family::new(
        "proctor_alerts_snapshots_skipped",
        Kind::Counter,
        "Samples not evaluated because the engine was busy.",
    );
    skipped.push(vec![], out.snapshots_skipped_total as f64);
    let mut notes =
        Family::new("proctor_alerts_notifications", Kind::Counter, "Notifications made (each to every receiver).");
    notes.push(vec![], out.notifications_total as f64);
    let mut delivered = Family::new("proctor_alerts_receiver_delivered", Kind::Counter, "Payloads a receiver took.");
    let mut failed =
        Family::new("proctor_alerts_receiver_failed_attempts", Kind::Counter, "Delivery attempts that failed.");
    let mut given_up =
        Family::new("proctor_alerts_receiver_given_up", Kind::Counter, "Payloads given up (refused, out of retries).");
    let mut dropped =
        Family::new("proctor_alerts_receiver_dropped", Kind::Counter, "Payloads dropped on a full queue.");
    for r in &out.receivers {
        let labels = || vec![("receiver", r.kind.to_string()), ("target", r.target.clone())];
        delivered.push(labels(), r.delivered_total as f64);
        failed.push(labels(), r.failed_attempts_total as f64);
        given_up.push(labels(), r.given_up_total as f64);
        dropped.push(labels(), r.dropped_total as f64);
    }
    vec![alerts, evals, cpu, last, skipped, notes, delivered, failed, given_up, dropped]
}
