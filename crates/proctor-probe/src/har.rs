//! A browser's HAR export (HAR 1.2, as Chrome, Firefox and Safari write it) as
//! [`RequestRecord`]s, so `proctor probe analyze` reports a page load like a probe run.
//!
//! HTTP entries: `timings` are milliseconds, `-1` (any negative) meaning "did not happen", and
//! map onto the phases as `blocked` → queue, `dns` → dns, `connect` minus `ssl` → connect (HAR's
//! `connect` includes the TLS handshake), `ssl` → tls, `send` → write, `wait` → wait, `receive`
//! → transfer; `time` is the total, `startedDateTime` (ISO 8601 with its offset) the send time,
//! `request.url` the URL. Status 0 is a request that got no response (Chrome's
//! `response._error`, `net::ERR_…`, says why and picks the error class); 4xx and 5xx are
//! errors with a response, as in a probe run. A connection is reused when `connect` is -1.
//! A response's `Server-Timing` headers become the record's substeps, as in a probe run.
//!
//! Chrome's WebSocket entries carry `_webSocketMessages` (`type` "send" or "receive", `time` in
//! seconds since the epoch): each sent message is paired with the first received message not
//! yet paired (first in, first out, as a request/reply protocol answers), one record per pair
//! with the time between them as its `wait` and total. Receives with no send before them
//! (server pushes) and sends never answered are counted, not records. Such an entry gives
//! no HTTP record of its own: its timings are the handshake's and its `time` the socket's life.
//!
//! Pure: a reader in, records out. Streamed: an entry becomes records as soon as it is read,
//! and WebSocket messages are paired as they are read, so nothing of the document is held but
//! the records, one entry's used fields and the sends not yet answered (a 300 MB export is not
//! 1 GB of parsed JSON); bodies and every unused field are skipped as they are read. Every
//! mistake is an error naming the JSON path (`log.entries[3].timings.wait`), never a panic;
//! the first in the file is the one reported. The caller bounds the input's size.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IgnoredAny, Visitor};
use serde::Deserialize;
use thiserror::Error;

use crate::record::{ErrorClass, Phases, RequestRecord};

/// A HAR that cannot be read, with where in it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct HarError {
    /// The JSON path of the wrong value (`log.entries[3].timings.wait`); `.` for the document.
    pub path: String,
    pub message: String,
}

/// What a HAR held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarImport {
    pub records: Vec<RequestRecord>,
    /// HTTP entries read (each a record).
    pub http_entries: u64,
    /// WebSocket entries read (their message pairs are records).
    pub websocket_entries: u64,
    /// Received WebSocket messages with no unanswered send before them.
    pub unsolicited_receives: u64,
    /// Sent WebSocket messages no message answered.
    pub unanswered_sends: u64,
}

/// URLs are kept up to this many bytes (a `data:` URL can be megabytes), cut with `…`.
pub const MAX_URL_BYTES: usize = 2048;

/// True when `start` (the first bytes of a file) opens a HAR: a JSON object whose first key is
/// `log`, as every HAR writer puts it. A JSON-lines results file opens `{"run":…`.
pub fn looks_like_har(start: &[u8]) -> bool {
    let mut rest = start.trim_ascii_start();
    if rest.first() != Some(&b'{') {
        return false;
    }
    rest = rest[1..].trim_ascii_start();
    rest.starts_with(b"\"log\"")
}

/// Reads a HAR document. `run` names the records' run (the file's name, so merged files
/// stay apart).
///
/// Streamed: each entry becomes records as soon as it has been read, and a WebSocket entry's
/// messages are paired as they are read, so no more of the document is held than one HTTP
/// entry's fields and the sends not yet answered.
pub fn read(reader: impl Read, run: &str) -> Result<HarImport, HarError> {
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let mut reading = Reading { run: run.into(), import: HarImport::default(), failed: None };
    let mut track = serde_path_to_error::Track::new();
    let result =
        HarSeed(&mut reading).deserialize(serde_path_to_error::Deserializer::new(&mut deserializer, &mut track));
    // An entry that was read but could not be converted stopped the reading with a stand-in
    // error; its own, with its path, is this one.
    if let Some(failed) = reading.failed {
        return Err(failed);
    }
    result.map_err(|err| {
        let path = track.path().to_string();
        let text = err.to_string();
        // serde_json ends its message with " at line L column C"; said as a position instead.
        let message = match text.rfind(" at line ") {
            Some(at) if err.line() > 0 => format!("{} (line {}, column {})", &text[..at], err.line(), err.column()),
            _ => text,
        };
        HarError { path, message }
    })?;
    deserializer.end().map_err(|err| HarError { path: ".".into(), message: err.to_string() })?;
    Ok(reading.import)
}

