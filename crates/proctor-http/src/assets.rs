//! The dashboard's files, embedded at build time from `web/static/` (see `build.rs`), and one
//! made from the vocabulary: `js/vocabulary.js` (`proctor_vocab::js`), the field table the
//! page's columns and formats read.
//!
//! Served with a content type from the extension, `no-cache` so a new binary's page is
//! picked up, and a Content-Security-Policy that allows nothing but this origin: the page
//! makes no request to anything but the agent, and inline script is refused.

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/assets.rs"));
}

pub use embedded::FILES;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Shown instead of the dashboard when a token is required and none was presented: it stores
/// the token as a same-site cookie, which the browser then sends with every request.
pub const SIGN_IN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>proctor: sign in</title></head>
<body style="font-family: sans-serif; max-width: 30em; margin: 4em auto">
<h1>proctor</h1>
<p>This agent requires its token (<code>proctor serve --token</code>).</p>
<form method="get" action="/" onsubmit="document.cookie='proctor_token='+encodeURIComponent(this.t.value)+'; SameSite=Strict; path=/'; location.reload(); return false">
<label>Token <input name="t" type="password" autocomplete="current-password"></label>
<button>Sign in</button>
</form>
</body></html>
"#;

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// The vocabulary module's path under the dashboard's root.
pub const VOCABULARY: &str = "js/vocabulary.js";

pub fn get(path: &str) -> Option<&'static [u8]> {
    if path == VOCABULARY {
        static MODULE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        return Some(MODULE.get_or_init(proctor_vocab::js::module).as_bytes());
    }
    FILES.binary_search_by(|(p, _)| (*p).cmp(path)).ok().map(|i| FILES[i].1)
}

pub fn response(path: &str) -> Option<Response> {
    let bytes = get(path)?;
    let mut resp = Response::new(Body::from(bytes));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Some(resp)
}
