//! HTTP/1.1 wire format for the client: the request bytes, the response head and the body
//! framing (`Content-Length`, `chunked`, or until the server closes).
//!
//! Pure: bytes in, values out; sockets live in `client`. Not a general HTTP library: no
//! pipelining, no `Expect: 100-continue`, no compression (we send no `Accept-Encoding`, so a
//! compliant server sends identity), no upgrades. Interim `1xx` responses are skipped.

use thiserror::Error;

use crate::url::Target;

/// What a request carries besides the URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: String,
    /// Extra headers in order; one of ours with the same name is then not sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Ask the server to close after the response (`--no-reuse`).
    pub close: bool,
}

/// The request as it goes on the wire, built once per run and written in one `write`.
pub fn build_request(target: &Target, spec: &RequestSpec) -> Vec<u8> {
    let method = if spec.method.is_empty() { "GET" } else { spec.method.as_str() };
    let mut out = format!("{method} {} HTTP/1.1\r\n", target.path).into_bytes();
    let has = |name: &str| spec.headers.iter().any(|(key, _)| key.eq_ignore_ascii_case(name));
    let mut ours: Vec<(&str, String)> = vec![
        ("Host", target.authority.clone()),
        ("User-Agent", concat!("proctor-probe/", env!("CARGO_PKG_VERSION")).to_string()),
        ("Accept", "*/*".to_string()),
    ];
    if !spec.body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        ours.push(("Content-Length", spec.body.len().to_string()));
    }
    if spec.close {
        ours.push(("Connection", "close".to_string()));
    }
    for (name, value) in ours.iter().filter(|(name, _)| !has(name)) {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    for (name, value) in &spec.headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&spec.body);
    out
}

/// A malformed response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HttpError {
    #[error("malformed status line")]
    StatusLine,
    #[error("malformed header line")]
    Header,
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    #[error("bad Content-Length")]
    ContentLength,
    #[error("malformed chunked body")]
    Chunked,
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Read until the server closes; the connection cannot be reused.
    UntilClose,
}

/// The parsed status line and the headers that matter to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head including the blank line.
    pub length: usize,
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// The head has at least one `Server-Timing` header (read with [`header_values`]), so a
    /// response without one costs nothing more.
    pub server_timing: bool,
}

/// A head larger than this is refused rather than buffered without bound.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Parses a response head from the start of `buffer`. `Ok(None)`: not complete yet.
/// `head_request`: the response to HEAD has no body whatever its headers say.
pub fn parse_head(buffer: &[u8], head_request: bool) -> Result<Option<Head>, HttpError> {
    let Some(end) = find_head_end(buffer) else {
        if buffer.len() > MAX_HEAD_BYTES {
            return Err(HttpError::HeadTooLarge(MAX_HEAD_BYTES));
        }
        return Ok(None);
    };
    let text = &buffer[..end];
    let mut lines = text.split(|&byte| byte == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().ok_or(HttpError::StatusLine)?;
    let (version, status) = parse_status_line(status_line)?;
    let mut keep_alive = version >= 1;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut server_timing = false;
    for line in lines.filter(|line| !line.is_empty()) {
        let colon = line.iter().position(|&byte| byte == b':').ok_or(HttpError::Header)?;
        let name = &line[..colon];
        let value = trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(value).map_err(|_| HttpError::ContentLength)?;
            let length: u64 = text.parse().map_err(|_| HttpError::ContentLength)?;
            // Two different lengths are a smuggling signature: refuse rather than pick one.
            if content_length.is_some_and(|previous| previous != length) {
                return Err(HttpError::ContentLength);
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value
                .split(|&byte| byte == b',')
                .next_back()
                .is_some_and(|last| trim(last).eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"server-timing") {
            server_timing = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&byte| byte == b',') {
                if trim(token).eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if trim(token).eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        }
    }
    let framing = if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(length) = content_length {
        if length == 0 {
            Framing::Empty
        } else {
            Framing::Length(length)
        }
    } else {
        keep_alive = false;
        Framing::UntilClose
    };
    Ok(Some(Head { status, length: end, framing, keep_alive, server_timing }))
}

/// The values of every header called `name` (any case) in a head that [`parse_head`] accepted,
/// in order, trimmed. Obsolete line folding is not joined: each line is a header.
pub fn header_values<'a>(head: &'a [u8], name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    head.split(|&byte| byte == b'\n').skip(1).filter_map(move |line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&byte| byte == b':')?;
        line[..colon].eq_ignore_ascii_case(name).then(|| trim(&line[colon + 1..]))
    })
}

/// Index just past the `\r\n\r\n` (or bare `\n\n`) ending the head.
fn find_head_end(buffer: &[u8]) -> Option<usize> {
    let mut index = 0;
    while let Some(offset) = buffer[index..].iter().position(|&byte| byte == b'\n') {
        let newline = index + offset;
        let next = &buffer[newline + 1..];
        if next.starts_with(b"\n") {
            return Some(newline + 2);
        }
        if next.starts_with(b"\r\n") {
            return Some(newline + 3);
        }
        index = newline + 1;
    }
    None
}

