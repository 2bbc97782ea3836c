//! `proctor serve`: the live agent. Samples on its own thread, answers HTTP from the latest
//! snapshot, and optionally runs the statsd server in the same process.
//!
//! This module decides every flag once (`decide`: a non-loopback address needs a token, files
//! and URLs are checked) before anything starts, then turns the decision into a daemon, a
//! router and (with `--statsd`) a statsd server, opens the data directory it records into (on
//! by default; a store that cannot be opened is reported and serving goes on), and waits for
//! SIGINT or SIGTERM. The agent and its recorder live in `proctor-agent`, routes and
//! rendering in `proctor-http`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_agent::disk::DiskWatch;
use proctor_agent::{AgentConfig, Recording};
use proctor_http::prom::{Family, MetricsConfig, ProcessRank};
use proctor_http::{ApiConfig, ConnLimits, ExtraMetrics, HostRule};
use proctor_statsd::{ServerHandle, Shutdown};
use proctor_store::{StoreConfig, Writer, STATSD_STREAM};
use proctor_vocab::jupyter::JupyterConfig;

use crate::cmd::common::ReadArgs;
use crate::daemon::{limit_malloc_arenas, Daemon, Statsd};
use crate::datadir;
use crate::signals;
use crate::streams::EventRecorder;
use proctor_vocab::{duration_arg, format_duration};

/// The port `proctor serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 9465;

/// How often the Jupyter endpoint's filesystem usage is read, and how long a read may take
/// before it is reported as hung.
const DISK_EVERY: Duration = Duration::from_secs(5);
const DISK_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Rank {
    Cpu,
    Rss,
}

/// Arguments of `proctor serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: Box<ServeOptions>,
}

#[derive(Debug, clap::Args)]
struct ServeOptions {
    /// Address to listen on. Anything but loopback needs --token (or --insecure).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9465")]
    listen: String,
    /// Sampling period, e.g. 1s, 500ms, 10s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_arg)]
    interval: Duration,
    /// How much history to keep in memory (host, container and top-process series), e.g. 1h, 1d.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = duration_arg)]
    history: Duration,
    /// Require `Authorization: Bearer TOKEN` on every request. Prefer --token-file: a command
    /// line is readable by every user of the host.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    token: Option<String>,
    /// Read the token from this file (surrounding whitespace is ignored).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve a non-loopback address without a token.
    #[arg(long)]
    insecure: bool,
    /// On a loopback address without a token, also answer requests whose Host is NAME (only
    /// loopback names and addresses are answered otherwise: a page on another site whose name
    /// was rebound to 127.0.0.1 must not read the process list). Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Most HTTP connections open at once (default: an eighth of the fd limit, 16 to 512). At
    /// the cap, the quietest open connection is closed to make room; a newcomer is refused only
    /// when every open connection is busy.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(usize))]
    max_connections: Option<usize>,
    /// Processes that get their own /metrics series.
    #[arg(long, value_name = "N", default_value_t = 10)]
    metrics_top: usize,
    /// How those processes are picked: by CPU over the last interval, or by resident memory.
    #[arg(long, value_enum, default_value = "cpu")]
    metrics_rank: Rank,
    /// Root of the tree /api/metrics/v1 reports on (default: the process that started proctor).
    #[arg(long, value_name = "PID")]
    jupyter_pid: Option<u32>,
    /// Filesystem whose usage /api/metrics/v1 reports (default: $HOME, else /).
    #[arg(long, value_name = "PATH")]
    disk_path: Option<PathBuf>,
    /// Share of one CPU the PSS worker may spend reading smaps_rollup (0 turns PSS off). The
    /// default keeps the whole agent under 1 % of a core with ~600 processes; raise it to
    /// refresh PSS of big trees sooner (a 2 GiB process costs ~30 ms per read). An average:
    /// up to 30 s of unspent budget is saved and spent at up to 4× the share.
    #[arg(long, value_name = "SHARE", default_value_t = 0.005)]
    pss_budget: f64,
    /// Keep process groups every sample, for `/api/v1/groups` and `/metrics`
    /// (`proctor_group_*`): `cgroup`, `user`, or a process-exporter rules file. Recorded
    /// samples say which group each process was in (`report --group`, `dump group`, rollups).
    #[arg(long, value_name = "cgroup|user|FILE")]
    groups: Option<String>,
    /// At most this many groups get series (by CPU); the rest are counted in
    /// `proctor_group_overflow`.
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_groups: usize,
    /// Also run the statsd server (its flags below); its figures join /metrics.
    #[arg(long)]
    statsd: bool,
    /// Most statsd keys exposed on /metrics per type (the rest are counted, not shown).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    statsd_metrics_max: usize,
    /// Record every sample into this directory (must exist; `proctor replay --dir` and `proctor
    /// dump --dir` read it). A directory that cannot be used, or one another recorder holds, is
    /// reported and serving goes on without recording.
    #[arg(long, value_name = "DIR", conflicts_with = "no_record")]
    data_dir: Option<PathBuf>,
    /// Record into the default data directory, which is what serve does anyway:
    /// $XDG_STATE_HOME/proctor, else $HOME/.local/state/proctor, created (mode 0700) if missing.
    /// Accepted so that scripts written when recording was opt-in keep working.
    #[arg(long, conflicts_with = "no_record")]
    record: bool,
    /// Do not record samples (serve from memory only).
    #[arg(long)]
    no_record: bool,
    /// The long-term tiers rolled up from the recording every few minutes.
    #[command(flatten)]
    tiers: crate::daemon::TierArgs,
    /// Drop recorded data older than this (whole segments; `7d`, `36h`, `90m`).
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = duration_arg)]
    retain_age: Duration,
    /// Drop the oldest recorded data while the data directory exceeds this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 2048)]
    retain_mib: u64,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten, next_help_heading = "Alerts")]
    alerts: AlertArgs,
    #[command(flatten, next_help_heading = "statsd (with --statsd)")]
    statsd_options: crate::statsd_server::Options,
    #[command(flatten, next_help_heading = "Remote write")]
    remote_write: crate::remote_write::RemoteWriteArgs,
}