/// What the streaming reader carries from entry to entry.
struct Reading {
    /// Every record's run: one text, shared.
    run: Arc<str>,
    import: HarImport,
    /// The first entry that was read but could not be converted (the JSON parser's error
    /// stands in for it while the reading unwinds).
    failed: Option<HarError>,
}

impl Reading {
    /// Turns one read entry into records (a WebSocket entry's pairs are already there, from
    /// `first_pair` on, and get the entry's URL and status here).
    fn entry(&mut self, index: usize, entry: Entry, first_pair: Option<usize>) -> Result<(), HarError> {
        let at = |field: &str| format!("log.entries[{index}].{field}");
        let started_ns = parse_iso8601(&entry.started).ok_or_else(|| HarError {
            path: at("startedDateTime"),
            message: format!("not an ISO 8601 date-time with an offset: {:?}", entry.started),
        })?;
        let url = cut_url(&entry.request.url);
        let import = &mut self.import;
        if let Some(first) = first_pair {
            import.websocket_entries += 1;
            let status = u16::try_from(entry.response.status).ok().filter(|&status| status > 0).or(Some(101));
            // One URL for the entry's pairs, shared.
            let url: Arc<str> = url.into();
            for record in &mut import.records[first..] {
                record.url = Some(Arc::clone(&url));
                record.status = status;
            }
            return Ok(());
        }
        import.http_entries += 1;
        let seq = import.records.len() as u64;
        let run = Arc::clone(&self.run);
        import.records.push(http_record(&entry.timings, entry.time, &entry.response, started_ns, url, run, seq));
        Ok(())
    }
}

fn http_record(
    timings: &Timings,
    time: Millis,
    response: &Response,
    started_ns: u64,
    url: String,
    run: Arc<str>,
    seq: u64,
) -> RequestRecord {
    let ssl = timings.ssl.and_then(Millis::ns);
    let connect = timings.connect.and_then(Millis::ns).map(|connect| connect.saturating_sub(ssl.unwrap_or(0)));
    // Every phase named, and the rest defaulted: a phase added later stays `None` here.
    #[allow(clippy::needless_update)]
    let phases = Phases {
        queue_ns: timings.blocked.and_then(Millis::ns),
        dns_ns: timings.dns.and_then(Millis::ns),
        connect_ns: connect,
        tls_ns: ssl,
        write_ns: timings.send.ns(),
        wait_ns: timings.wait.ns(),
        transfer_ns: timings.receive.ns(),
        ..Phases::default()
    };
    let mut server_timing = Vec::new();
    let mut dropped = crate::server_timing::Dropped::default();
    for value in &response.headers.0 {
        crate::server_timing::parse_into(value.as_bytes(), &mut server_timing, &mut dropped);
    }
    // Kept for the whole analysis: a vector's first push reserves four substeps (256 bytes)
    // where a response usually has one.
    server_timing.shrink_to_fit();
    let status = u16::try_from(response.status).ok().filter(|&status| status > 0);
    let (error, error_detail) = match status {
        None => {
            let detail = response.error.clone().unwrap_or_else(|| "no response (status 0 in the HAR)".to_string());
            (Some(chrome_error_class(&detail)), Some(detail))
        }
        Some(status @ 400..=499) => (Some(ErrorClass::Http4xx), Some(format!("HTTP {status}"))),
        Some(status @ 500..=599) => (Some(ErrorClass::Http5xx), Some(format!("HTTP {status}"))),
        Some(_) => (None, None),
    };
    RequestRecord {
        run,
        seq,
        burst: None,
        sent_unix_ns: started_ns,
        total_ns: time.ns().unwrap_or(0),
        phases,
        reused: connect.is_none(),
        tls_verified: None,
        status,
        body_bytes: response.body_size.and_then(Millis::ns_raw).unwrap_or(0),
        error,
        error_detail,
        url: Some(url.into()),
        server_timing,
        server_timing_dropped: dropped.total(),
    }
}

/// Chrome's `net::ERR_…` names as error classes.
fn chrome_error_class(detail: &str) -> ErrorClass {
    if detail.contains("NAME_NOT_RESOLVED") || detail.contains("NAME_RESOLUTION") {
        ErrorClass::Dns
    } else if detail.contains("CONNECTION_REFUSED") {
        ErrorClass::Refused
    } else if detail.contains("UNREACHABLE") {
        ErrorClass::Unreachable
    } else if detail.contains("TIMED_OUT") {
        ErrorClass::Timeout
    } else if detail.contains("CERT_") || detail.contains("SSL") {
        ErrorClass::Tls
    } else {
        ErrorClass::Io
    }
}

