//! Who may ask: a Bearer token (or the `proctor_token` cookie the dashboard's sign-in form
//! sets) checked in one middleware, which also counts requests and client errors.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use crate::counters::HttpCounters;
use crate::params::ApiError;

/// What the middleware needs: the token (if one is required) and where to count.
#[derive(Debug, Clone)]
pub struct Auth {
    pub token: Option<Arc<str>>,
    pub http: Arc<HttpCounters>,
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