#[derive(Debug, clap::Args)]
struct AlertArgs {
    /// Alert rules, evaluated on every sample: Prometheus's rules layout with proctor's own
    /// expressions (docs/alerts.md). Transitions go to DATA/alerts/events.jsonl and to the
    /// receivers; SIGHUP reloads the file (a bad file keeps the rules loaded before).
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Tell this webhook of every transition (a JSON body, docs/alerts.md); repeatable.
    #[arg(long = "alert-webhook", value_name = "URL", requires = "rules")]
    webhook: Vec<String>,
    /// Tell this Slack-compatible incoming webhook (`text`); repeatable.
    #[arg(long = "alert-slack", value_name = "URL", requires = "rules")]
    slack: Vec<String>,
    /// Send alerts to this Alertmanager (`POST /api/v2/alerts`, re-sent while firing); repeatable.
    #[arg(long = "alertmanager", value_name = "URL", requires = "rules")]
    alertmanager: Vec<String>,
    /// Run this command for every notification (split on spaces, no shell; every event on its
    /// stdin as a JSON line, the first's values in PROCTOR_ALERT_* variables; 10 s timeout);
    /// repeatable.
    #[arg(long = "alert-exec", value_name = "'CMD ARG…'", requires = "rules")]
    exec: Vec<String>,
}

impl AlertArgs {
    fn receivers(&self) -> anyhow::Result<Vec<proctor_alerts::rules::Receiver>> {
        use proctor_alerts::rules::{check_url, Receiver};
        let mut out = Vec::new();
        for (flag, urls, make) in [
            ("--alert-webhook", &self.webhook, Receiver::Webhook as fn(String) -> Receiver),
            ("--alert-slack", &self.slack, Receiver::Slack),
            ("--alertmanager", &self.alertmanager, Receiver::Alertmanager),
        ] {
            for url in urls {
                check_url(url).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                out.push(make(url.clone()));
            }
        }
        for cmd in &self.exec {
            let argv: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
            if argv.is_empty() {
                bail!("--alert-exec: an empty command");
            }
            out.push(Receiver::Exec { argv, timeout_secs: 10.0 });
        }
        Ok(out)
    }
}