fn cut_url(url: &str) -> String {
    if url.len() <= MAX_URL_BYTES {
        return url.to_string();
    }
    let mut end = MAX_URL_BYTES;
    while !url.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &url[..end])
}

fn seconds_to_ns(seconds: f64) -> u64 {
    let ns = (seconds * 1e9).round();
    if ns.is_finite() && ns > 0.0 && ns < u64::MAX as f64 {
        ns as u64
    } else {
        0
    }
}

/// `2024-05-01T12:00:00.123+02:00` (also `Z`, `+0200`, `+02`, no fraction) in Unix ns; `None`
/// when it is not that, or before 1970.
pub fn parse_iso8601(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    let number = |from: usize, len: usize| -> Option<i64> {
        let digits = bytes.get(from..from + len)?;
        digits.iter().all(u8::is_ascii_digit).then(|| digits.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0')))
    };
    if bytes.get(4) != Some(&b'-') || bytes.get(7) != Some(&b'-') || !matches!(bytes.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    if bytes.get(13) != Some(&b':') || bytes.get(16) != Some(&b':') {
        return None;
    }
    let (year, month, day) = (number(0, 4)?, number(5, 2)?, number(8, 2)?);
    let (hour, minute, second) = (number(11, 2)?, number(14, 2)?, number(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut fraction_ns = 0i64;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 9 {
                fraction_ns += i64::from(bytes[at] - b'0') * 10i64.pow(8 - (at - start) as u32);
            }
            at += 1;
        }
        if at == start {
            return None;
        }
    }
    let offset_s = match bytes.get(at) {
        Some(b'Z' | b'z') if at + 1 == bytes.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let hours = number(at + 1, 2)?;
            let rest = &bytes[at + 3..];
            let minutes = match rest {
                [] => 0,
                [b':', _, _] => number(at + 4, 2)?,
                [_, _] => number(at + 3, 2)?,
                _ => return None,
            };
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 3600 + minutes * 60;
            if sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    let ns = i128::from(seconds) * 1_000_000_000 + i128::from(fraction_ns);
    u64::try_from(ns).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// The HAR's shape: only what is used; every other field (headers, cookies, content with its
// text, pages) is skipped as it is read.

/// The document: `log` is read through [`LogSeed`], the other keys are skipped.
struct HarSeed<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for HarSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_struct("Har", &["log"], self)
    }
}

impl<'de> Visitor<'de> for HarSeed<'_> {
    type Value = ();

    // The expectations and the missing and duplicate field errors are serde's derived ones,
    // as before the reading was streamed.
    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("struct Har")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<HarField>()? {
            match key {
                HarField::Log if seen => return Err(de::Error::duplicate_field("log")),
                HarField::Log => {
                    map.next_value_seed(LogSeed(&mut *self.0))?;
                    seen = true;
                }
                HarField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if seen {
            Ok(())
        } else {
            Err(de::Error::missing_field("log"))
        }
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum HarField {
    Log,
    #[serde(other)]
    Other,
}

/// `log`: `entries` is read through [`EntriesSeed`], the other keys (pages) are skipped.
struct LogSeed<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for LogSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_struct("Log", &["entries"], self)
    }
}

impl<'de> Visitor<'de> for LogSeed<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("struct Log")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<LogField>()? {
            match key {
                LogField::Entries if seen => return Err(de::Error::duplicate_field("entries")),
                LogField::Entries => {
                    map.next_value_seed(EntriesSeed(&mut *self.0))?;
                    seen = true;
                }
                LogField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if seen {
            Ok(())
        } else {
            Err(de::Error::missing_field("entries"))
        }
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum LogField {
    Entries,
    #[serde(other)]
    Other,
}

/// `log.entries`: each entry is read and turned into records before the next is read.
struct EntriesSeed<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for EntriesSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a sequence")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some((entry, first_pair)) = seq.next_element_seed(EntrySeed(&mut *self.0))? {
            if let Err(failed) = self.0.entry(index, entry, first_pair) {
                self.0.failed = Some(failed);
                // Only a stand-in: `read` returns `failed`, which says what and where.
                return Err(de::Error::custom("an entry could not be converted"));
            }
            index += 1;
        }
        Ok(())
    }
}

/// The fields of an entry that are used. A WebSocket entry's messages are not among them:
/// they became records as they were read.
struct Entry {
    started: String,
    time: Millis,
    request: Request,
    response: Response,
    timings: Timings,
}

/// One entry: its fields, and the index of its first message pair in `records` when it is a
/// WebSocket entry (`_webSocketMessages` present and not null).
struct EntrySeed<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = (Entry, Option<usize>);

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        const FIELDS: &[&str] = &["startedDateTime", "time", "request", "response", "timings", "_webSocketMessages"];
        deserializer.deserialize_struct("Entry", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = (Entry, Option<usize>);

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("struct Entry")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        fn once<'de, T: Deserialize<'de>, A: de::MapAccess<'de>>(
            map: &mut A,
            slot: &mut Option<T>,
            name: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(de::Error::duplicate_field(name));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let (mut started, mut time, mut request, mut response, mut timings) = (None, None, None, None, None);
        let mut websocket: Option<Option<usize>> = None;
        while let Some(key) = map.next_key::<EntryField>()? {
            match key {
                EntryField::StartedDateTime => once(&mut map, &mut started, "startedDateTime")?,
                EntryField::Time => once(&mut map, &mut time, "time")?,
                EntryField::Request => once(&mut map, &mut request, "request")?,
                EntryField::Response => once(&mut map, &mut response, "response")?,
                EntryField::Timings => once(&mut map, &mut timings, "timings")?,
                EntryField::WebSocketMessages if websocket.is_some() => {
                    return Err(de::Error::duplicate_field("_webSocketMessages"));
                }
                EntryField::WebSocketMessages => {
                    let first = self.0.import.records.len();
                    let read = map.next_value_seed(MessagesSeed(&mut *self.0))?;
                    websocket = Some(read.then_some(first));
                }
                EntryField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let entry = Entry {
            started: started.ok_or_else(|| de::Error::missing_field("startedDateTime"))?,
            time: time.ok_or_else(|| de::Error::missing_field("time"))?,
            request: request.ok_or_else(|| de::Error::missing_field("request"))?,
            response: response.ok_or_else(|| de::Error::missing_field("response"))?,
            timings: timings.ok_or_else(|| de::Error::missing_field("timings"))?,
        };
        Ok((entry, websocket.flatten()))
    }
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum EntryField {
    #[serde(rename = "startedDateTime")]
    StartedDateTime,
    #[serde(rename = "time")]
    Time,
    #[serde(rename = "request")]
    Request,
    #[serde(rename = "response")]
    Response,
    #[serde(rename = "timings")]
    Timings,
    #[serde(rename = "_webSocketMessages")]
    WebSocketMessages,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Request {
    url: String,
}

#[derive(Deserialize)]
struct Response {
    status: i64,
    /// Only the `Server-Timing` values are kept of the headers.
    #[serde(default)]
    headers: ServerTimingHeaders,
    #[serde(rename = "bodySize", default)]
    body_size: Option<Millis>,
    /// Chrome: why a request got no response (`net::ERR_CONNECTION_REFUSED`).
    #[serde(rename = "_error", default)]
    error: Option<String>,
}

/// The values of a response's `Server-Timing` headers; the other headers are read past.
#[derive(Default)]
struct ServerTimingHeaders(Vec<String>);

#[derive(Deserialize)]
struct Header {
    name: String,
    value: String,
}

impl<'de> Deserialize<'de> for ServerTimingHeaders {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Headers;
        impl<'de> Visitor<'de> for Headers {
            type Value = ServerTimingHeaders;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("an array of {name, value} headers")
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                while let Some(header) = seq.next_element::<Header>()? {
                    if header.name.eq_ignore_ascii_case("server-timing") {
                        kept.push(header.value);
                    }
                }
                Ok(ServerTimingHeaders(kept))
            }
        }
        deserializer.deserialize_seq(Headers)
    }
}

/// HAR 1.2: `send`, `wait` and `receive` are required; the others may be absent.
#[derive(Deserialize)]
struct Timings {
    #[serde(default)]
    blocked: Option<Millis>,
    #[serde(default)]
    dns: Option<Millis>,
    #[serde(default)]
    connect: Option<Millis>,
    #[serde(default)]
    ssl: Option<Millis>,
    send: Millis,
    wait: Millis,
    receive: Millis,
}

/// Chrome's `_webSocketMessages` (`null` reads as absent): each sent message is paired with the
/// first received message not yet paired, as they are read, and each pair pushed as a record
/// (its URL and status are the entry's, set once the entry has been read). True when
/// there was an array.
struct MessagesSeed<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for MessagesSeed<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed<'_> {
    type Value = bool;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("option")
    }

    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let Reading { run, import, .. } = self.0;
        // The send times not yet answered, oldest first.
        let mut sends: VecDeque<f64> = VecDeque::new();
        while let Some(message) = seq.next_element::<WsMessage>()? {
            match message.kind {
                MessageKind::Send => sends.push_back(message.time.0),
                MessageKind::Receive => {
                    let Some(sent) = sends.pop_front() else {
                        import.unsolicited_receives += 1;
                        continue;
                    };
                    let sent_ns = seconds_to_ns(sent);
                    let total_ns = seconds_to_ns(message.time.0).saturating_sub(sent_ns);
                    let seq = import.records.len() as u64;
                    import.records.push(RequestRecord {
                        run: Arc::clone(run),
                        seq,
                        burst: None,
                        sent_unix_ns: sent_ns,
                        total_ns,
                        phases: Phases { wait_ns: Some(total_ns), ..Phases::default() },
                        reused: true,
                        tls_verified: None,
                        status: None,
                        body_bytes: 0,
                        error: None,
                        error_detail: None,
                        url: None,
                        server_timing: Vec::new(),
                        server_timing_dropped: 0,
                    });
                }
                // Chrome writes only these two; anything else is not a message to pair.
                MessageKind::Other => {}
            }
        }
        import.unanswered_sends += sends.len() as u64;
        Ok(true)
    }
}

