//! One remote-write POST: a fresh connection (`proctor_client::client::connect`: every address
//! tried, TLS through its rustls setup), the request with `Connection: close`, the reply's
//! status, `Retry-After`, `Location` and the start of its body (the receiver's message). The
//! remote's timeout bounds the whole request, connect to the reply's end; nothing is unbounded.

use std::io::Write;
use std::time::{Duration, Instant};

use proctor_client::client::{classify_io, read_some, remaining};
use proctor_client::outcome::ErrorClass;
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
    /// `Location` (a redirect's target), as text.
    pub location: Option<String>,
    /// The body's first bytes as text: the receiver's reason on an error.
    pub message: String,
    /// Any of remote write 2.0's `X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written`
    /// came: the receiver took version 2.0 (`Some(samples written)`, 0 when only the others came).
    pub written: Option<u64>,
    /// The body's first bytes as they came (an OTLP `partial_success`).
    pub body: Vec<u8>,
}

/// The most reply bytes read: a receiver's error message is short, and a reply is never a way
/// to make the agent buffer without bound.
const MAX_REPLY: usize = 64 * 1024;
/// The most of a receiver's message kept for counters and the API.
const MAX_MESSAGE: usize = 512;
/// The most of a reply's body kept as bytes.
const MAX_BODY: usize = 4096;
/// The request goes out in pieces of this size, the deadline checked between them.
const WRITE_PIECE: usize = 64 * 1024;

/// Sends `body` (already compressed) with the protocol's `headers` (content type, encoding,
/// version) and reads the reply, all within the endpoint's timeout from connect to the reply's
/// end: a receiver that drip-feeds its reply (a byte every few seconds keeps a per-read timeout
/// from ever firing) is cut off at the deadline. `Err`: no reply (connect, TLS, write or read
/// failed or timed out, or the reply was not HTTP), in words.
pub fn post(endpoint: &Endpoint, headers: &[(&str, &str)], body: &[u8]) -> Result<Reply, String> {
    let t = &endpoint.target;
    let deadline = Instant::now() + endpoint.timeout;
    let timed_out = || format!("no reply from {} within the {:?} timeout", endpoint.url, endpoint.timeout);
    let mut stream = proctor_client::client::connect(t, endpoint.tls.as_ref(), endpoint.timeout)?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: proctor/{}\r\nContent-Length: {}\r\nConnection: close\r\n",
        t.path,
        t.authority,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    let protocol = headers.iter().map(|&(n, v)| (n, v));
    for (name, value) in protocol.chain(endpoint.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()))) {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    // Written a piece at a time with the socket's timeout set to what is left, so a receiver
    // that reads slowly cannot stretch the request past its deadline either.
    for piece in request.chunks(WRITE_PIECE) {
        let left = remaining(deadline).map_err(|_| timed_out())?;
        stream.tcp().set_write_timeout(Some(left)).map_err(|e| e.to_string())?;
        stream.write_all(piece).map_err(|e| match classify_io(&e) {
            ErrorClass::Timeout => timed_out(),
            _ => format!("send to {}: {e}", endpoint.url),
        })?;
    }
    stream.flush().map_err(|e| format!("send to {}: {e}", endpoint.url))?;
    let mut reply = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    while reply.len() < MAX_REPLY {
        match read_some(&mut stream, &mut chunk, deadline) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            // A TLS peer that closes without close_notify: what came is the reply.
            Err(Some(f)) if f.class == ErrorClass::Tls && f.detail.contains("close_notify") => break,
            // The final head came; a body cut short (or still coming at the deadline) still
            // tells the status.
            Err(_) if parse_reply(&reply).is_some() => break,
            Err(Some(f)) if f.class == ErrorClass::Timeout => return Err(timed_out()),
            Err(f) => {
                let why = f.map_or_else(|| "connection closed".to_string(), |f| f.detail);
                return Err(format!("reply from {}: {why}", endpoint.url));
            }
        }
    }
    parse_reply(&reply).ok_or_else(|| {
        if reply.starts_with(b"HTTP/1.") {
            return format!("reply from {} ended without a final response (an interim 1xx at most)", endpoint.url);
        }
        format!("reply from {} is not HTTP: {:?}", endpoint.url, String::from_utf8_lossy(&reply[..reply.len().min(80)]))
    })
}

