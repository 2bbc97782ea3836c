//! `proctor statsd`: run the statsd server in the foreground until SIGINT or SIGTERM.
//!
//! This module turns flags and an Etsy config file into bound sockets, backends and a
//! `ServerConfig`, prints what it listens on to stderr, and waits. The server itself lives in
//! `proctor-statsd`; nothing here parses metrics. Flags win over the config file.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_vocab::parse_duration;

use crate::streams::{EventRecorder, RecordBackend};
use proctor_statsd::config::{parse_etsy_config, EtsyConfig};
use proctor_statsd::graphite::GraphiteCounters;
use proctor_statsd::net::{bind_udp, set_rcvbuf};
use proctor_statsd::{
    AggregatorConfig, Backend, ConsoleBackend, FileBackend, FlushConfig, GraphiteBackend, GraphiteConfig,
    GraphiteNaming, IdlePolicy, Listeners, ParseOptions, Server, ServerConfig, Shutdown,
};
use proctor_store::STATSD_STREAM;

/// Arguments of `proctor statsd`, boxed so the `Command` enum stays small.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: Box<Options>,
    /// Also record every flush into DATA/statsd (DATA from --data-dir, else the directory
    /// `proctor serve` records into), for `proctor report --timer`.
    #[arg(long)]
    record: bool,
    /// The data directory to record into (must exist); implies --record.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct Options {
    /// UDP address to receive on (default 127.0.0.1:8125; `off` disables UDP).
    #[arg(long, value_name = "ADDR:PORT")]
    udp: Option<String>,
    /// TCP address for newline-delimited metrics (off unless given).
    #[arg(long, value_name = "ADDR:PORT")]
    tcp: Option<String>,
    /// Unix datagram socket path to receive on (off unless given; an old socket file is replaced).
    #[arg(long, value_name = "PATH")]
    pub(crate) unix: Option<PathBuf>,
    /// Admin TCP address, Etsy's management commands (default 127.0.0.1:8126; `off` disables).
    #[arg(long, value_name = "ADDR:PORT")]
    admin: Option<String>,
    /// How often to flush, e.g. 10s, 500ms, 1m (default 10s).
    #[arg(long, value_name = "DURATION")]
    flush_interval: Option<String>,
    /// Send every flush to Graphite's plaintext port.
    #[arg(long, value_name = "HOST:PORT")]
    graphite: Option<String>,
    /// Print every flush to stdout as JSON.
    #[arg(long)]
    console: bool,
    /// Append every flush to a file as one JSON line.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// An Etsy statsd config file (JSON or the usual JavaScript object literal).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Receive buffer to request per UDP socket, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    rcvbuf: usize,
    /// UDP sockets sharing the port with SO_REUSEPORT, one reader and parser thread each.
    #[arg(long, value_name = "N", default_value_t = 1)]
    udp_sockets: usize,
    /// Aggregator threads; keys are spread over them by hash.
    #[arg(long, value_name = "N", default_value_t = 1)]
    shards: usize,
    /// Distinct keys kept; metrics for further new keys are dropped and counted.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_keys: usize,
    /// Timer samples kept per key per flush; beyond it percentiles come from a uniform sample.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_timer_samples: usize,
    /// Remove a key after this long without updates (0 keeps keys forever, as Etsy does).
    #[arg(long, value_name = "DURATION", default_value = "0")]
    expire_idle: String,
}

