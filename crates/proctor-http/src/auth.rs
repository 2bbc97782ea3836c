//! Who may ask: a Bearer token (or the `proctor_token` cookie the dashboard's sign-in form
//! sets) checked in one middleware, which also counts requests and client errors, and which
//! refuses requests meant for another site before anything else: a `Host` that is not this
//! agent's on a tokenless loopback bind (DNS rebinding: a page on `attacker.example` whose name
//! now resolves to 127.0.0.1 would otherwise read the process list), and any browser request
//! sent from another origin (`Origin` naming another host, `Sec-Fetch-Site: cross-site`).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use crate::counters::HttpCounters;
use crate::params::ApiError;

/// What the middleware needs: the token (if one is required), which `Host`s to answer, and
/// where to count.
#[derive(Debug, Clone)]
pub struct Auth {
    pub token: Option<Arc<str>>,
    pub hosts: HostRule,
    pub http: Arc<HttpCounters>,
}

/// Which `Host` header values are answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HostRule {
    /// Any: the bind is public and a token guards it, or `--insecure` said so.
    #[default]
    Any,
    /// Loopback names and addresses (`localhost`, `127.0.0.0/8`, `::1`) and these names: the
    /// rule for a loopback bind without a token, where the `Host` is all that tells a local
    /// client from a rebound page.
    Loopback { also: Vec<String> },
}

impl HostRule {
    /// Whether a request with this `Host` header value (port and all) is answered.
    pub fn allows(&self, host: &str) -> bool {
        let HostRule::Loopback { also } = self else { return true };
        let name = host_name(host);
        is_loopback_name(name) || also.iter().any(|a| a.eq_ignore_ascii_case(name))
    }
}

/// `Host` without its port: `[::1]:9465` → `::1`, `localhost:9465` → `localhost`.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn is_loopback_name(name: &str) -> bool {
    let lower = name.trim_end_matches('.').to_ascii_lowercase();
    lower == "localhost"
        || lower.ends_with(".localhost")
        || lower.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a request comes from another site, if it does: a `Host` outside the rule, an `Origin`
/// whose host is not the `Host`, or a browser's own `Sec-Fetch-Site: cross-site`.
fn foreign(headers: &HeaderMap, hosts: &HostRule) -> Option<String> {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let host = text(header::HOST);
    if host.is_none() && headers.contains_key(header::HOST) && *hosts != HostRule::Any {
        // Not text: no loopback name, and not to be waved through for want of one.
        return Some("the Host header is not text".to_string());
    }
    if let Some(host) = &host {
        if !hosts.allows(host) {
            return Some(format!("Host '{host}' is not this agent (a loopback agent without a token answers loopback names only; see --allow-host)"));
        }
    }
    if let Some(origin) = text(header::ORIGIN) {
        let origin_host = origin.split_once("://").map_or(origin.as_str(), |(_, rest)| rest);
        if origin != "null" && host.as_deref().is_some_and(|h| !h.eq_ignore_ascii_case(origin_host)) {
            return Some(format!("a request from the page at {origin} is cross-origin"));
        }
    }
    if headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes() == b"cross-site") {
        return Some("a cross-site browser request".to_string());
    }
    None
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
pub async fn guard(State(auth): State<Auth>, req: Request, next: Next) -> Response {
    let http = &auth.http;
    HttpCounters::bump(&http.requests, 1);
    if let Some(why) = foreign(req.headers(), &auth.hosts) {
        HttpCounters::bump(&http.foreign_host_refused, 1);
        HttpCounters::bump(&http.client_errors, 1);
        return ApiError { status: StatusCode::FORBIDDEN, code: "forbidden", message: why }.into_response();
    }
    if let Some(token) = auth.token.as_ref() {
        let ok = presented_token(req.headers()).is_some_and(|t| token_matches(t, token.as_bytes()));
        if !ok {
            HttpCounters::bump(&http.unauthorized, 1);
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
        HttpCounters::bump(&http.client_errors, 1);
    }
    resp
}
