//! The running agent and the services beside it, for the commands that run one (`serve`,
//! `record`, and `top` on the live screen, which hands the agent to the TUI): the
//! agent is started first and stopped last; each service (the roller, statsd and its flush
//! recorder, the remote-write queues, the alert engine) is added once it is started and stopped
//! in the reverse order, so nothing outlives what it reads. Also what those commands decide
//! from their flags alike: groups (`--groups`), the rollup tiers' retention.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_agent::{Agent, AgentConfig, Recording, RecordingStatus, Shared};
use proctor_groups::{By, Rules};
use proctor_sampler::SamplerConfig;
use proctor_stored::rollup::RollupConfig;
use proctor_vocab::duration_arg;

/// A thread (or threads) beside the agent that can be stopped and waited for.
pub trait Service {
    fn stop(self: Box<Self>);
}

impl Service for proctor_stored::rollup::Roller {
    fn stop(self: Box<Self>) {
        (*self).stop();
    }
}

impl Service for proctor_remote::queue::Queue {
    fn stop(self: Box<Self>) {
        (*self).stop();
    }
}

impl Service for proctor_alerts::engine::Engine {
    /// Bounded by the delivery's shutdown grace; what it dropped is said on stderr.
    fn stop(self: Box<Self>) {
        use std::io::Write;
        for line in (*self).stop() {
            let _ = writeln!(std::io::stderr(), "proctor: {line}");
        }
    }
}

impl Service for crate::streams::EventRecorder {
    fn stop(self: Box<Self>) {
        (*self).stop();
    }
}

/// The embedded statsd server: its shutdown is triggered, its threads joined and its unix
/// socket, if it made one, removed.
pub struct Statsd {
    pub server: proctor_statsd::Server,
    pub shutdown: proctor_statsd::Shutdown,
    pub unix: Option<PathBuf>,
}

impl Service for Statsd {
    fn stop(self: Box<Self>) {
        self.shutdown.trigger();
        self.server.join();
        if let Some(path) = &self.unix {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The agent and the services started beside it.
pub struct Daemon {
    agent: Agent,
    /// In the order they started.
    services: Vec<Box<dyn Service>>,
}

impl Daemon {
    /// Starts the agent (its sampling thread and, when `recording` is on, its recorder).
    pub fn start(sampler: SamplerConfig, config: AgentConfig, recording: Recording) -> anyhow::Result<Daemon> {
        let agent = Agent::start_recording(sampler, config, recording).context("cannot start the sampling thread")?;
        Ok(Daemon { agent, services: Vec::new() })
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.agent.shared()
    }

    /// A service that has started; it is stopped before every service added before it.
    pub fn add(&mut self, service: impl Service + 'static) {
        self.services.push(Box::new(service));
    }

    /// Stops the services, newest first, then the agent (sampling stops, the recorder's queue
    /// drains into the store); what the recording came to.
    pub fn stop(self) -> RecordingStatus {
        for service in self.services.into_iter().rev() {
            service.stop();
        }
        self.agent.stop()
    }
}

/// How often a recording agent rolls finished hours into the tiers.
pub const ROLL_EVERY: Duration = Duration::from_secs(300);

/// glibc gives each thread that allocates its own arena (up to 8 per core), and each keeps
/// freed memory for reuse. The agent's threads allocate little and rarely at once, so two
/// arenas are plenty and keep RSS down by a few MiB.
///
/// Blocks of [`MMAP_THRESHOLD`] and more get pages of their own (`mmap`), returned to the
/// kernel when freed. glibc's default starts there too but raises the threshold to the size of
/// each such block freed, after which the recorder's per-sample buffers (a ~0.5 MB record, ~0.9
/// MB of zstd context, with ~600 processes) come from the arenas and stay resident between
/// samples, with the history ring's allocations interleaved among them. Fixing the threshold
/// costs an `mmap`, an `munmap` and the page faults of those buffers per sample, and took RSS
/// with a full ring from 14.9 to 11.1 MiB recording and 10.9 to 10.1 MiB without (side by
/// side, 50 ms interval, 180 s of history).
pub(crate) fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tuning; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// glibc's initial threshold (128 KiB); setting it turns off its dynamic raising.
#[cfg(target_env = "gnu")]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// `--groups`: `cgroup`, `user`, or a rules file (refused with its first mistakes).
pub fn groups(spec: Option<&str>) -> anyhow::Result<Option<Arc<By>>> {
    spec.map(|s| by_spec(s).map(Arc::new)).transpose()
}

/// A groups rules file: read as alert rules files are (a regular file of at most 1 MiB: real
/// ones are a few KiB, and every rule costs regex matching on every sample).
pub fn load_rules(path: &Path) -> anyhow::Result<Result<Rules, Vec<proctor_groups::Diagnostic>>> {
    let text = proctor_alerts::engine::read_rules_text(path).map_err(anyhow::Error::msg)?;
    Ok(Rules::parse(&text))
}

/// `cgroup`, `user`, or a rules file (refused with its first mistakes).
pub fn by_spec(spec: &str) -> anyhow::Result<By> {
    match spec {
        "cgroup" => Ok(By::Cgroup),
        "user" => Ok(By::User),
        path => rules_from(Path::new(path)),
    }
}

pub fn rules_from(path: &Path) -> anyhow::Result<By> {
    match load_rules(path)? {
        Ok(rules) => Ok(By::Rules(rules)),
        Err(errors) => {
            let first: Vec<String> = errors.iter().take(5).map(ToString::to_string).collect();
            bail!(
                "{} has {} mistakes (proctor groups --check {0} lists them):\n  {}",
                path.display(),
                errors.len(),
                first.join("\n  ")
            );
        }
    }
}

/// How long the tiers keep rows and how much disk they may use (`serve`, `record`, `rollup`).
#[derive(Debug, Clone, clap::Args)]
pub struct TierArgs {
    /// Keep minute rows this long.
    #[arg(long, default_value = "90d", value_parser = duration_arg)]
    pub minute_age: Duration,
    /// Keep hour rows this long.
    #[arg(long, default_value = "730d", value_parser = duration_arg)]
    pub hour_age: Duration,
    /// Both tiers together may use this many MiB (the minute tier 7/8 of it); the oldest
    /// segments go first.
    #[arg(long, default_value_t = 512)]
    pub rollup_mib: u64,
}

impl TierArgs {
    pub fn config(&self) -> RollupConfig {
        RollupConfig {
            minute_age: self.minute_age,
            hour_age: self.hour_age,
            max_bytes: self.rollup_mib.saturating_mul(1 << 20),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Named(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Service for Named {
        fn stop(self: Box<Self>) {
            self.1.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
        }
    }

    #[test]
    fn services_stop_newest_first() {
        let stopped = Arc::new(Mutex::new(Vec::new()));
        let config = AgentConfig::brief(Duration::from_secs(3600));
        let mut daemon = Daemon::start(SamplerConfig::default(), config, Recording::Off).expect("agent");
        daemon.add(Named("roller", Arc::clone(&stopped)));
        daemon.add(Named("statsd", Arc::clone(&stopped)));
        daemon.add(Named("alerts", Arc::clone(&stopped)));
        daemon.stop();
        assert_eq!(*stopped.lock().unwrap_or_else(|e| e.into_inner()), ["alerts", "statsd", "roller"]);
    }
}