/// This host's name, for alerts and remote write's `host` label: the kernel's
/// (`/proc/sys/kernel/hostname`, which is this process's UTS namespace). Under a host root
/// that is a container's name, so the host's `/etc/hostname` comes first there.
fn host_name(root: &proctor_procfs::Root) -> String {
    let configured = root
        .is_host()
        .then(|| {
            let mut bytes = Vec::new();
            root.read_into_at_most("/etc/hostname", &mut bytes, 4096).ok()?;
            String::from_utf8(bytes).ok()
        })
        .flatten();
    configured
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()))
        .unwrap_or_else(|| "localhost".to_string())
}

fn parent_pid() -> u32 {
    // SAFETY: getppid has no preconditions.
    u32::try_from(unsafe { libc::getppid() }).unwrap_or(1)
}

/// Every address `text` resolves to, and whether all of them are loopback.
fn resolve_listen(text: &str) -> anyhow::Result<(SocketAddr, bool)> {
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .with_context(|| format!("--listen {text}: not an address (want ADDR:PORT, e.g. 127.0.0.1:{DEFAULT_PORT})"))?
        .collect();
    let first = *addrs.first().with_context(|| format!("--listen {text}: resolves to no address"))?;
    Ok((first, addrs.iter().all(|a| a.ip().is_loopback())))
}

/// What serve's flags decide, worked out once before anything starts: a mistake in any flag
/// (a token, the address, a groups or statsd config file, a receiver's URL) stops serve with
/// its reason before it binds a port, opens a store or starts a thread.
struct Decided {
    token: Option<String>,
    listen: SocketAddr,
    loopback: bool,
    sampler: proctor_sampler::SamplerConfig,
    agent: AgentConfig,
    host: String,
    jupyter_pid: u32,
    disk_path: PathBuf,
    metrics: MetricsConfig,
    receivers: Vec<proctor_alerts::rules::Receiver>,
    etsy: Option<proctor_statsd::config::EtsyConfig>,
}

