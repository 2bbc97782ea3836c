//! The admin TCP interface, command-compatible with Etsy's management console: `help`,
//! `stats`, `counters`, `timers`, `gauges`, `delcounters`, `deltimers`, `delgauges`,
//! `health [up|down]`, `config`, `quit`.
//!
//! One thread per connection, one command per line. Replies follow Etsy's shapes (`END` after
//! lists, `ERROR` for an unknown command); maps print one entry per line in the style of Node's
//! `util.inspect`. `stats` adds proctor's own lines (`proctor.*`), among them the kernel's drop
//! count next to packets received. It never touches the sockets the metrics come from, and it
//! sees the server only through [`AdminView`]: the few things Etsy's commands read or change.

use std::fmt::Write as _;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::aggregate::{DumpValue, MetricType};
use crate::conn;
use crate::graphite::GraphiteCounters;
use crate::jsnum::js_format;
use crate::self_metrics::SelfMetrics;
use crate::shutdown::Shutdown;

/// What Etsy's management commands need from a running server, and nothing else. The server
/// implements it over its shared state; the admin threads hold it as a trait object, so this
/// module never names the server's types.
pub(crate) trait AdminView: Send + Sync {
    /// Lines for `config`: what the server was started with.
    fn describe(&self) -> &[(String, String)];
    fn health_up(&self) -> bool;
    fn set_health_up(&self, up: bool);
    fn self_metrics(&self) -> SelfMetrics;
    /// When the server started (Unix seconds): `messages.last_msg_seen` before any message.
    fn started_unix(&self) -> u64;
    /// Status counters of each Graphite backend, for the `graphite.*` lines of `stats`.
    fn graphite(&self) -> &[Arc<GraphiteCounters>];
    /// Etsy's own counters (`<prefixStats>.packets_received`, …) as they stand in the current
    /// window, which `counters` lists beside the received ones.
    fn own_counters(&self) -> Vec<(String, f64)>;
    /// Current values of one type, over every shard.
    fn dump(&self, kind: MetricType) -> Vec<(Box<str>, DumpValue)>;
    /// Etsy's `delcounters` etc. over every shard: per pattern, the keys deleted.
    fn delete(&self, kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>>;
}

pub(crate) fn accept_loop(listener: &TcpListener, view: &Arc<dyn AdminView>, shutdown: &Shutdown) {
    conn::accept_connections(listener, shutdown, |stream| {
        let (view, shutdown) = (Arc::clone(view), shutdown.clone());
        thread::Builder::new().name("statsd-admin-conn".to_owned()).spawn(move || connection(stream, &*view, &shutdown))
    });
}

fn connection(stream: TcpStream, view: &dyn AdminView, shutdown: &Shutdown) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while conn::read_line(&mut reader, &mut line, shutdown).is_some() {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or("");
        let parameters: Vec<String> = words.map(str::to_owned).collect();
        let reply = match command {
            "" => None,
            "quit" => return,
            _ => Some(answer(command, &parameters, view)),
        };
        line.clear();
        if let Some(reply) = reply {
            if writer.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// The reply to one command (everything except `quit`).
pub(crate) fn answer(command: &str, parameters: &[String], view: &dyn AdminView) -> String {
    match command {
        "help" => {
            "Commands: stats, counters, timers, gauges, delcounters, deltimers, delgauges, health, config, quit\n\n"
                .to_owned()
        }
        "config" => {
            let mut out = String::from("\n");
            for (key, value) in view.describe() {
                let _ = writeln!(out, "{key}: {value}");
            }
            out
        }
        "health" => {
            match parameters.first().map(|p| p.to_lowercase()).as_deref() {
                Some("up") => view.set_health_up(true),
                Some("down") => view.set_health_up(false),
                _ => {}
            }
            let status = if view.health_up() { "up" } else { "down" };
            format!("health: {status}\n")
        }
        "stats" => stats(view),
        "counters" => {
            let mut entries = view.dump(MetricType::Counters);
            for (key, value) in view.own_counters() {
                entries.push((key.into(), DumpValue::Number(value)));
            }
            inspect(entries) + "END\n\n"
        }
        "timers" => inspect(view.dump(MetricType::Timers)) + "END\n\n",
        "gauges" => inspect(view.dump(MetricType::Gauges)) + "END\n\n",
        "delcounters" | "deltimers" | "delgauges" => {
            let kind = match command {
                "delcounters" => MetricType::Counters,
                "deltimers" => MetricType::Timers,
                _ => MetricType::Gauges,
            };
            let deleted = view.delete(kind, parameters);
            let mut out = String::new();
            for (pattern, keys) in parameters.iter().zip(deleted) {
                if keys.is_empty() {
                    let _ = writeln!(out, "metric {pattern} not found");
                }
                for key in keys {
                    let _ = writeln!(out, "deleted: {key}");
                }
            }
            out + "END\n\n"
        }
        _ => "ERROR\n".to_owned(),
    }
}

fn stats(view: &dyn AdminView) -> String {
    let metrics = view.self_metrics();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut out = String::new();
    let _ = writeln!(out, "uptime: {}", metrics.uptime_seconds as u64);
    let last_seen = if metrics.last_msg_seen_unix == 0 { view.started_unix() } else { metrics.last_msg_seen_unix };
    let _ = writeln!(out, "messages.last_msg_seen: {}", now.saturating_sub(last_seen));
    let bad_total: u64 = metrics.bad_lines.iter().map(|(_, n)| n).sum();
    let _ = writeln!(out, "messages.bad_lines_seen: {bad_total}");
    // Etsy's backends report their status here; `last_*` values are seconds ago.
    for graphite in view.graphite() {
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        let ago = |value: u64| {
            if value == 0 {
                0
            } else {
                now.saturating_sub(value)
            }
        };
        let _ = writeln!(out, "graphite.last_flush: {}", ago(load(&graphite.last_flush)));
        let _ = writeln!(out, "graphite.last_exception: {}", ago(load(&graphite.last_exception)));
        let _ = writeln!(out, "graphite.flush_time: {}", load(&graphite.flush_time_ms));
        let _ = writeln!(out, "graphite.flush_length: {}", load(&graphite.flush_length));
    }
    let _ = writeln!(out, "proctor.packets_received: {}", metrics.packets_received);
    let _ = writeln!(out, "proctor.kernel_dropped_packets: {}", metrics.kernel_dropped_packets);
    let _ = writeln!(out, "proctor.queue_dropped_packets: {}", metrics.ingress_dropped_packets);
    let _ = writeln!(out, "proctor.shard_queue_dropped_metrics: {}", metrics.shard_dropped_metrics);
    let _ = writeln!(out, "proctor.truncated_packets: {}", metrics.truncated_packets);
    let _ = writeln!(out, "proctor.metrics_received: {}", metrics.metrics_received);
    for (reason, count) in &metrics.bad_lines {
        let _ = writeln!(out, "proctor.bad_lines.{}: {count}", reason.as_str());
    }
    let _ = writeln!(out, "proctor.keys: {}", metrics.keys);
    let _ = writeln!(out, "proctor.key_limit_dropped_metrics: {}", metrics.key_limit_dropped_metrics);
    let _ = writeln!(out, "proctor.byte_limit_dropped_metrics: {}", metrics.byte_limit_dropped_metrics);
    let _ = writeln!(out, "proctor.aggregator_bytes: {}", metrics.aggregator_bytes);
    let _ = writeln!(out, "proctor.flushes: {}", metrics.flushes);
    let _ = writeln!(out, "proctor.timer_samples_not_kept: {}", metrics.timer_samples_not_kept);
    let _ = writeln!(out, "proctor.graphite_dropped_lines: {}", metrics.graphite_dropped_lines);
    for (socket, bytes) in metrics.rcvbuf_bytes.iter().enumerate() {
        let _ = writeln!(out, "proctor.udp{socket}.receive_buffer_bytes: {bytes}");
    }
    out + "END\n\n"
}

/// Node `util.inspect`-style map, one entry per line, keys sorted for stable output.
fn inspect(mut entries: Vec<(Box<str>, DumpValue)>) -> String {
    if entries.is_empty() {
        return "{}\n".to_owned();
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::from("{\n");
    let last = entries.len() - 1;
    for (index, (key, value)) in entries.into_iter().enumerate() {
        let value = match value {
            DumpValue::Number(number) => js_format(number),
            DumpValue::Samples(samples) if samples.is_empty() => "[]".to_owned(),
            DumpValue::Samples(samples) => {
                let items: Vec<String> = samples.iter().map(|v| js_format(*v)).collect();
                format!("[ {} ]", items.join(", "))
            }
        };
        let comma = if index == last { "" } else { "," };
        let _ = writeln!(out, "  '{key}': {value}{comma}");
    }
    out + "}\n"
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use super::{answer, AdminView};
    use crate::aggregate::{DumpValue, MetricType};
    use crate::graphite::GraphiteCounters;
    use crate::self_metrics::SelfMetrics;

    /// A server as the admin interface sees it: fixed values, and a record of deletions.
    #[derive(Default)]
    struct FakeView {
        health: AtomicBool,
        deleted: Mutex<Vec<String>>,
        describe: Vec<(String, String)>,
    }

    impl AdminView for FakeView {
        fn describe(&self) -> &[(String, String)] {
            &self.describe
        }
        fn health_up(&self) -> bool {
            self.health.load(Ordering::Relaxed)
        }
        fn set_health_up(&self, up: bool) {
            self.health.store(up, Ordering::Relaxed);
        }
        fn self_metrics(&self) -> SelfMetrics {
            SelfMetrics { packets_received: 3, ..SelfMetrics::default() }
        }
        fn started_unix(&self) -> u64 {
            0
        }
        fn graphite(&self) -> &[Arc<GraphiteCounters>] {
            &[]
        }
        fn own_counters(&self) -> Vec<(String, f64)> {
            vec![("statsd.packets_received".to_owned(), 3.0)]
        }
        fn dump(&self, kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
            match kind {
                MetricType::Counters => {
                    vec![("b".into(), DumpValue::Number(0.5)), ("a".into(), DumpValue::Number(2.0))]
                }
                MetricType::Timers => vec![("t".into(), DumpValue::Samples(vec![1.0, 2.5]))],
                _ => Vec::new(),
            }
        }
        fn delete(&self, _kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
            self.deleted.lock().expect("lock").extend(patterns.iter().cloned());
            patterns.iter().map(|p| if p == "a" { vec!["a".into()] } else { Vec::new() }).collect()
        }
    }

    fn ask(view: &FakeView, line: &str) -> String {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or("");
        let parameters: Vec<String> = words.map(str::to_owned).collect();
        answer(command, &parameters, view)
    }

    #[test]
    fn commands_read_and_change_only_what_the_view_offers() {
        let view = FakeView { describe: vec![("udp".into(), "off".into())], ..FakeView::default() };
        assert_eq!(ask(&view, "config"), "\nudp: off\n");
        assert_eq!(ask(&view, "health UP"), "health: up\n");
        assert!(view.health_up());
        assert_eq!(ask(&view, "counters"), "{\n  'a': 2,\n  'b': 0.5,\n  'statsd.packets_received': 3\n}\nEND\n\n");
        assert_eq!(ask(&view, "timers"), "{\n  't': [ 1, 2.5 ]\n}\nEND\n\n");
        assert_eq!(ask(&view, "gauges"), "{}\nEND\n\n");
        assert_eq!(ask(&view, "delgauges a b"), "deleted: a\nmetric b not found\nEND\n\n");
        assert_eq!(*view.deleted.lock().expect("lock"), ["a", "b"]);
        assert!(ask(&view, "stats").contains("proctor.packets_received: 3\n"));
        assert_eq!(ask(&view, "nope"), "ERROR\n");
    }
}
