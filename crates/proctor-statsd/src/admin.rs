//! The admin TCP interface, command-compatible with Etsy's management console: `help`,
//! `stats`, `counters`, `timers`, `gauges`, `delcounters`, `deltimers`, `delgauges`,
//! `health [up|down]`, `config`, `quit`.
//!
//! One thread per connection, one command per line. Replies follow Etsy's shapes (`END` after
//! lists, `ERROR` for an unknown command); maps print one entry per line in the style of Node's
//! `util.inspect`. `stats` adds proctor's own lines (`proctor.*`), among them the kernel's drop
//! count next to packets received. It never touches the sockets the metrics come from.

use std::fmt::Write as _;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::aggregate::{DumpValue, MetricType};
use crate::jsnum::js_format;
use crate::server::{self, internal_totals, SelfMetrics, Shared, Shutdown};

pub(crate) fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, shutdown: &Shutdown) {
    server::accept_connections(listener, shutdown, |stream| {
        let (shared, shutdown) = (Arc::clone(shared), shutdown.clone());
        thread::Builder::new()
            .name("statsd-admin-conn".to_owned())
            .spawn(move || connection(stream, &shared, &shutdown))
    });
}

fn connection(stream: TcpStream, shared: &Shared, shutdown: &Shutdown) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while server::read_command(&mut reader, &mut line, shutdown).is_some() {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or("");
        let parameters: Vec<String> = words.map(str::to_owned).collect();
        let reply = match command {
            "" => None,
            "quit" => return,
            _ => Some(answer(command, &parameters, shared)),
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
pub(crate) fn answer(command: &str, parameters: &[String], shared: &Shared) -> String {
    match command {
        "help" => {
            "Commands: stats, counters, timers, gauges, delcounters, deltimers, delgauges, health, config, quit\n\n"
                .to_owned()
        }
        "config" => {
            let mut out = String::from("\n");
            for (key, value) in &shared.describe {
                let _ = writeln!(out, "{key}: {value}");
            }
            out
        }
        "health" => {
            match parameters.first().map(|p| p.to_lowercase()).as_deref() {
                Some("up") => shared.health_up.store(true, Ordering::Relaxed),
                Some("down") => shared.health_up.store(false, Ordering::Relaxed),
                _ => {}
            }
            let status = if shared.health_up.load(Ordering::Relaxed) { "up" } else { "down" };
            format!("health: {status}\n")
        }
        "stats" => stats(shared),
        "counters" => {
            let mut entries = server::dump_all(shared, MetricType::Counters);
            let current = internal_totals(shared);
            let flushed = *shared.flushed_internal.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let names = ["packets_received", "metrics_received", "bad_lines_seen"];
            for ((name, now), before) in names.iter().zip(current).zip(flushed) {
                let key = format!("{}.{name}", shared.prefix_stats);
                entries.push((key.into(), DumpValue::Number(now.saturating_sub(before) as f64)));
            }
            inspect(entries) + "END\n\n"
        }
        "timers" => inspect(server::dump_all(shared, MetricType::Timers)) + "END\n\n",
        "gauges" => inspect(server::dump_all(shared, MetricType::Gauges)) + "END\n\n",
        "delcounters" | "deltimers" | "delgauges" => {
            let kind = match command {
                "delcounters" => MetricType::Counters,
                "deltimers" => MetricType::Timers,
                _ => MetricType::Gauges,
            };
            let deleted = server::delete_all(shared, kind, parameters);
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

fn stats(shared: &Shared) -> String {
    let metrics = SelfMetrics::read(shared);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut out = String::new();
    let _ = writeln!(out, "uptime: {}", metrics.uptime_seconds as u64);
    let last_seen = if metrics.last_msg_seen_unix == 0 { shared.started_unix } else { metrics.last_msg_seen_unix };
    let _ = writeln!(out, "messages.last_msg_seen: {}", now.saturating_sub(last_seen));
    let bad_total: u64 = metrics.bad_lines.iter().map(|(_, n)| n).sum();
    let _ = writeln!(out, "messages.bad_lines_seen: {bad_total}");
    // Etsy's backends report their status here; `last_*` values are seconds ago.
    for graphite in &shared.graphite {
        let load = |value: &std::sync::atomic::AtomicU64| value.load(Ordering::Relaxed);
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
