//! What receivers are told, and how often: a global rate limit that coalesces what it holds back
//! into the next notification ("and 14 more"), and the bodies each kind of receiver takes.
//!
//! Every event that tells (firing, resolved, flapping; not silenced or held) is in exactly one
//! notification: alone while the limit allows, else in the next coalesced one. Alertmanager is
//! not rate-limited here: it gets the set of firing alerts, re-sent, and groups them itself.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::state::{Event, Told};

/// One notification: its events (the first is the headline) and how many more were dropped
/// for want of room.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub events: Vec<Event>,
    pub omitted: u64,
}

/// Events held back beyond this many are counted, not kept.
pub const MAX_HELD: usize = 1000;

/// The global limit: at most `limit` notifications per `window` seconds.
#[derive(Debug, Clone)]
pub struct Limiter {
    limit: usize,
    window: f64,
    sent: VecDeque<f64>,
    held: Vec<Event>,
    omitted: u64,
    pub coalesced_total: u64,
}

impl Limiter {
    pub fn new(limit: u32, window: f64) -> Limiter {
        Limiter {
            limit: limit.max(1) as usize,
            window,
            sent: VecDeque::new(),
            held: Vec::new(),
            omitted: 0,
            coalesced_total: 0,
        }
    }

    fn room(&mut self, now: f64) -> bool {
        while self.sent.front().is_some_and(|&t| t <= now - self.window) {
            self.sent.pop_front();
        }
        self.sent.len() < self.limit
    }

    /// Offers one evaluation's events; returns the notifications to send now.
    pub fn offer(&mut self, now: f64, events: impl IntoIterator<Item = Event>) -> Vec<Notification> {
        let mut out = Vec::new();
        if let Some(n) = self.flush(now) {
            out.push(n);
        }
        for e in events.into_iter().filter(Event::tells) {
            if self.held.is_empty() && self.room(now) {
                self.sent.push_back(now);
                out.push(Notification { events: vec![e], omitted: 0 });
            } else if self.held.len() < MAX_HELD {
                self.held.push(e);
            } else {
                self.omitted += 1;
            }
        }
        out
    }

    /// What was held back, as one notification, once the limit has room.
    pub fn flush(&mut self, now: f64) -> Option<Notification> {
        if self.held.is_empty() || !self.room(now) {
            return None;
        }
        self.sent.push_back(now);
        let events = std::mem::take(&mut self.held);
        if events.len() > 1 {
            self.coalesced_total += events.len() as u64 - 1;
        }
        Some(Notification { events, omitted: std::mem::take(&mut self.omitted) })
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// One line for a person: `[FIRING] HostCpuBusy (warning): CPU busy at 95 %`.
pub fn line(e: &Event) -> String {
    let what = e.annotations.get("summary").cloned().unwrap_or_else(|| {
        e.labels
            .iter()
            .filter(|(k, _)| *k != "alertname")
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let mut text = format!("[{}] {} ({})", e.state.as_str().to_uppercase(), e.rule, e.severity);
    if !what.is_empty() {
        text.push_str(": ");
        text.push_str(&what);
    }
    if let Some(reason) = &e.reason {
        text.push_str(&format!(" [{reason}]"));
    }
    text
}

/// The headline of a notification: its first event's line and "and N more".
pub fn headline(n: &Notification) -> String {
    let more = n.events.len() as u64 - 1 + n.omitted;
    match (n.events.first(), more) {
        (Some(e), 0) => line(e),
        (Some(e), more) => format!("{} — and {more} more", line(e)),
        (None, _) => String::new(),
    }
}

#[derive(Serialize)]
struct EventOut<'a> {
    at: String,
    rule: &'a str,
    state: &'a str,
    severity: &'a str,
    labels: &'a BTreeMap<String, String>,
    annotations: &'a BTreeMap<String, String>,
    value: Option<f64>,
    active_at: String,
    fired_at: Option<String>,
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct WebhookOut<'a> {
    version: &'static str,
    host: &'a str,
    summary: String,
    events: Vec<EventOut<'a>>,
    omitted: u64,
}

/// One line of the JSON-lines log (`DATA/alerts/events.jsonl`, `top --slow-log`): the event
/// with its time.
pub fn log_line(e: &Event) -> String {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("time".to_string(), serde_json::Value::from(rfc3339(e.at)));
    }
    v.to_string()
}

/// RFC 3339 with milliseconds, UTC.
pub fn rfc3339(unix_secs: f64) -> String {
    let ms = (unix_secs * 1000.0).max(0.0) as u64;
    let whole = proctor_vocab::when::format_utc(ms * 1_000_000);
    format!("{}.{:03}Z", whole.trim_end_matches('Z'), ms % 1000)
}

/// The generic webhook's JSON body (see docs/alerts.md).
pub fn webhook_body(n: &Notification, host: &str) -> Vec<u8> {
    let out = WebhookOut {
        version: "proctor.alerts/1",
        host,
        summary: headline(n),
        events: n.events.iter().map(event_out).collect(),
        omitted: n.omitted,
    };
    serde_json::to_vec(&out).unwrap_or_default()
}

/// An event as the webhook's `events` hold it.
fn event_out(e: &Event) -> EventOut<'_> {
    EventOut {
        at: rfc3339(e.at),
        rule: &e.rule,
        state: e.state.as_str(),
        severity: &e.severity,
        labels: &e.labels,
        annotations: &e.annotations,
        value: e.value.filter(|v| v.is_finite()),
        active_at: rfc3339(e.active_at),
        fired_at: e.fired_at.map(rfc3339),
        reason: e.reason.as_deref(),
    }
}

/// A command's stdin: each event of the notification as a JSON line, the shape of the webhook's
/// `events`. However many events a storm coalesces, they all go (a pipe has no size limit).
pub fn exec_lines(n: &Notification) -> Vec<u8> {
    let mut out = Vec::new();
    for e in &n.events {
        if serde_json::to_writer(&mut out, &event_out(e)).is_ok() {
            out.push(b'\n');
        }
    }
    out
}

/// A Slack incoming webhook's body: `text`, one line per event (at most 20, then a count).
pub fn slack_body(n: &Notification, host: &str) -> Vec<u8> {
    let mut lines: Vec<String> = n.events.iter().take(20).map(line).collect();
    let more = n.events.len().saturating_sub(20) as u64 + n.omitted;
    if more > 0 {
        lines.push(format!("… and {more} more"));
    }
    let text = format!("proctor on {host}: {}", lines.join("\n"));
    serde_json::to_vec(&serde_json::json!({ "text": slack_escape(&text) })).unwrap_or_default()
}

/// Text as Slack shows it literally: `&`, `<` and `>` are its control characters (`<!channel>`
/// notifies everyone, `<@U…>` a person, `<URL|text>` is a link), so a process named
/// `<!channel>` must arrive as `&lt;!channel&gt;`. The rest needs no escaping.
fn slack_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// One alert as Alertmanager's `POST /api/v2/alerts` takes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostableAlert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub starts_at: String,
    pub ends_at: String,
    #[serde(rename = "generatorURL")]
    pub generator_url: String,
}