/// Everything after merging the config file and the flags.
struct Settings {
    udp: Option<SocketAddr>,
    tcp: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    flush_interval: Duration,
    graphite: Option<String>,
    console: bool,
    etsy: EtsyConfig,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let record = if args.record || args.data_dir.is_some() {
        Some(match &args.data_dir {
            Some(dir) => dir.clone(),
            None => crate::datadir::default_dir_created().map_err(|(_, e)| anyhow::anyhow!(e))?,
        })
    } else {
        None
    };
    let args = *args.options;
    let etsy = etsy_config(&args)?;
    // Block SIGINT and SIGTERM before any thread starts so every thread inherits the mask and
    // only the waiter below receives them.
    let signals = crate::signals::block()?;
    let shutdown = Shutdown::new();
    let recorder = match &record {
        Some(dir) => Some(EventRecorder::start(dir, STATSD_STREAM, "proctor statsd")?),
        None => None,
    };
    let server = start(&args, etsy, shutdown.clone(), recorder.as_ref())?;
    let waiter = shutdown.clone();
    signals.on_signal("statsd-signals", move || {
        eprintln!("proctor statsd: stopping (last flush first)");
        waiter.trigger();
    })?;
    server.join();
    if let Some(recorder) = recorder {
        recorder.stop();
    }
    if let Some(path) = &args.unix {
        let _ = std::fs::remove_file(path);
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads the config file named by `--config`, if any.
pub fn etsy_config(args: &Options) -> anyhow::Result<EtsyConfig> {
    Ok(match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let etsy = parse_etsy_config(&text).with_context(|| format!("cannot use {}", path.display()))?;
            for key in &etsy.ignored_keys {
                eprintln!("proctor statsd: config key {key} is not used by proctor");
            }
            etsy
        }
        None => EtsyConfig::default(),
    })
}