/// One WebSocket message: its kind and time; `opcode` and `data` are skipped.
struct WsMessage {
    kind: MessageKind,
    time: Seconds,
}

impl<'de> Deserialize<'de> for WsMessage {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("WsMessage", &["type", "time", "opcode"], WsMessageVisitor)
    }
}

struct WsMessageVisitor;

impl<'de> Visitor<'de> for WsMessageVisitor {
    type Value = WsMessage;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("struct WsMessage")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<WsMessage, A::Error> {
        let (mut kind, mut time, mut opcode) = (None, None, false);
        while let Some(key) = map.next_key::<MessageField>()? {
            match key {
                MessageField::Type if kind.is_some() => return Err(de::Error::duplicate_field("type")),
                MessageField::Type => kind = Some(map.next_value()?),
                MessageField::Time if time.is_some() => return Err(de::Error::duplicate_field("time")),
                MessageField::Time => time = Some(map.next_value()?),
                MessageField::Opcode if opcode => return Err(de::Error::duplicate_field("opcode")),
                MessageField::Opcode | MessageField::Other => {
                    opcode |= key == MessageField::Opcode;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(WsMessage {
            kind: kind.ok_or_else(|| de::Error::missing_field("type"))?,
            time: time.ok_or_else(|| de::Error::missing_field("time"))?,
        })
    }
}

#[derive(Deserialize, PartialEq, Eq)]
#[serde(field_identifier, rename_all = "camelCase")]
enum MessageField {
    Type,
    Time,
    Opcode,
    #[serde(other)]
    Other,
}

/// A message's `type`, read from the text as it goes by (no `String` per message).
#[derive(Clone, Copy)]
enum MessageKind {
    Send,
    Receive,
    Other,
}

impl<'de> Deserialize<'de> for MessageKind {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Kind;
        impl Visitor<'_> for Kind {
            type Value = MessageKind;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<MessageKind, E> {
                Ok(match value {
                    "send" => MessageKind::Send,
                    "receive" => MessageKind::Receive,
                    _ => MessageKind::Other,
                })
            }
        }
        deserializer.deserialize_str(Kind)
    }
}

/// A HAR number: milliseconds in `timings` and `time` (a byte count in `bodySize`); negative
/// means "not applicable".
#[derive(Debug, Clone, Copy)]
struct Millis(f64);

impl Millis {
    fn ns(self) -> Option<u64> {
        (self.0 >= 0.0).then(|| seconds_to_ns(self.0 / 1e3))
    }