fn decide(o: &ServeOptions) -> anyhow::Result<Decided> {
    if o.interval.is_zero() {
        bail!("--interval must be more than 0");
    }
    if !(0.0..=1.0).contains(&o.pss_budget) {
        bail!("--pss-budget is a share of one CPU, between 0 and 1");
    }
    let token = match (&o.token, &o.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(super::common::secret(path, "--token-file")?),
        (None, None) => None,
    };
    if token.as_deref() == Some("") {
        bail!("the token is empty");
    }
    // A token goes into a header: a control character (a newline, say) could never be sent as
    // it was written, and looks like a file read wrong.
    if token.as_deref().is_some_and(|t| t.chars().any(char::is_control)) {
        bail!("the token contains a control character (a newline or tab inside it?): give a plain token");
    }
    let (listen, loopback) = resolve_listen(&o.listen)?;
    if !loopback && token.is_none() && !o.insecure {
        bail!(
            "--listen {listen} is reachable from other machines: give --token or --token-file \
             (Bearer auth on every endpoint), or --insecure to serve it without one"
        );
    }
    let mut sampler = o.read.config()?;
    let host = host_name(&sampler.root);
    sampler.pss_budget = o.pss_budget;
    let groups = crate::daemon::groups(o.groups.as_deref())?;
    // Groups count their members' open fds: one statx per process per sample.
    sampler.process_fds = groups.is_some();
    let agent = AgentConfig {
        interval: o.interval,
        history: o.history,
        groups,
        max_groups: o.max_groups,
        ..AgentConfig::default()
    };
    let disk_path = (o.disk_path.clone())
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"));
    let metrics = MetricsConfig {
        top: o.metrics_top,
        rank: match o.metrics_rank {
            Rank::Cpu => ProcessRank::Cpu,
            Rank::Rss => ProcessRank::Rss,
        },
    };
    let etsy = o.statsd.then(|| crate::statsd_server::etsy_config(&o.statsd_options)).transpose()?;
    Ok(Decided {
        token,
        listen,
        loopback,
        sampler,
        agent,
        host,
        jupyter_pid: o.jupyter_pid.unwrap_or_else(parent_pid),
        disk_path,
        metrics,
        receivers: o.alerts.receivers()?,
        etsy,
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let o = *args.options;
    let Decided { token, listen, loopback, sampler, agent, host, jupyter_pid, disk_path, metrics, receivers, etsy } =
        decide(&o)?;
    let tokenless = token.is_none();

    // Bound before anything starts: a port in use ends serve at once, and the address bound
    // (the port `:0` picked) names this instance (its alert state, below).
    let bound = std::net::TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    bound.set_nonblocking(true).context("cannot listen without blocking")?;
    let local = bound.local_addr().context("the address bound")?;

    // Blocked before any thread starts, so only the waiter below receives them.
    let signals = signals::block()?;
    limit_malloc_arenas();

    // statvfs can hang on a dead network mount: it is read on a thread of its own, never by
    // the sampler or a request.
    let disk = DiskWatch::start(&disk_path, DISK_EVERY, DISK_TIMEOUT).context("cannot start the disk watcher")?;
    let (recording, recording_dir) = open_recording(&o);
    // Checked before the agent starts: a remote-write mistake stops serve with the reason.
    let remote_plan = o.remote_write.plan(recording_dir.as_deref(), metrics, &host)?;
    // The agent first; each service below is added once started, and `daemon.stop()` stops
    // them newest first, then the agent.
    let mut daemon = Daemon::start(sampler, agent, recording)?;
    // Recorded samples roll up into the minute and hour tiers on a thread of their own.
    if let Some(dir) = &recording_dir {
        daemon.add(
            proctor_stored::rollup::Roller::spawn(dir.clone(), o.tiers.config(), crate::daemon::ROLL_EVERY)
                .context("cannot start the rollup thread")?,
        );
    }

    let statsd_shutdown = Shutdown::new();
    // Recording serve records statsd flushes too, into DATA/statsd through a recorder thread
    // of their own (the stream has its own writer lock); a stream that cannot be opened is
    // reported and serving goes on, as for samples.
    let flush_recorder = match (&recording_dir, o.statsd) {
        (Some(dir), true) => EventRecorder::start(dir, STATSD_STREAM, "proctor serve")
            .map_err(|e| log(&format!("statsd flushes are not recorded: {e:#}")))
            .ok(),
        _ => None,
    };
    let statsd = if let Some(etsy) = etsy {
        Some(crate::statsd_server::start(
            &o.statsd_options,
            etsy,
            statsd_shutdown.clone(),
            flush_recorder.as_ref(),
            crate::statsd_server::FlushReaders::Metrics,
        )?)
    } else {
        None
    };
    let statsd = statsd.map(|server| {
        let handle = server.handle();
        // The recorder it writes flushes into is stopped after it.
        if let Some(recorder) = flush_recorder {
            daemon.add(recorder);
        }
        daemon.add(Statsd { server, shutdown: statsd_shutdown, unix: o.statsd_options.unix.clone() });
        handle
    });
    let statsd_extra: Option<ExtraMetrics> = statsd.as_ref().map(|handle| {
        let handle = handle.clone();
        let max = o.statsd_metrics_max;
        Arc::new(move || statsd_families(&handle, max)) as ExtraMetrics
    });

    // Remote write: a queue (a thread) per receiver. Samples taken live also carry the agent's
    // own series and statsd's, which the store does not hold.
    let counters: Arc<proctor_http::HttpCounters> = Arc::default();
    let live: proctor_remote::queue::LiveFamilies = {
        let counters = Arc::clone(&counters);
        let statsd_extra = statsd_extra.clone();
        Arc::new(move |s: &proctor_agent::snapshot::Snapshot| {
            let mut out = proctor_http::prom::agent_families_of(s, &counters.out());
            if let Some(extra) = &statsd_extra {
                out.extend(extra());
            }
            out
        })
    };
    let remote_queues = if remote_plan.is_empty() {
        Vec::new()
    } else {
        for line in remote_plan.describe() {
            log(&line);
        }
        remote_plan.start(&daemon.shared(), live)?
    };
    let remote_status: Option<proctor_http::RemoteWriteStatus> = if remote_queues.is_empty() {
        None
    } else {
        let handles: Vec<_> = remote_queues.iter().map(proctor_remote::queue::Queue::status).collect();
        Some(Arc::new(move |s: &proctor_agent::snapshot::Snapshot| {
            handles.iter().map(|h| h.read(s.sample.unix_ns, s.agent.interval_ns)).collect()
        }))
    };
    for queue in remote_queues {
        daemon.add(queue);
    }
    // Probe results `proctor probe --record` stores beside the samples, counted per URL on a
    // thread of their own for /metrics.
    let probes: Option<ExtraMetrics> = match &recording_dir {
        Some(dir) => match crate::probe_metrics::ProbeWatch::start(dir.clone()) {
            Ok(watch) => {
                let read: ExtraMetrics = Arc::new(watch.reader());
                daemon.add(watch);
                Some(read)
            }
            Err(e) => {
                log(&format!("recorded probe results are not on /metrics: cannot start their reader: {e}"));
                None
            }
        },
        None => None,
    };
    let extra: Option<ExtraMetrics> = match (statsd_extra, remote_status.clone(), probes, daemon.shared()) {
        (None, None, None, _) => None,
        (statsd_extra, remote_status, probes, shared) => Some(Arc::new(move || {
            let mut out = statsd_extra.as_ref().map(|f| f()).unwrap_or_default();
            if let Some(status) = &remote_status {
                out.extend(proctor_remote::metrics::families(&status(&shared.latest())));
            }
            if let Some(probes) = &probes {
                out.extend(probes());
            }
            out
        })),
    };

    // Alerts: a thread of their own beside the agent, its log and state the instance's own:
    // DATA/alerts of the store it records (no other recorder may hold that directory), and
    // without one DATA/alerts/serve-ADDR-PORT of the address it serves (which no other live
    // serve can hold), so a second agent never takes over the first one's firing alerts and
    // leaves its own receivers untold.
    let alert_engine = match &o.alerts.rules {
        None => None,
        Some(path) => {
            let dir = match &recording_dir {
                Some(dir) => dir.join("alerts"),
                None => {
                    let data = match &o.data_dir {
                        Some(dir) => dir.clone(),
                        None => datadir::default_dir_created()
                            .map_err(|(_, e)| anyhow::anyhow!("alerts need a data directory: {e}"))?,
                    };
                    let name: String =
                        local.to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
                    data.join("alerts").join(format!("serve-{}", name.trim_matches('-')))
                }
            };
            let config = proctor_alerts::engine::EngineConfig {
                rules_path: path.clone(),
                dir,
                extra_receivers: receivers,
                host: host.clone(),
                generator_url: format!("http://{local}/#alerts"),
                delivery: proctor_alerts::deliver::DeliveryConfig::default(),
                statsd: statsd.clone().map(statsd_values),
            };
            let engine = proctor_alerts::engine::Engine::start(daemon.shared(), config)
                .map_err(|e| anyhow::anyhow!("--rules: {e}"))?;
            let handle = engine.handle();
            signals.on_hangup(move || handle.reload());
            log(&format!("alert rules from {} (SIGHUP reloads them)", path.display()));
            Some(engine)
        }
    };

    let config = ApiConfig {
        token: token.map(Arc::from),
        metrics,
        jupyter: JupyterConfig::new(jupyter_pid),
        disk: Some(Arc::new(disk)),
        extra_metrics: extra,
        counters,
        hosts: if loopback && tokenless { HostRule::Loopback { also: o.allow_host.clone() } } else { HostRule::Any },
        alerts: alert_engine.map(|engine| {
            let handle = engine.handle();
            daemon.add(engine);
            handle
        }),
        remote_write: remote_status,
    };
    let counters = Arc::clone(&config.counters);
    // After the sampler raised RLIMIT_NOFILE to its hard limit: the cap is a share of what is
    // there, leaving the rest to the sampler's kept-open files and the store.
    let limits = match o.max_connections {
        Some(max) => ConnLimits::for_this_process().with_max_connections(max),
        None => ConnLimits::for_this_process(),
    };
    let app = proctor_http::router(daemon.shared(), config);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("proctor-http")
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the HTTP runtime")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    signals.on_signal(move || {
        let _ = stop_tx.send(());
    });
    let served: anyhow::Result<()> = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(bound).context("cannot listen")?;
        log(&format!(
            "listening on http://{local}/ (dashboard /, API /api/v1/, Prometheus /metrics, \
             Jupyter /api/metrics/v1 for pid {jupyter_pid}); sampling every {}",
            format_duration(o.interval)
        ));
        proctor_http::serve(
            listener,
            app,
            async move {
                let _ = stop_rx.await;
            },
            limits,
            counters,
        )
        .await
        .context("the HTTP server failed")
    });
    log("stopping");
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    daemon.stop();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// The store `serve` records into, or why there is none, and its directory when it opened.
/// Never an error: serving goes on.
fn open_recording(o: &ServeOptions) -> (Recording, Option<PathBuf>) {
    // `--record` asks for the default, so only `--no-record` turns recording off.
    if o.no_record {
        return (Recording::Off, None);
    }
    let config = StoreConfig {
        retain_age: o.retain_age,
        retain_bytes: o.retain_mib.saturating_mul(1 << 20),
        ..StoreConfig::default()
    };
    let dir = match &o.data_dir {
        // Given explicitly, the directory must exist, as for `proctor record`: a typo should
        // not quietly start a new store somewhere else.
        Some(dir) => Ok(dir.clone()),
        None => datadir::default_dir_created(),
    };
    let opened = dir.and_then(|dir| Writer::open(&dir, config).map_err(|e| (Some(dir), e.to_string())));
    match opened {
        Ok((writer, report)) => {
            datadir::report_open("proctor serve", writer.dir(), &report);
            let dir = writer.dir().to_owned();
            (Recording::writer(writer), Some(dir))
        }
        Err((dir, error)) => {
            log(&format!("cannot record: {error}; serving without recording (see `recording` in /api/v1/agent)"));
            (Recording::Failed { dir, error }, None)
        }
    }
}

