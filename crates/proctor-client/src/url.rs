//! `http://` and `https://` URLs (and `ws://`, `wss://` for the WebSocket probe) split into what a hand-written HTTP/1.1 client needs.
//!
//! Deliberately small: no percent-decoding (the path is sent exactly as given), no userinfo
//! (credentials belong in `-H 'Authorization: …'`), no IDNA (a non-ASCII host is refused).
//! Pure: no I/O, no name resolution.

use thiserror::Error;

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https`: the connection is wrapped in TLS.
    pub tls: bool,
    /// Host name or IP literal without brackets (`::1`, not `[::1]`).
    pub host: String,
    pub port: u16,
    /// Path and query, always starting with `/`; the fragment is dropped (it is never sent).
    pub path: String,
    /// The `Host` header value: brackets kept for IPv6, the port only when not the default.
    pub authority: String,
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UrlError {
    #[error("invalid URL {0:?}: expected http:// or https://")]
    Scheme(String),
    #[error("invalid URL {0:?}: expected ws:// or wss://")]
    WsScheme(String),
    #[error("invalid URL {0:?}: no host")]
    NoHost(String),
    #[error("invalid URL {0:?}: bad port")]
    Port(String),
    #[error("invalid URL {0:?}: user info is not supported, send an Authorization header")]
    UserInfo(String),
    #[error("invalid URL {0:?}: whitespace, control or non-ASCII characters")]
    Characters(String),
}

/// Parses `http[s]://host[:port][/path][?query][#fragment]`.
pub fn parse(url: &str) -> Result<Target, UrlError> {
    parse_with(url, ("http://", "https://"), UrlError::Scheme)
}

/// Parses `ws[s]://host[:port][/path][?query]`: the same rules, `wss` wrapped in TLS.
pub fn parse_ws(url: &str) -> Result<Target, UrlError> {
    parse_with(url, ("ws://", "wss://"), UrlError::WsScheme)
}

/// A WebSocket target as a URL again: `ws://authority/path`, or `wss://` for TLS.
pub fn ws_url(target: &Target) -> String {
    format!("{}://{}{}", if target.tls { "wss" } else { "ws" }, target.authority, target.path)
}

/// `schemes`: the plain one and the TLS one.
fn parse_with(url: &str, schemes: (&str, &str), wrong_scheme: fn(String) -> UrlError) -> Result<Target, UrlError> {
    let fail = |make: fn(String) -> UrlError| make(url.to_string());
    if url.bytes().any(|byte| byte <= b' ' || byte >= 0x7f) {
        return Err(fail(UrlError::Characters));
    }
    let (tls, rest) = if let Some(rest) = strip_prefix_ignore_case(url, schemes.0) {
        (false, rest)
    } else if let Some(rest) = strip_prefix_ignore_case(url, schemes.1) {
        (true, rest)
    } else {
        return Err(fail(wrong_scheme));
    };
    let rest = rest.split('#').next().unwrap_or("");
    let split_at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split_at);
    if authority.contains('@') {
        return Err(fail(UrlError::UserInfo));
    }
    let path = if path.is_empty() {
        "/".to_string()
    } else if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let default_port = if tls { 443 } else { 80 };
    let (host, port_text) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err(fail(UrlError::NoHost));
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(fail(UrlError::Port)),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(fail(UrlError::NoHost));
    }
    let port = match port_text {
        None | Some("") => default_port,
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(fail(UrlError::Port)),
        },
    };
    let host_for_header = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    let authority = if port == default_port { host_for_header } else { format!("{host_for_header}:{port}") };
    Ok(Target { tls, host: host.to_ascii_lowercase(), port, path, authority })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expected: Result<(bool, &str, u16, &str, &str), &str>) {
        let got = parse(url)
            .map(|t| (t.tls, t.host.clone(), t.port, t.path.clone(), t.authority.clone()))
            .map_err(|e| e.to_string());
        let expected = expected
            .map(|(tls, host, port, path, authority)| {
                (tls, host.to_string(), port, path.to_string(), authority.to_string())
            })
            .map_err(str::to_string);
        assert_eq!(got, expected, "{url}");
    }

    #[test]
    fn urls() {
        check("http://example.com", Ok((false, "example.com", 80, "/", "example.com")));
        check("HTTPS://Example.com/a?b=1#frag", Ok((true, "example.com", 443, "/a?b=1", "Example.com")));
        check("http://127.0.0.1:8080?x", Ok((false, "127.0.0.1", 8080, "/?x", "127.0.0.1:8080")));
        check("http://[::1]:9/p", Ok((false, "::1", 9, "/p", "[::1]:9")));
        check("https://[::1]", Ok((true, "::1", 443, "/", "[::1]")));
        check("http://h:80/", Ok((false, "h", 80, "/", "h")));
    }

    #[test]
    fn bad_urls() {
        check("example.com", Err("invalid URL \"example.com\": expected http:// or https://"));
        check("ftp://x", Err("invalid URL \"ftp://x\": expected http:// or https://"));
        check("http:///path", Err("invalid URL \"http:///path\": no host"));
        check("http://h:99999/", Err("invalid URL \"http://h:99999/\": bad port"));
        check("http://h:0/", Err("invalid URL \"http://h:0/\": bad port"));
        check("http://h:+1/", Err("invalid URL \"http://h:+1/\": bad port"));
        check("http://[::1/", Err("invalid URL \"http://[::1/\": no host"));
        check(
            "http://u:p@h/",
            Err("invalid URL \"http://u:p@h/\": user info is not supported, send an Authorization header"),
        );
        check("http://h /", Err("invalid URL \"http://h /\": whitespace, control or non-ASCII characters"));
        check("ws://h/", Err("invalid URL \"ws://h/\": expected http:// or https://"));
    }

    #[test]
    fn websocket_urls() {
        let plain = parse_ws("ws://127.0.0.1:8888/terminals/websocket/1?token=t").expect("valid ws URL");
        assert_eq!((plain.tls, plain.port, plain.path.as_str()), (false, 8888, "/terminals/websocket/1?token=t"));
        let tls = parse_ws("WSS://echo.example").expect("valid ws URL");
        assert_eq!((tls.tls, tls.port, tls.authority.as_str()), (true, 443, "echo.example"));
        assert_eq!(ws_url(&tls), "wss://echo.example/");
        assert_eq!(
            parse_ws("http://h/").expect_err("an http URL is not a WebSocket URL").to_string(),
            "invalid URL \"http://h/\": expected ws:// or wss://"
        );
    }
}