/// An event as an Alertmanager alert: firing ones end a few resends from now unless re-sent
/// (as Prometheus does), resolved ones end when they resolved.
pub fn postable(e: &Event, now: f64, resend_secs: f64, host: &str, generator: &str) -> PostableAlert {
    let mut labels = e.labels.clone();
    labels.entry("severity".to_string()).or_insert_with(|| e.severity.clone());
    labels.entry("host".to_string()).or_insert_with(|| host.to_string());
    let ends = if e.state == Told::Resolved { e.at } else { now + 4.0 * resend_secs.max(60.0) };
    PostableAlert {
        labels,
        annotations: e.annotations.clone(),
        starts_at: rfc3339(e.fired_at.unwrap_or(e.active_at)),
        ends_at: rfc3339(ends),
        generator_url: generator.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(i: u32, state: Told) -> Event {
        Event {
            at: f64::from(i),
            rule: format!("R{i}"),
            instance: String::new(),
            severity: "warning".into(),
            state,
            labels: BTreeMap::from([("alertname".to_string(), format!("R{i}"))]),
            annotations: BTreeMap::new(),
            value: Some(1.0),
            active_at: 0.0,
            fired_at: Some(0.0),
            reason: None,
            silenced: false,
            held: false,
        }
    }

    #[test]
    fn over_the_limit_events_are_coalesced_and_each_is_told_once() {
        let mut l = Limiter::new(2, 60.0);
        let mut told = Vec::new();
        for i in 0..10 {
            told.extend(l.offer(f64::from(i), [event(i, Told::Firing)]));
        }
        // Two alone; the other eight wait for room.
        assert_eq!(told.len(), 2);
        assert_eq!(l.held(), 8);
        assert!(l.flush(30.0).is_none());
        let n = l.flush(60.5).expect("room again");
        assert_eq!(n.events.len(), 8);
        assert_eq!(headline(&n), "[FIRING] R2 (warning) — and 7 more");
        let all: Vec<String> = told.iter().chain([&n]).flat_map(|n| n.events.iter().map(|e| e.rule.clone())).collect();
        assert_eq!(all, (0..10).map(|i| format!("R{i}")).collect::<Vec<_>>());
        // Pending, silenced and held events tell no one.
        let mut quiet = event(20, Told::Firing);
        quiet.silenced = true;
        assert!(l.offer(200.0, [event(21, Told::Pending), quiet]).is_empty());
    }

    /// Issue 33 item 13: processes named `<!channel>`, `<!here>` or `<@U…>` were posted as
    /// Slack markup, notifying a whole channel.
    #[test]
    fn slack_gets_hostile_names_as_text_not_markup() {
        let mut e = event(1, Told::Firing);
        e.labels.insert("name".into(), "<!channel>".into());
        e.annotations.insert("summary".into(), "<!here> & <@U024BE7LH> <https://evil|click>".into());
        let n = Notification { events: vec![e], omitted: 0 };
        let v: serde_json::Value = serde_json::from_slice(&slack_body(&n, "a<b")).expect("json");
        let text = v["text"].as_str().expect("text");
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
        assert!(text.contains("&lt;!here&gt; &amp; &lt;@U024BE7LH&gt; &lt;https://evil|click&gt;"), "{text}");
        assert!(text.starts_with("proctor on a&lt;b: [FIRING] R1"), "{text}");
    }

    #[test]
    fn bodies_are_json_with_what_receivers_expect() {
        let n = Notification { events: vec![event(1, Told::Firing), event(2, Told::Resolved)], omitted: 3 };
        let v: serde_json::Value = serde_json::from_slice(&webhook_body(&n, "box")).expect("json");
        assert_eq!(v["events"][1]["state"], "resolved");
        assert_eq!(v["omitted"], 3);
        assert_eq!(v["summary"], "[FIRING] R1 (warning) — and 4 more");
        let s: serde_json::Value = serde_json::from_slice(&slack_body(&n, "box")).expect("json");
        assert!(s["text"].as_str().expect("text").contains("[RESOLVED] R2"), "{s}");
        let a = postable(&event(1, Told::Resolved), 100.0, 60.0, "box", "http://x/");
        assert_eq!(a.ends_at, rfc3339(1.0));
        let v = serde_json::to_value(&a).expect("json");
        assert!(v.get("startsAt").is_some() && v.get("generatorURL").is_some(), "{v}");
    }
}