/// Binds every socket the options name and starts the server; `proctor serve --statsd` uses
/// this too. The caller owns signals and shutdown, and the recorder flushes are handed to
/// (its queue outlives the server: stop it after `Server::join`).
pub fn start(
    args: &Options,
    etsy: EtsyConfig,
    shutdown: Shutdown,
    recorder: Option<&EventRecorder>,
) -> anyhow::Result<Server> {
    let settings = settings(args, etsy)?;

    let mut listeners = Listeners::default();
    let mut rcvbuf = Vec::new();
    if let Some(address) = settings.udp {
        let reuseport = args.udp_sockets > 1;
        for _ in 0..args.udp_sockets.max(1) {
            let socket = bind_udp(address, reuseport).with_context(|| format!("cannot bind udp {address}"))?;
            let outcome = set_rcvbuf(socket.as_raw_fd(), args.rcvbuf).context("cannot set SO_RCVBUF")?;
            if outcome.capped() {
                eprintln!(
                    "proctor statsd: warning: asked for a {} byte receive buffer, the kernel applied {} \
                     (net.core.rmem_max caps it; raise it with sysctl -w net.core.rmem_max={})",
                    outcome.requested_bytes,
                    outcome.applied_bytes / 2,
                    outcome.requested_bytes
                );
            }
            rcvbuf.push(outcome);
            listeners.udp.push(socket);
        }
        let forced = rcvbuf.iter().any(|o| o.forced);
        eprintln!(
            "proctor statsd: udp {address} ({} socket{}, receive buffer {} bytes{})",
            listeners.udp.len(),
            if listeners.udp.len() == 1 { "" } else { "s" },
            rcvbuf.first().map(|o| o.applied_bytes).unwrap_or(0),
            if forced { ", forced past net.core.rmem_max" } else { "" }
        );
    }
    if let Some(address) = settings.tcp {
        listeners.tcp = Some(TcpListener::bind(address).with_context(|| format!("cannot bind tcp {address}"))?);
        eprintln!("proctor statsd: tcp {address}");
    }
    if let Some(path) = &args.unix {
        // A socket file left by a previous run would make bind fail; only a socket is removed.
        if std::fs::symlink_metadata(path).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
            std::fs::remove_file(path).with_context(|| format!("cannot remove old socket {}", path.display()))?;
        }
        let socket = UnixDatagram::bind(path).with_context(|| format!("cannot bind unix socket {}", path.display()))?;
        listeners.unix = Some(socket);
        eprintln!("proctor statsd: unix {}", path.display());
    }
    if let Some(address) = settings.admin {
        listeners.admin = Some(TcpListener::bind(address).with_context(|| format!("cannot bind admin {address}"))?);
        eprintln!("proctor statsd: admin {address}");
    }

    let etsy = &settings.etsy;
    let start_seconds =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut backends: Vec<Box<dyn Backend>> = Vec::new();
    let mut graphite_counters: Vec<Arc<GraphiteCounters>> = Vec::new();
    if let Some(address) = &settings.graphite {
        let mut config = GraphiteConfig::new(address.clone());
        config.naming = naming(etsy);
        let backend = GraphiteBackend::new(config, start_seconds);
        graphite_counters.push(backend.counters());
        backends.push(Box::new(backend));
        eprintln!("proctor statsd: graphite {address}");
    }
    if settings.console {
        backends.push(Box::new(ConsoleBackend));
    }
    if let Some(path) = &args.file {
        backends.push(Box::new(FileBackend::new(path.clone())));
    }
    if let Some(sender) = recorder.and_then(EventRecorder::sender) {
        backends.push(Box::new(RecordBackend { sender }));
    }
    if backends.is_empty() {
        eprintln!("proctor statsd: no backend (--graphite, --console, --file): flushes are computed and dropped");
    }

    let interval_ms = settings.flush_interval.as_millis().max(1) as u64;
    let idle_flushes = idle_flushes(&args.expire_idle, interval_ms)?;
    let delete_all = etsy.delete_idle_stats.unwrap_or(false);
    let deleting = |specific: Option<bool>| specific.unwrap_or(delete_all);
    let gauge_ttl = etsy.gauges_max_ttl.filter(|ttl| *ttl > 1).unwrap_or(1);
    let idle = IdlePolicy {
        counters: if deleting(etsy.delete_counters) { 1 } else { idle_flushes },
        timers: if deleting(etsy.delete_timers) { 1 } else { idle_flushes },
        sets: if deleting(etsy.delete_sets) { 1 } else { idle_flushes },
        gauges: if deleting(etsy.delete_gauges) { gauge_ttl } else { idle_flushes },
    };
    let flush = FlushConfig {
        interval_ms,
        percent_thresholds: etsy.percent_threshold.clone().unwrap_or_else(|| vec![90.0]),
        histograms: etsy.histogram.clone().unwrap_or_default(),
    };
    let describe = vec![
        ("udp".to_owned(), settings.udp.map_or("off".to_owned(), |a| a.to_string())),
        ("tcp".to_owned(), settings.tcp.map_or("off".to_owned(), |a| a.to_string())),
        ("admin".to_owned(), settings.admin.map_or("off".to_owned(), |a| a.to_string())),
        ("flushInterval".to_owned(), interval_ms.to_string()),
        ("percentThreshold".to_owned(), format!("{:?}", flush.percent_thresholds)),
        ("graphite".to_owned(), settings.graphite.clone().unwrap_or_else(|| "off".to_owned())),
        ("maxKeys".to_owned(), args.max_keys.to_string()),
        ("maxTimerSamples".to_owned(), args.max_timer_samples.to_string()),
        ("idleFlushes".to_owned(), format!("{idle:?}")),
    ];
    let config = ServerConfig {
        flush,
        limits: AggregatorConfig {
            max_keys: args.max_keys,
            max_samples_per_timer: args.max_timer_samples,
            idle,
            ..AggregatorConfig::default()
        },
        shards: args.shards.max(1),
        parse: ParseOptions { sanitize_keys: etsy.key_name_sanitize.unwrap_or(true) },
        prefix_stats: etsy.prefix_stats.clone().unwrap_or_else(|| "statsd".to_owned()),
        health_up: etsy.health_status.as_deref() != Some("down"),
        describe,
        rcvbuf,
        ..ServerConfig::default()
    };

    Server::start(listeners, config, backends, graphite_counters, shutdown).context("cannot start the statsd server")
}

