//! Requests in and errors out: query parameters (each allowed once, unknown names refused),
//! time ranges (`since` in the one duration grammar, or `from`/`to`), pids, and the JSON error
//! body every route answers with (`{"error": {"code", "message"}}`).

use std::collections::HashSet;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: ErrorOut,
}

#[derive(Debug, Serialize)]
pub struct ErrorOut {
    /// Machine-readable: `not_found`, `bad_request`, `unauthorized`, `forbidden`,
    /// `method_not_allowed`.
    pub code: &'static str,
    pub message: String,
}

/// A JSON error response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, code: "bad_request", message: message.into() }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self { status: StatusCode::NOT_FOUND, code: "not_found", message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorOut { code: self.code, message: self.message } };
        let mut resp = json_response(&body);
        *resp.status_mut() = self.status;
        resp
    }
}

/// `value` as a JSON response that is never cached.
pub fn json_response<T: Serialize>(value: &T) -> Response {
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

/// Query parameters, each allowed at most once; any name outside `allowed` is a 400.
#[derive(Debug)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(raw: Option<String>, allowed: &[&str]) -> Result<Self, ApiError> {
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

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ApiError> {
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

pub fn parse_pid(raw: &str) -> Result<u32, ApiError> {
    match raw.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(ApiError::bad_request(format!("'{raw}' is not a pid"))),
    }
}

/// `since` (a span back from `now_ms`) or `from`, and `to` (Unix ms), as `/api/v1/history`
/// and `/api/v1/report` take them; `default_from`/`default_to` when not given.
pub fn time_range(p: &Params, now_ms: u64, default_from: u64, default_to: u64) -> Result<(u64, u64), ApiError> {
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