    /// The number itself, when it is not negative.
    fn ns_raw(self) -> Option<u64> {
        (self.0 >= 0.0 && self.0 < u64::MAX as f64).then_some(self.0 as u64)
    }
}

/// Seconds since the epoch (WebSocket message times).
#[derive(Debug, Clone, Copy)]
struct Seconds(f64);

struct NumberVisitor(&'static str);

impl Visitor<'_> for NumberVisitor {
    type Value = f64;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.0)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<f64, E> {
        Ok(value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<f64, E> {
        Ok(value as f64)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<f64, E> {
        Ok(value as f64)
    }
}

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_f64(NumberVisitor("a number (milliseconds; -1 when not applicable)")).map(Millis)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_f64(NumberVisitor("a number (seconds since the epoch)")).map(Seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_time(text: &str, expected: Option<u64>) {
        assert_eq!(parse_iso8601(text), expected, "{text}");
    }

    #[test]
    fn iso8601_with_offsets() {
        let base = 1_700_000_000_000_000_000u64; // 2023-11-14T22:13:20Z
        check_time("2023-11-14T22:13:20Z", Some(base));
        check_time("2023-11-14T22:13:20.123Z", Some(base + 123_000_000));
        check_time("2023-11-14T22:13:20.123456789123Z", Some(base + 123_456_789));
        check_time("2023-11-15T00:13:20.5+02:00", Some(base + 500_000_000));
        check_time("2023-11-14T17:13:20-0500", Some(base));
        check_time("2023-11-15T00:13:20+02", Some(base));
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-13-14T22:13:20Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+2:00",
            "1969-12-31T23:59:59Z",
            "2023-11-14T22:13:20Zjunk",
            "２023-11-14T22:13:20Z",
        ] {
            check_time(bad, None);
        }
    }

    fn error(text: &str) -> HarError {
        read(text.as_bytes(), "t").expect_err(text)
    }

    #[test]
    fn mistakes_name_their_json_path() {
        let entry = |timings: &str| {
            format!(
                r#"{{"log": {{"entries": [{{"startedDateTime": "2023-11-14T22:13:20Z", "time": 1, "request": {{"url": "http://a/"}}, "response": {{"status": 200}}, "timings": {timings}}}]}}}}"#
            )
        };
        let wrong = error(&entry(r#"{"send": 1, "wait": "abc", "receive": 1}"#));
        assert_eq!(wrong.path, "log.entries[0].timings.wait");
        assert!(wrong.message.starts_with(r#"invalid type: string "abc", expected a number (milliseconds"#), "{wrong}");
        assert!(wrong.message.contains("(line 1, column"), "{wrong}");
        let missing = error(&entry(r#"{"send": 1, "receive": 1}"#));
        assert_eq!(
            (missing.path.as_str(), missing.message.starts_with("missing field `wait`")),
            ("log.entries[0].timings", true)
        );
        assert_eq!(error(r#"{"log": {}}"#).path, "log");
        assert_eq!(error(r#"{"log": {"entries": {}}}"#).path, "log.entries");
        assert_eq!(error("1").path, ".");
        let date =
            error(&entry(r#"{"send": 1, "wait": 1, "receive": 1}"#).replace("2023-11-14T22:13:20Z", "yesterday"));
        assert_eq!(
            date.to_string(),
            r#"log.entries[0].startedDateTime: not an ISO 8601 date-time with an offset: "yesterday""#
        );
        for garbage in
            ["", "{", "{\"log\":", "nul", "{\"log\": {\"entries\": [}", "{\"log\": {\"entries\": []}} trailing"]
        {
            let _ = error(garbage);
        }
        assert_eq!(read(r#"{"log": {"entries": []}}"#.as_bytes(), "t").map(|import| import.records.len()), Ok(0));
    }

    /// A WebSocket entry with `_webSocketMessages` first, as Chrome writes it: the pairs are
    /// made as the messages are read and get the URL and status read after them; a `null`
    /// list is an HTTP entry; a message's mistakes name their path.
    #[test]
    fn websocket_messages_are_paired_as_they_are_read() {
        let entry = |messages: &str| {
            format!(
                r#"{{"log": {{"entries": [{{"_webSocketMessages": {messages}, "startedDateTime": "2023-11-14T22:13:20Z", "time": 1, "request": {{"url": "wss://a/s"}}, "response": {{"status": 0}}, "timings": {{"send": 0, "wait": 0, "receive": 0}}}}]}}}}"#
            )
        };
        let messages = r#"[{"type": "receive", "time": 1.0}, {"type": "send", "time": 2.0, "opcode": 1},
            {"type": "send", "time": 3.0}, {"type": "ping", "time": 3.5}, {"data": "x", "time": 4.0, "type": "receive"},
            {"type": "send", "time": 5.0}]"#;
        let import = read(entry(messages).as_bytes(), "t").expect("valid");
        assert_eq!((import.http_entries, import.websocket_entries), (0, 1));
        assert_eq!((import.unsolicited_receives, import.unanswered_sends), (1, 2));
        let pairs: Vec<_> = import
            .records
            .iter()
            .map(|r| (&*r.run, r.seq, r.sent_unix_ns, r.total_ns, r.status, r.url.as_deref()))
            .collect();
        assert_eq!(pairs, [("t", 0, 2_000_000_000, 2_000_000_000, Some(101), Some("wss://a/s"))]);
        let http = read(entry("null").as_bytes(), "t").expect("valid");
        assert_eq!((http.http_entries, http.websocket_entries, http.records.len()), (1, 0, 1));
        let wrong = error(&entry(r#"[{"type": "send", "time": 1}, {"type": 1, "time": 2}]"#));
        assert_eq!(wrong.path, "log.entries[0]._webSocketMessages[1].type");
        assert!(wrong.message.starts_with("invalid type: integer `1`, expected a string"), "{wrong}");
        let missing = error(&entry(r#"[{"type": "send"}]"#));
        assert_eq!(
            missing.to_string().split(" (line").next(),
            Some("log.entries[0]._webSocketMessages[0]: missing field `time`")
        );
        let twice = error(&entry(r#"[{"type": "send", "time": 1, "time": 2}]"#));
        assert!(twice.message.starts_with("duplicate field `time`"), "{twice}");
        assert_eq!(error(&entry("{}")).path, "log.entries[0]._webSocketMessages");
    }

    /// Entries are converted as they are read: the first mistake in the file is the one
    /// reported, a bad date before a later entry's wrong type.
    #[test]
    fn the_first_mistake_in_the_file_is_reported() {
        let entry = |started: &str, wait: &str| {
            format!(
                r#"{{"startedDateTime": "{started}", "time": 1, "request": {{"url": "http://a/"}}, "response": {{"status": 200}}, "timings": {{"send": 1, "wait": {wait}, "receive": 1}}}}"#
            )
        };
        let text = format!(
            r#"{{"log": {{"entries": [{}, {}, {}]}}}}"#,
            entry("2023-11-14T22:13:20Z", "1"),
            entry("noon", "1"),
            entry("2023-11-14T22:13:20Z", "null")
        );
        assert_eq!(error(&text).path, "log.entries[1].startedDateTime");
        let duplicate = text.replacen(r#""time": 1,"#, r#""time": 1, "time": 2,"#, 1);
        assert_eq!(error(&duplicate).path, "log.entries[0]");
        assert!(error(&duplicate).message.starts_with("duplicate field `time`"));
        let missing = text.replacen(r#""time": 1,"#, "", 1);
        assert!(error(&missing).message.starts_with("missing field `time`"), "{}", error(&missing));
    }

    /// The test thread's heap (bytes asked for, less bytes freed) and its peak, counted only
    /// while [`heap_peak_of`] runs on that thread: other tests of this binary run on threads
    /// of their own and are not counted. (The allocator of this whole test binary.)
    struct ThreadCounting;

    thread_local! {
        static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        static LIVE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
        static PEAK: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
    }

    fn count(delta: isize) {
        // `try_with`: an allocation while the thread's locals are torn down is not counted.
        let _ = COUNTING.try_with(|counting| {
            if counting.get() {
                let live = LIVE.get() + delta;
                LIVE.set(live);
                PEAK.set(PEAK.get().max(live));
            }
        });
    }

    // SAFETY: forwards to the system allocator unchanged; only counts.
    unsafe impl std::alloc::GlobalAlloc for ThreadCounting {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            count(layout.size() as isize);
            // SAFETY: the caller's layout, as GlobalAlloc requires.
            unsafe { std::alloc::System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            count(-(layout.size() as isize));
            // SAFETY: allocated by `alloc` above with this layout.
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
            count(new_size as isize - layout.size() as isize);
            // SAFETY: as for `alloc`; `ptr` came from this allocator with `layout`.
            unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: ThreadCounting = ThreadCounting;

    /// `work`'s result and the most heap it held at once (what it returns included).
    fn heap_peak_of<T>(work: impl FnOnce() -> T) -> (T, usize) {
        LIVE.set(0);
        PEAK.set(0);
        COUNTING.set(true);
        let result = work();
        COUNTING.set(false);
        (result, PEAK.get().max(0) as usize)
    }

    /// Regression (issue 33 item 16): the whole document was parsed before any entry was
    /// converted (every WebSocket message with a `String` for its type, then each pair's own
    /// copies of the run and URL): a 322 MB export of 3 million messages took 1 GB. Now the
    /// most the reader holds is its records and under 1 MiB besides, however many messages
    /// there are: here 200,000 in Chrome's order (`_webSocketMessages` before the URL), half
    /// of them server pushes that are counted, not kept.
    #[test]
    fn reading_holds_the_records_not_the_document() {
        let mut text = String::from(r#"{"log": {"entries": [{"_webSocketMessages": ["#);
        for k in 0..50_000u64 {
            for (step, kind) in ["receive", "send", "receive", "receive"].iter().enumerate() {
                let ms = k * 4 + step as u64;
                let separator = if k == 0 && step == 0 { "" } else { "," };
                text.push_str(&format!(
                    r#"{separator}{{"type": "{kind}", "time": {}.{:03}, "opcode": 1, "data": "x"}}"#,
                    1_714_564_800 + ms / 1000,
                    ms % 1000
                ));
            }
        }
        text.push_str(
            r#"], "startedDateTime": "2024-05-01T12:00:00Z", "time": 1, "request": {"url": "wss://example.test/socket"},
            "response": {"status": 101}, "timings": {"send": 0, "wait": 0, "receive": 0}}]}}"#,
        );
        let (import, peak) = heap_peak_of(|| read(text.as_bytes(), "har:pushes.har"));
        let import = import.expect("valid");
        assert_eq!((import.records.len(), import.unsolicited_receives, import.unanswered_sends), (50_000, 100_000, 0));
        assert!(import
            .records
            .iter()
            .all(|record| record.total_ns.abs_diff(1_000_000) < 1_000 && record.status == Some(101)));
        let records = import.records.capacity() * std::mem::size_of::<RequestRecord>();
        assert!(
            peak < records + (1 << 20),
            "the reader held {peak} bytes at its peak, {} more than its {records} bytes of records",
            peak - records
        );
    }

    /// The fixture is shaped like Chrome's export: an https document with a new connection,
    /// a reused one, a 404, a refused beacon and a WebSocket with five messages.
    #[test]
    // Every phase named, so that a phase added later must stay `None` here too.
    #[allow(clippy::needless_update)]
    fn a_chrome_export_becomes_records() {
        let file =
            std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chrome.har")).expect("fixture");
        let import = read(std::io::BufReader::new(file), "har").expect("valid");
        assert_eq!((import.http_entries, import.websocket_entries), (4, 1));
        assert_eq!((import.unsolicited_receives, import.unanswered_sends), (1, 1));
        let records = &import.records;
        assert_eq!(records.len(), 6);
        let document = &records[0];
        let ms = 1_000_000;
        assert_eq!(document.sent_unix_ns, 1_714_564_800_100_000_000, "14:00 at +02:00 is 12:00Z");
        assert_eq!(document.total_ns, 105_300_000);
        assert_eq!(
            document.phases.values(),
            Phases {
                queue_ns: Some(2_100_000),
                dns_ns: Some(10 * ms),
                connect_ns: Some(15 * ms),
                tls_ns: Some(20 * ms),
                write_ns: Some(200_000),
                wait_ns: Some(50 * ms),
                transfer_ns: Some(8 * ms),
                ..Phases::default()
            }
            .values()
        );
        assert!(!document.reused && records[1].reused);
        assert_eq!(
            (document.status, document.body_bytes, document.url.as_deref()),
            (Some(200), 612, Some("https://example.test/"))
        );
        assert_eq!(document.substep_ns("db"), Some(12_500_000));
        assert_eq!((records[2].status, records[2].error), (Some(404), Some(ErrorClass::Http4xx)));
        let refused = &records[3];
        assert_eq!((refused.status, refused.error), (None, Some(ErrorClass::Refused)));
        assert_eq!(refused.error_detail.as_deref(), Some("net::ERR_CONNECTION_REFUSED"));
        let pairs: Vec<(u64, u64)> = records[4..].iter().map(|record| (record.sent_unix_ns, record.total_ns)).collect();
        assert_eq!(pairs.len(), 2);
        for ((sent, total), (want_sent, want_ms)) in pairs.iter().zip([(1_714_564_801u64, 25u64), (1_714_564_802, 40)])
        {
            assert_eq!(*sent, want_sent * 1_000_000_000);
            assert!(total.abs_diff(want_ms * ms) < 1_000, "{total}");
        }
        assert!(records[4..].iter().all(|record| record.url.as_deref() == Some("wss://example.test/socket")
            && record.status == Some(101)
            && record.phases.wait_ns == Some(record.total_ns)));
    }

    #[test]
    fn har_is_recognised_by_its_first_key() {
        assert!(looks_like_har(b"  {\n  \"log\": {"));
        assert!(!looks_like_har(b"{\"run\":\"1-2\",\"seq\":0}"));
        assert!(!looks_like_har(b"[]"));
    }
}