fn settings(args: &Options, etsy: EtsyConfig) -> anyhow::Result<Settings> {
    let udp = match &args.udp {
        Some(text) => address(text, "--udp")?,
        None => Some(resolve(
            &format!("{}:{}", etsy.address.as_deref().unwrap_or("127.0.0.1"), etsy.port.unwrap_or(8125)),
            "udp",
        )?),
    };
    let tcp = match (&args.tcp, &etsy.tcp) {
        (Some(text), _) => address(text, "--tcp")?,
        (None, Some((host, port))) => {
            Some(resolve(&format!("{}:{port}", host.as_deref().unwrap_or("127.0.0.1")), "servers tcp")?)
        }
        (None, None) => None,
    };
    let admin = match &args.admin {
        Some(text) => address(text, "--admin")?,
        None => Some(resolve(
            &format!("{}:{}", etsy.mgmt_address.as_deref().unwrap_or("127.0.0.1"), etsy.mgmt_port.unwrap_or(8126)),
            "mgmt",
        )?),
    };
    let flush_interval = match &args.flush_interval {
        Some(text) => parse_duration(text).with_context(|| "bad --flush-interval")?,
        None => Duration::from_millis(etsy.flush_interval_ms.unwrap_or(10_000)),
    };
    if flush_interval < Duration::from_millis(1) {
        bail!("the flush interval must be at least 1ms");
    }
    // Etsy loads graphite unless `backends` leaves it out, and sends only if graphiteHost is set.
    let etsy_graphite = etsy
        .graphite_host
        .as_ref()
        .filter(|_| etsy.backends.as_ref().is_none_or(|list| list.iter().any(|b| b.ends_with("graphite"))));
    let graphite = args
        .graphite
        .clone()
        .or_else(|| etsy_graphite.map(|host| format!("{host}:{}", etsy.graphite_port.unwrap_or(2003))));
    let console =
        args.console || etsy.backends.as_ref().is_some_and(|list| list.iter().any(|b| b.ends_with("console")));
    Ok(Settings { udp, tcp, admin, flush_interval, graphite, console, etsy })
}

fn address(text: &str, flag: &str) -> anyhow::Result<Option<SocketAddr>> {
    if text == "off" {
        return Ok(None);
    }
    resolve(text, flag).map(Some)
}

fn resolve(text: &str, what: &str) -> anyhow::Result<SocketAddr> {
    text.to_socket_addrs()
        .with_context(|| format!("bad {what} address {text:?}"))?
        .next()
        .with_context(|| format!("{what} address {text:?} resolves to nothing"))
}

fn naming(etsy: &EtsyConfig) -> GraphiteNaming {
    let defaults = GraphiteNaming::default();
    GraphiteNaming {
        legacy_namespace: etsy.legacy_namespace.unwrap_or(defaults.legacy_namespace),
        global_prefix: etsy.global_prefix.clone().unwrap_or(defaults.global_prefix),
        prefix_counter: etsy.prefix_counter.clone().unwrap_or(defaults.prefix_counter),
        prefix_timer: etsy.prefix_timer.clone().unwrap_or(defaults.prefix_timer),
        prefix_gauge: etsy.prefix_gauge.clone().unwrap_or(defaults.prefix_gauge),
        prefix_set: etsy.prefix_set.clone().unwrap_or(defaults.prefix_set),
        global_suffix: etsy.global_suffix.clone(),
        prefix_stats: etsy.prefix_stats.clone().unwrap_or(defaults.prefix_stats),
        flush_counts: etsy.flush_counts.unwrap_or(defaults.flush_counts),
    }
}

/// `--expire-idle` as a number of flushes, rounded up; 0 stays 0 (never).
fn idle_flushes(text: &str, interval_ms: u64) -> anyhow::Result<u32> {
    let idle = parse_duration(text).with_context(|| "bad --expire-idle")?;
    let flushes = (idle.as_millis() as u64).div_ceil(interval_ms);
    Ok(flushes.min(u64::from(u32::MAX)) as u32)
}

#[cfg(test)]
mod tests {
    use super::idle_flushes;

    #[test]
    fn idle_expiry_rounds_up_to_whole_flushes() {
        assert_eq!(idle_flushes("0", 10_000).ok(), Some(0));
        assert_eq!(idle_flushes("1h", 10_000).ok(), Some(360));
        assert_eq!(idle_flushes("15s", 10_000).ok(), Some(2));
    }
}
