//! One remote-write POST: a fresh connection (`proctor_client::client::connect`: every address
//! tried, TLS through its rustls setup), the request with `Connection: close`, the reply's
//! status, `Retry-After` and the start of its body (the receiver's message). Every step has the
//! remote's timeout; nothing is unbounded.

use std::io::{Read, Write};
use std::time::Duration;

use proctor_client::tls::TlsConfig;
use proctor_client::url::Target;

/// Where a queue sends and how.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// As given, for messages and the API.
    pub url: String,
    pub target: Target,
    /// `https` only.
    pub tls: Option<TlsConfig>,
    /// Extra headers (`--remote-write-header`, the bearer token, basic auth), sent as given.
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

/// What the receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// `Retry-After` in seconds (the HTTP-date form is not honoured: it is said as absent).
    pub retry_after: Option<Duration>,
    /// The body's first bytes as text: the receiver's reason on an error.
    pub message: String,
}

/// The most reply bytes read: a receiver's error message is short, and a reply is never a way
/// to make the agent buffer without bound.
const MAX_REPLY: usize = 64 * 1024;
/// The most of a receiver's message kept for counters and the API.
const MAX_MESSAGE: usize = 512;

/// Sends `body` (already compressed) and reads the reply. `Err`: no reply (connect, TLS, write
/// or read failed, or the reply was not HTTP), in words.
pub fn post(endpoint: &Endpoint, content_type: &str, version: &str, body: &[u8]) -> Result<Reply, String> {
    let t = &endpoint.target;
    let mut stream = proctor_client::client::connect(t, endpoint.tls.as_ref(), endpoint.timeout)?;
    stream.tcp().set_read_timeout(Some(endpoint.timeout)).map_err(|e| e.to_string())?;
    stream.tcp().set_write_timeout(Some(endpoint.timeout)).map_err(|e| e.to_string())?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: proctor/{}\r\nContent-Type: {content_type}\r\n\
         Content-Encoding: snappy\r\nX-Prometheus-Remote-Write-Version: {version}\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        t.path,
        t.authority,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    for (name, value) in &endpoint.headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request).and_then(|()| stream.flush()).map_err(|e| format!("send to {}: {e}", endpoint.url))?;
    let mut reply = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    while reply.len() < MAX_REPLY {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            // A TLS peer that closes without close_notify: what came is the reply.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) if !reply.is_empty() && has_whole_head(&reply) => {
                // The head came; a body cut short still tells the status.
                let _ = e;
                break;
            }
            Err(e) => return Err(format!("reply from {}: {e}", endpoint.url)),
        }
    }
    parse_reply(&reply).ok_or_else(|| {
        format!("reply from {} is not HTTP: {:?}", endpoint.url, String::from_utf8_lossy(&reply[..reply.len().min(80)]))
    })
}

fn has_whole_head(reply: &[u8]) -> bool {
    reply.windows(4).any(|w| w == b"\r\n\r\n")
}

/// Status, `Retry-After` (seconds) and the body's start, from a whole reply.
pub fn parse_reply(reply: &[u8]) -> Option<Reply> {
    let end = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&reply[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut words = status_line.split(' ');
    if !words.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = words.next()?.parse().ok()?;
    let mut retry_after = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        if name.trim().eq_ignore_ascii_case("retry-after") {
            retry_after = value.trim().parse::<u64>().ok().map(Duration::from_secs);
        } else if name.trim().eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let raw = &reply[end + 4..];
    let body = if chunked { proctor_client::http::dechunk(raw).0 } else { raw.to_vec() };
    let mut message = String::from_utf8_lossy(&body[..body.len().min(MAX_MESSAGE)]).trim().to_string();
    message.retain(|c| !c.is_control() || c == ' ');
    Some(Reply { status, retry_after, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_gives_its_status_retry_after_and_message() {
        let r = parse_reply(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 9\r\n\r\nslow down")
            .expect("a reply");
        assert_eq!((r.status, r.retry_after, r.message.as_str()), (429, Some(Duration::from_secs(7)), "slow down"));
        let r = parse_reply(b"HTTP/1.1 204 No Content\r\n\r\n").expect("a reply");
        assert_eq!((r.status, r.retry_after, r.message.as_str()), (204, None, ""));
        // An HTTP-date is not honoured, and says so by being absent.
        let r = parse_reply(b"HTTP/1.1 503 x\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n").expect("a reply");
        assert_eq!(r.retry_after, None);
        // A chunked message (Node's and others' way for bodies of unknown length) is its data.
        let r = parse_reply(
            b"HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ntsdb is closed\r\n3\r\n!!!\r\n0\r\n\r\n",
        )
        .expect("a reply");
        assert_eq!(r.message, "tsdb is closed!!!");
        assert!(parse_reply(b"SSH-2.0-OpenSSH\r\n\r\n").is_none());
        assert!(parse_reply(b"HTTP/1.1 200 OK\r\n").is_none(), "no end of head");
    }
}