/// `HTTP/1.1 200 OK` → (minor version, status).
fn parse_status_line(line: &[u8]) -> Result<(u8, u16), HttpError> {
    let rest = line.strip_prefix(b"HTTP/1.").ok_or(HttpError::StatusLine)?;
    let (&minor, rest) = rest.split_first().ok_or(HttpError::StatusLine)?;
    if !minor.is_ascii_digit() || rest.first() != Some(&b' ') || rest.len() < 4 {
        return Err(HttpError::StatusLine);
    }
    let digits = &rest[1..4];
    if !digits.iter().all(u8::is_ascii_digit) || rest.get(4).is_some_and(|&byte| byte != b' ') {
        return Err(HttpError::StatusLine);
    }
    let status = digits.iter().fold(0u16, |value, &digit| value * 10 + u16::from(digit - b'0'));
    Ok((minor - b'0', status))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|byte| !byte.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|byte| !byte.is_ascii_whitespace()).map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// The data of a chunked body as far as it is whole, and whether it ended with its last
/// (zero-size) chunk. Extensions and trailers are dropped; a malformed size line ends the data
/// there, and a chunk cut short gives what came of it.
pub fn dechunk(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = raw.windows(2).position(|pair| pair == b"\r\n") else { return (out, false) };
        let size_text = std::str::from_utf8(&raw[..line_end]).unwrap_or("");
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16) else {
            return (out, false);
        };
        let start = line_end + 2;
        if size == 0 {
            return (out, true);
        }
        let Some(data) = raw.get(start..start.saturating_add(size)) else {
            out.extend_from_slice(&raw[start.min(raw.len())..]);
            return (out, false);
        };
        out.extend_from_slice(data);
        raw = raw.get(start + size + 2..).unwrap_or(&[]);
    }
}

/// Incremental decoder of a `Transfer-Encoding: chunked` body; counts payload bytes.
#[derive(Debug, Clone, Default)]
pub struct ChunkedDecoder {
    state: ChunkState,
    /// Payload bytes seen so far.
    pub body_bytes: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    SizeStart,
    Size {
        value: u64,
        extension: bool,
    },
    SizeLf {
        value: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    FinalLf,
    Done,
}

impl ChunkedDecoder {
    /// Feeds bytes; returns how many were used and whether the body is complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, bool), HttpError> {
        let mut index = 0;
        while index < data.len() {
            if self.state == ChunkState::Done {
                break;
            }
            if let ChunkState::Data(remaining) = self.state {
                let take = remaining.min((data.len() - index) as u64);
                self.body_bytes += take;
                index += take as usize;
                self.state = if take == remaining { ChunkState::DataCr } else { ChunkState::Data(remaining - take) };
                continue;
            }
            let byte = data[index];
            index += 1;
            self.state = match (self.state, byte) {
                (ChunkState::SizeStart, byte) if byte.is_ascii_hexdigit() => {
                    ChunkState::Size { value: u64::from(hex(byte)), extension: false }
                }
                (ChunkState::Size { value, extension: false }, byte) if byte.is_ascii_hexdigit() => {
                    let value = value.checked_mul(16).ok_or(HttpError::Chunked)? + u64::from(hex(byte));
                    ChunkState::Size { value, extension: false }
                }
                (ChunkState::Size { value, .. }, b'\r') => ChunkState::SizeLf { value },
                (ChunkState::Size { value, .. } | ChunkState::SizeLf { value }, b'\n') => {
                    if value == 0 {
                        ChunkState::TrailerStart
                    } else {
                        ChunkState::Data(value)
                    }
                }
                (ChunkState::Size { value, .. }, b';' | b' ' | b'\t') => ChunkState::Size { value, extension: true },
                (ChunkState::Size { value, extension: true }, _) => ChunkState::Size { value, extension: true },
                (ChunkState::DataCr, b'\r') => ChunkState::DataLf,
                (ChunkState::DataCr | ChunkState::DataLf, b'\n') => ChunkState::SizeStart,
                (ChunkState::TrailerStart, b'\r') => ChunkState::FinalLf,
                (ChunkState::TrailerStart | ChunkState::FinalLf, b'\n') => ChunkState::Done,
                (ChunkState::Trailer, b'\n') => ChunkState::TrailerStart,
                (ChunkState::TrailerStart | ChunkState::Trailer, _) => ChunkState::Trailer,
                _ => return Err(HttpError::Chunked),
            };
        }
        Ok((index, self.state == ChunkState::Done))
    }
}