/// Status, `Retry-After` (seconds), `Location` and the body's start, from a whole reply. Interim
/// responses (`100 Continue`, `103 Early Hints`) are skipped: the status is the final one's, and
/// a reply with no final head is no reply.
pub fn parse_reply(reply: &[u8]) -> Option<Reply> {
    let mut reply = reply;
    loop {
        let end = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = std::str::from_utf8(&reply[..end]).ok()?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next()?;
        let mut words = status_line.split(' ');
        if !words.next()?.starts_with("HTTP/1.") {
            return None;
        }
        let status: u16 = words.next()?.parse().ok()?;
        if (100..200).contains(&status) && status != 101 {
            reply = &reply[end + 4..];
            continue;
        }
        let mut retry_after = None;
        let mut location = None;
        let mut chunked = false;
        let mut written = None;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            let name = name.trim();
            if name.eq_ignore_ascii_case("retry-after") {
                retry_after = value.trim().parse::<u64>().ok().map(Duration::from_secs);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.len() > 26
                && name.is_char_boundary(26)
                && name[..26].eq_ignore_ascii_case("x-prometheus-remote-write-")
                && name.to_ascii_lowercase().ends_with("-written")
            {
                let n = value.trim().parse::<u64>().unwrap_or(0);
                let samples = name.eq_ignore_ascii_case("x-prometheus-remote-write-samples-written");
                let so_far = written.unwrap_or(0);
                written = Some(if samples { so_far + n } else { so_far });
            } else if name.eq_ignore_ascii_case("location") {
                let mut text: String = value.trim().chars().take(MAX_MESSAGE).collect();
                text.retain(|c| !c.is_control());
                location = Some(text);
            }
        }
        let raw = &reply[end + 4..];
        let body = if chunked { proctor_client::http::dechunk(raw).0 } else { raw.to_vec() };
        let mut message = String::from_utf8_lossy(&body[..body.len().min(MAX_MESSAGE)]).trim().to_string();
        message.retain(|c| !c.is_control() || c == ' ');
        let body = body[..body.len().min(MAX_BODY)].to_vec();
        return Some(Reply { status, retry_after, location, message, written, body });
    }
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
        assert_eq!((r.status, r.retry_after, r.message.as_str(), r.written), (204, None, "", None));
        // Remote write 2.0's answer: what was written, in headers.
        let r = parse_reply(
            b"HTTP/1.1 204 No Content\r\nX-Prometheus-Remote-Write-Samples-Written: 12\r\n\
              x-prometheus-remote-write-exemplars-written: 0\r\n\r\n",
        )
        .expect("a reply");
        assert_eq!(r.written, Some(12));
        let r = parse_reply(b"HTTP/1.1 204 No Content\r\nX-Prometheus-Remote-Write-Histograms-Written: 0\r\n\r\n")
            .expect("a reply");
        assert_eq!(r.written, Some(0), "any written header says 2.0 was taken");
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

    /// A loopback receiver for one request: reads it whole, then writes `answer` a piece at a
    /// time, `pause` between pieces, and closes.
    fn receiver(answer: Vec<Vec<u8>>, pause: Duration) -> Endpoint {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/api/v1/write", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            // The request ends with its 4-byte body.
            while !data.ends_with(b"body") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => data.extend_from_slice(&buf[..n]),
                }
            }
            for piece in answer {
                if stream.write_all(&piece).is_err() {
                    return;
                }
                std::thread::sleep(pause);
            }
        });
        Endpoint {
            target: proctor_client::url::parse(&url).expect("url"),
            url,
            tls: None,
            headers: Vec::new(),
            timeout: Duration::from_millis(500),
        }
    }

    /// Issue 33 item 9: a receiver that sends its reply a byte at a time, each well within a
    /// read timeout, used to hold the queue for as long as it liked; the timeout bounds the whole
    /// request and says so.
    #[test]
    fn a_drip_fed_reply_is_cut_off_at_the_timeout() {
        // 80 bytes, 50 ms apart: 4 s of dripping against a 500 ms timeout, then a close.
        let drip = b"HTTP/1.1 204 No Content\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            .iter()
            .map(|&b| vec![b])
            .collect();
        let endpoint = receiver(drip, Duration::from_millis(50));
        let got = post(&endpoint, &[("Content-Type", "application/x-protobuf")], b"body");
        let err = got.expect_err("no whole reply came within the timeout");
        assert!(err.contains("within the 500ms timeout"), "{err}");
    }

    /// Issue 33 item 8: `100 Continue` before the real answer is not the answer.
    #[test]
    fn an_interim_100_is_skipped_for_the_final_status() {
        let answer = vec![b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()];
        let endpoint = receiver(answer, Duration::from_millis(20));
        let reply = post(&endpoint, &[("Content-Type", "application/x-protobuf")], b"body").expect("a reply");
        assert_eq!(reply.status, 204);
        // Only an interim answer, then a close: no reply at all, not a status to act on.
        let endpoint = receiver(vec![b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()], Duration::ZERO);
        let err =
            post(&endpoint, &[("Content-Type", "application/x-protobuf")], b"body").expect_err("no final response");
        assert!(err.contains("without a final response"), "{err}");
        let r = parse_reply(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://b/w\r\n\r\n").expect("a reply");
        assert_eq!((r.status, r.location.as_deref()), (307, Some("http://b/w")));
    }
}
