//! The statsd server as `proctor statsd` and `proctor serve --statsd` both start it: its flags
//! ([`Options`]), the Etsy config file, binding the sockets and building the backends. What an
//! Etsy config and the flags mean together is `proctor-statsd`'s (`Setup::from_etsy`, flags win
//! over the file); this module turns flags into typed overrides, binds and builds. Signals,
//! shutdown and whether flushes are recorded stay with the command that starts the server.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use proctor_statsd::config::{parse_etsy_config, EtsyConfig};
use proctor_statsd::graphite::GraphiteCounters;
use proctor_statsd::net::{bind_udp, set_rcvbuf};
use proctor_statsd::setup::{resolve, Listen, Overrides, Setup};
use proctor_statsd::{Backend, ConsoleBackend, FileBackend, GraphiteBackend, Listeners, Server, Shutdown};
use proctor_vocab::parse_duration;

use crate::streams::{EventRecorder, RecordBackend};

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
    /// Longest key kept, in bytes; longer keys are bad lines (`key_too_long`).
    #[arg(long, value_name = "BYTES", default_value_t = proctor_statsd::parse::MAX_KEY_BYTES)]
    max_key_bytes: usize,
    /// Memory the keys and set members may hold, in MiB; past it new keys and members are
    /// dropped and counted (`byte_limit_dropped_metrics`).
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    max_mib: usize,
    /// Remove a key after this long without updates (0 keeps keys forever, as Etsy does).
    #[arg(long, value_name = "DURATION", default_value = "0")]
    expire_idle: String,
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
/// Who reads the flushes besides the backends: `proctor serve --statsd` shows every flush on
/// `/metrics`, so no backend there is no loss; `proctor statsd` alone would compute and drop them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushReaders {
    BackendsOnly,
    Metrics,
}

pub fn start(
    args: &Options,
    etsy: EtsyConfig,
    shutdown: Shutdown,
    recorder: Option<&EventRecorder>,
    readers: FlushReaders,
) -> anyhow::Result<Server> {
    let mut setup = Setup::from_etsy(&etsy, &overrides(args)?)?;

    let mut listeners = Listeners::default();
    let mut rcvbuf = Vec::new();
    if let Some(mut address) = setup.udp {
        let reuseport = args.udp_sockets > 1;
        for _ in 0..args.udp_sockets.max(1) {
            let socket = bind_udp(address, reuseport).with_context(|| format!("cannot bind udp {address}"))?;
            // Port 0 asks the kernel for one: the other sockets share the port it gave, and the
            // line below says which (the address a client, or a test, is to use).
            address = socket.local_addr().unwrap_or(address);
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
    setup.server.rcvbuf = rcvbuf;
    if let Some(address) = setup.tcp {
        let listener = TcpListener::bind(address).with_context(|| format!("cannot bind tcp {address}"))?;
        eprintln!("proctor statsd: tcp {}", listener.local_addr().unwrap_or(address));
        listeners.tcp = Some(listener);
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
    if let Some(address) = setup.admin {
        let listener = TcpListener::bind(address).with_context(|| format!("cannot bind admin {address}"))?;
        eprintln!("proctor statsd: admin {}", listener.local_addr().unwrap_or(address));
        listeners.admin = Some(listener);
    }

    let start_seconds =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut backends: Vec<Box<dyn Backend>> = Vec::new();
    let mut graphite_counters: Vec<Arc<GraphiteCounters>> = Vec::new();
    if let Some(config) = setup.graphite {
        let address = config.address.clone();
        let backend = GraphiteBackend::new(config, start_seconds);
        graphite_counters.push(backend.counters());
        backends.push(Box::new(backend));
        eprintln!("proctor statsd: graphite {address}");
    }
    if setup.console {
        backends.push(Box::new(ConsoleBackend));
    }
    if let Some(path) = &args.file {
        backends.push(Box::new(FileBackend::new(path.clone())));
    }
    if let Some(sender) = recorder.and_then(EventRecorder::sender) {
        backends.push(Box::new(RecordBackend { sender }));
    }
    if backends.is_empty() {
        match readers {
            FlushReaders::BackendsOnly => eprintln!(
                "proctor statsd: no backend (--graphite, --console, --file): flushes are computed and dropped"
            ),
            FlushReaders::Metrics => {
                eprintln!("proctor serve: statsd flushes go to /metrics only (no --graphite, --console or --file)")
            }
        }
    }

    Server::start(listeners, setup.server, backends, graphite_counters, shutdown)
        .context("cannot start the statsd server")
}

/// The flags as typed overrides of the config file: addresses resolved (`off` disables a
/// listener), durations parsed with the one duration grammar.
fn overrides(args: &Options) -> anyhow::Result<Overrides> {
    let listen = |text: &Option<String>, flag: &'static str| -> anyhow::Result<Option<Listen>> {
        Ok(match text.as_deref() {
            None => None,
            Some("off") => Some(Listen::Off),
            Some(text) => Some(Listen::At(resolve(text, flag)?)),
        })
    };
    Ok(Overrides {
        udp: listen(&args.udp, "--udp")?,
        tcp: listen(&args.tcp, "--tcp")?,
        admin: listen(&args.admin, "--admin")?,
        flush_interval: args
            .flush_interval
            .as_deref()
            .map(parse_duration)
            .transpose()
            .with_context(|| "bad --flush-interval")?,
        graphite: args.graphite.clone(),
        console: args.console,
        expire_idle: parse_duration(&args.expire_idle).with_context(|| "bad --expire-idle")?,
        max_keys: Some(args.max_keys),
        max_timer_samples: Some(args.max_timer_samples),
        max_key_bytes: Some(args.max_key_bytes),
        max_bytes: Some(args.max_mib.saturating_mul(1 << 20)),
        shards: Some(args.shards),
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proctor_statsd::config::EtsyConfig;
    use proctor_statsd::setup::Setup;

    use super::{overrides, Options};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }

    /// `--expire-idle` with the default 10 s flush, through the flag parsing and `Setup`.
    fn idle_flushes(text: &str) -> Option<u32> {
        let cli = Cli::try_parse_from(["statsd", "--expire-idle", text]).ok()?;
        let setup = Setup::from_etsy(&EtsyConfig::default(), &overrides(&cli.options).ok()?).ok()?;
        Some(setup.server.limits.idle.counters)
    }

    #[test]
    fn idle_expiry_rounds_up_to_whole_flushes() {
        assert_eq!(idle_flushes("0"), Some(0));
        assert_eq!(idle_flushes("1h"), Some(360));
        assert_eq!(idle_flushes("15s"), Some(2));
    }
}