fn hex(byte: u8) -> u8 {
    match byte {
        b'0'..=b'9' => byte - b'0',
        b'a'..=b'f' => byte - b'a' + 10,
        _ => byte - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, HttpError> {
        parse_head(text.as_bytes(), false)
    }

    #[test]
    fn heads() {
        let ok = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").expect("valid");
        assert_eq!(
            ok,
            Some(Head { status: 200, length: 38, framing: Framing::Length(5), keep_alive: true, server_timing: false })
        );
        let chunked = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n");
        assert_eq!(chunked.expect("valid").map(|h| (h.framing, h.keep_alive)), Some((Framing::Chunked, false)));
        let old = head("HTTP/1.0 200 OK\nContent-Length: 1\n\n");
        assert_eq!(old.expect("valid").map(|h| (h.length, h.keep_alive)), Some((35, false)));
        let close = head("HTTP/1.1 404 Not Found\r\n\r\n").expect("valid").expect("complete");
        assert_eq!((close.status, close.framing, close.keep_alive), (404, Framing::UntilClose, false));
        let empty = head("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n").expect("valid");
        assert_eq!(empty.map(|h| h.framing), Some(Framing::Empty));
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).expect("ok").map(|h| h.framing),
            Some(Framing::Empty)
        );
        assert_eq!(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"), Ok(None));
    }

    #[test]
    fn dechunk_gives_the_data_and_says_whether_it_ended() {
        assert_eq!(
            dechunk(b"e\r\ntsdb is closed\r\n3;x=1\r\n!!!\r\n0\r\nTrailer: t\r\n\r\n"),
            (b"tsdb is closed!!!".to_vec(), true)
        );
        assert_eq!(dechunk(b"5\r\nhel"), (b"hel".to_vec(), false), "a chunk cut short gives what came");
        assert_eq!(dechunk(b"2\r\nok\r\nzz\r\n"), (b"ok".to_vec(), false), "a bad size line ends the data");
        assert_eq!(dechunk(b""), (Vec::new(), false));
    }

    #[test]
    fn server_timing_headers_are_noticed_and_read_in_order() {
        let text =
            "HTTP/1.1 200 OK\r\nServer-Timing: db;dur=1\r\nContent-Length: 0\r\nserver-timing:  app;dur=2 \r\n\r\n";
        let found = head(text).expect("valid").expect("complete");
        assert!(found.server_timing);
        let values: Vec<&[u8]> = header_values(&text.as_bytes()[..found.length], b"Server-Timing").collect();
        assert_eq!(values, [&b"db;dur=1"[..], b"app;dur=2"]);
        assert!(
            !head("HTTP/1.1 200 OK\r\nX-Server-Timing: a\r\n\r\n").expect("valid").expect("complete").server_timing
        );
    }

    #[test]
    fn bad_heads() {
        assert_eq!(head("SSH-2.0-OpenSSH\r\n\r\n"), Err(HttpError::StatusLine));
        assert_eq!(head("HTTP/1.1 2000 OK\r\n\r\n"), Err(HttpError::StatusLine));
        assert_eq!(head("HTTP/1.1 200 OK\r\nno colon\r\n\r\n"), Err(HttpError::Header));
        assert_eq!(head("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"), Err(HttpError::ContentLength));
        assert_eq!(
            head("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(HttpError::ContentLength)
        );
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD_BYTES));
        assert_eq!(head(&huge), Err(HttpError::HeadTooLarge(MAX_HEAD_BYTES)));
    }

    #[test]
    fn chunked_in_any_split() {
        let body = b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        for split in 0..body.len() - 4 {
            let mut decoder = ChunkedDecoder::default();
            let (used, done) = decoder.feed(&body[..split]).expect("valid prefix");
            assert_eq!(used, split);
            assert!(!done, "split {split}");
            let (used, done) = decoder.feed(&body[split..]).expect("valid rest");
            assert!(done);
            assert_eq!(split + used, body.len() - 4, "stops before the next response");
            assert_eq!(decoder.body_bytes, 31);
        }
    }

    #[test]
    fn chunked_garbage() {
        assert_eq!(ChunkedDecoder::default().feed(b"zz\r\n"), Err(HttpError::Chunked));
        assert_eq!(ChunkedDecoder::default().feed(b"1\r\nab"), Err(HttpError::Chunked));
        assert_eq!(ChunkedDecoder::default().feed(b"ffffffffffffffffff\r\n"), Err(HttpError::Chunked));
    }

    #[test]
    fn requests() {
        let target = crate::url::parse("http://h:8/p?q").expect("valid");
        let spec = RequestSpec {
            method: "POST".into(),
            headers: vec![("user-agent".into(), "me".into())],
            body: b"{}".to_vec(),
            close: true,
        };
        let text = String::from_utf8(build_request(&target, &spec)).expect("ascii");
        assert_eq!(
            text,
            "POST /p?q HTTP/1.1\r\nHost: h:8\r\nAccept: */*\r\nContent-Length: 2\r\nConnection: close\r\nuser-agent: me\r\n\r\n{}"
        );
    }
}
