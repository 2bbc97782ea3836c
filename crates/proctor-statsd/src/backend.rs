//! Backends: where a flush goes. The trait, the console backend (one JSON document per flush on
//! stdout) and the file backend (one JSON line per flush, appended).
//!
//! Backends run on the flush thread, one after another; none of them sees the sockets or the
//! aggregator. Graphite lives in its own module because of its naming rules.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::flush::FlushData;

/// A backend failed one flush; the server logs it, counts it and carries on.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{backend}: cannot send to {address}")]
    Send {
        backend: &'static str,
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{backend}: cannot write {path}")]
    Write {
        backend: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Something that receives every flush.
pub trait Backend: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn flush(&mut self, data: &FlushData, now_seconds: u64) -> Result<(), BackendError>;
}

/// A flush as JSON: `{"timestamp":…, "counters":{"k":{"count":…,"rate":…}}, "timers":{"k":{…}},
/// "gauges":{"k":v}, "sets":{"k":n}}`, with `"approximate": true` on timers and sets whose
/// figures come from a capped sample.
pub fn flush_json(data: &FlushData) -> Value {
    let mut counters = Map::new();
    for counter in &data.counters {
        counters.insert(counter.key.clone(), json!({"count": counter.count, "rate": counter.rate_per_second}));
    }
    let mut timers = Map::new();
    for timer in &data.timers {
        let mut stats: Map<String, Value> =
            timer.stats.iter().map(|(name, value)| (name.clone(), json!(value))).collect();
        if !timer.histogram.is_empty() {
            let bins: Map<String, Value> =
                timer.histogram.iter().map(|(name, value)| (name.clone(), json!(value))).collect();
            stats.insert("histogram".to_owned(), Value::Object(bins));
        }
        if timer.approximate {
            stats.insert("approximate".to_owned(), Value::Bool(true));
        }
        timers.insert(timer.key.clone(), Value::Object(stats));
    }
    let gauges: Map<String, Value> = data.gauges.iter().map(|gauge| (gauge.key.clone(), json!(gauge.value))).collect();
    let mut sets = Map::new();
    for set in &data.sets {
        let value = if set.approximate { json!({"count": set.count, "approximate": true}) } else { json!(set.count) };
        sets.insert(set.key.clone(), value);
    }
    json!({
        "timestamp": data.timestamp_seconds,
        "interval_ms": data.interval_ms,
        "counters": counters,
        "timers": timers,
        "gauges": gauges,
        "sets": sets,
    })
}

/// Prints every flush to stdout as one pretty JSON document.
#[derive(Debug, Default)]
pub struct ConsoleBackend;

impl Backend for ConsoleBackend {
    fn name(&self) -> &'static str {
        "console"
    }

    fn flush(&mut self, data: &FlushData, _now_seconds: u64) -> Result<(), BackendError> {
        let text = serde_json::to_string_pretty(&flush_json(data)).unwrap_or_default();
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{text}").and_then(|()| stdout.flush()).map_err(|source| BackendError::Write {
            backend: "console",
            path: "-".into(),
            source,
        })
    }
}

/// Appends every flush to a file as one JSON line. The file is opened at every flush so
/// log rotation (rename, then a new file) needs no signal.
#[derive(Debug)]
pub struct FileBackend {
    path: PathBuf,
}

impl FileBackend {
    pub fn new(path: PathBuf) -> Self {
        FileBackend { path }
    }

    fn append(&self, line: &str) -> std::io::Result<()> {
        let file: File = OpenOptions::new().create(true).append(true).open(&self.path)?;
        let mut writer = BufWriter::new(file);
        writer.write_all(line.as_bytes())?;
        writer.write_all(b"\n")?;
        writer.flush()
    }
}

impl Backend for FileBackend {
    fn name(&self) -> &'static str {
        "file"
    }

    fn flush(&mut self, data: &FlushData, _now_seconds: u64) -> Result<(), BackendError> {
        let line = flush_json(data).to_string();
        self.append(&line).map_err(|source| BackendError::Write { backend: "file", path: self.path.clone(), source })
    }
}