/// A line on stderr. An agent outlives whoever started it, so a closed stderr is ignored
/// rather than a reason to panic (as `eprintln!` would).
fn log(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "proctor serve: {message}");
}

/// `statsd.*` values for alert rules from the statsd server's last flush.
fn statsd_values(handle: ServerHandle) -> proctor_alerts::eval::StatsdSource {
    Arc::new(move |r: &proctor_alerts::eval::StatsdRef| {
        let flush = handle.last_flush()?;
        match r.kind {
            "timer" => {
                flush.timers.iter().find(|t| t.key == r.key)?.stats.iter().find(|(n, _)| *n == r.stat).map(|(_, v)| *v)
            }
            "counter" => {
                let c = flush.counters.iter().find(|c| c.key == r.key)?;
                Some(if r.stat == "rate" { c.rate_per_second } else { c.count })
            }
            "gauge" => flush.gauges.iter().find(|g| g.key == r.key).map(|g| g.value),
            "set" => flush.sets.iter().find(|x| x.key == r.key).map(|x| x.count),
            _ => None,
        }
    })
}

/// The statsd server's self metrics, and the last flush's values per key, capped at `max`
/// keys per type (`proctor_statsd::prom` decides the names, help texts and units).
fn statsd_families(handle: &ServerHandle, max: usize) -> Vec<Family> {
    let flush = handle.last_flush();
    proctor_statsd::prom::families(&handle.self_metrics(), flush.as_deref(), &handle.counter_totals(), max)
}
