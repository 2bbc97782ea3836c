//! From an Etsy statsd config file plus command-line overrides to what a server starts with:
//! the addresses to listen on, the [`ServerConfig`], and the backends Etsy's config asks for.
//!
//! The rules are Etsy 0.9's (defaults, `deleteIdleStats` and its per-type keys, `gaugesMaxTTL`,
//! the `backends` list, Graphite naming), with overrides winning over the file. The only I/O
//! is resolving host names (`ToSocketAddrs`); this module binds nothing, reads no files and
//! starts nothing: the caller binds the sockets, builds the backends and starts the server.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::aggregate::{AggregatorConfig, IdlePolicy};
use crate::config::EtsyConfig;
use crate::flush::FlushConfig;
use crate::graphite::{GraphiteConfig, GraphiteNaming};
use crate::parse::ParseOptions;
use crate::server::ServerConfig;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("bad {what} address {text:?}")]
    Address {
        what: &'static str,
        text: String,
        #[source]
        source: io::Error,
    },
    #[error("{what} address {text:?} resolves to nothing")]
    NoAddress { what: &'static str, text: String },
    #[error("the flush interval must be at least 1ms")]
    FlushInterval,
}

/// Where one listener goes, as the command line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    Off,
    At(SocketAddr),
}

/// What the command line says, winning over the config file. `None` means "as the file says,
/// else Etsy's default"; the limits Etsy has no key for fall back to [`ServerConfig`]'s.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// UDP (Etsy: `address`/`port`, or a `servers` entry; default 127.0.0.1:8125).
    pub udp: Option<Listen>,
    /// TCP for newline-delimited metrics (Etsy: a `servers` entry for `./servers/tcp`; off by
    /// default).
    pub tcp: Option<Listen>,
    /// The admin interface (Etsy: `mgmt_address`/`mgmt_port`; default 127.0.0.1:8126).
    pub admin: Option<Listen>,
    /// Etsy: `flushInterval` (default 10 s).
    pub flush_interval: Option<Duration>,
    /// Graphite's `host:port` (Etsy: `graphiteHost`/`graphitePort`, used when `backends` is
    /// absent or names graphite).
    pub graphite: Option<String>,
    /// Print every flush (also on when Etsy's `backends` names the console backend).
    pub console: bool,
    /// Remove a key of a type no `delete*` key covers after this long without updates; zero
    /// keeps such keys forever, as Etsy does.
    pub expire_idle: Duration,
    pub max_keys: Option<usize>,
    pub max_timer_samples: Option<usize>,
    /// Longest key kept, in bytes (longer ones are `key_too_long` bad lines).
    pub max_key_bytes: Option<usize>,
    /// Bytes of keys and set members held at most (see `AggregatorConfig::max_bytes`).
    pub max_bytes: Option<usize>,
    pub shards: Option<usize>,
}

/// What a server is started with. The caller binds the addresses (and fills in
/// `server.rcvbuf` from the UDP sockets it bound) and builds the backends.
#[derive(Debug, Clone)]
pub struct Setup {
    pub udp: Option<SocketAddr>,
    pub tcp: Option<SocketAddr>,
    pub admin: Option<SocketAddr>,
    /// A Graphite backend to start, with Etsy's naming from the file.
    pub graphite: Option<GraphiteConfig>,
    /// Start the console backend.
    pub console: bool,
    pub server: ServerConfig,
}

impl Setup {
    /// Maps an Etsy config (use `EtsyConfig::default()` when there is no file) and the
    /// overrides to a setup.
    pub fn from_etsy(etsy: &EtsyConfig, overrides: &Overrides) -> Result<Setup, SetupError> {
        let udp = match overrides.udp {
            Some(listen) => listening(listen),
            None => Some(resolve(
                &format!("{}:{}", etsy.address.as_deref().unwrap_or("127.0.0.1"), etsy.port.unwrap_or(8125)),
                "udp",
            )?),
        };
        let tcp = match (overrides.tcp, &etsy.tcp) {
            (Some(listen), _) => listening(listen),
            (None, Some((host, port))) => {
                Some(resolve(&format!("{}:{port}", host.as_deref().unwrap_or("127.0.0.1")), "servers tcp")?)
            }
            (None, None) => None,
        };
        let admin = match overrides.admin {
            Some(listen) => listening(listen),
            None => Some(resolve(
                &format!("{}:{}", etsy.mgmt_address.as_deref().unwrap_or("127.0.0.1"), etsy.mgmt_port.unwrap_or(8126)),
                "mgmt",
            )?),
        };
        let flush_interval =
            overrides.flush_interval.unwrap_or_else(|| Duration::from_millis(etsy.flush_interval_ms.unwrap_or(10_000)));
        if flush_interval < Duration::from_millis(1) {
            return Err(SetupError::FlushInterval);
        }
        // Etsy loads graphite unless `backends` leaves it out, and sends only if graphiteHost is set.
        let etsy_graphite = etsy
            .graphite_host
            .as_ref()
            .filter(|_| etsy.backends.as_ref().is_none_or(|list| list.iter().any(|b| b.ends_with("graphite"))));
        let graphite_address = overrides
            .graphite
            .clone()
            .or_else(|| etsy_graphite.map(|host| format!("{host}:{}", etsy.graphite_port.unwrap_or(2003))));
        let console =
            overrides.console || etsy.backends.as_ref().is_some_and(|list| list.iter().any(|b| b.ends_with("console")));

        let interval_ms = flush_interval.as_millis().max(1) as u64;
        let idle = idle_policy(etsy, idle_flushes(overrides.expire_idle, interval_ms));
        let flush = FlushConfig {
            interval_ms,
            percent_thresholds: etsy.percent_threshold.clone().unwrap_or_else(|| vec![90.0]),
            histograms: etsy.histogram.clone().unwrap_or_default(),
        };
        let defaults = AggregatorConfig::default();
        let limits = AggregatorConfig {
            max_keys: overrides.max_keys.unwrap_or(defaults.max_keys),
            max_samples_per_timer: overrides.max_timer_samples.unwrap_or(defaults.max_samples_per_timer),
            max_bytes: overrides.max_bytes.unwrap_or(defaults.max_bytes),
            idle,
            ..defaults
        };
        let off = || "off".to_owned();
        let describe = vec![
            ("udp".to_owned(), udp.map_or_else(off, |a| a.to_string())),
            ("tcp".to_owned(), tcp.map_or_else(off, |a| a.to_string())),
            ("admin".to_owned(), admin.map_or_else(off, |a| a.to_string())),
            ("flushInterval".to_owned(), interval_ms.to_string()),
            ("percentThreshold".to_owned(), format!("{:?}", flush.percent_thresholds)),
            ("graphite".to_owned(), graphite_address.clone().unwrap_or_else(off)),
            ("maxKeys".to_owned(), limits.max_keys.to_string()),
            ("maxTimerSamples".to_owned(), limits.max_samples_per_timer.to_string()),
            ("maxBytes".to_owned(), limits.max_bytes.to_string()),
            ("idleFlushes".to_owned(), format!("{idle:?}")),
        ];
        let server = ServerConfig {
            flush,
            limits,
            shards: overrides.shards.unwrap_or(1).max(1),
            parse: ParseOptions {
                sanitize_keys: etsy.key_name_sanitize.unwrap_or(true),
                max_key_bytes: overrides.max_key_bytes.unwrap_or(crate::parse::MAX_KEY_BYTES),
            },
            prefix_stats: etsy.prefix_stats.clone().unwrap_or_else(|| "statsd".to_owned()),
            health_up: etsy.health_status.as_deref() != Some("down"),
            describe,
            ..ServerConfig::default()
        };
        let graphite = graphite_address.map(|address| {
            let mut config = GraphiteConfig::new(address);
            config.naming = naming(etsy);
            config
        });
        Ok(Setup { udp, tcp, admin, graphite, console, server })
    }
}

fn listening(listen: Listen) -> Option<SocketAddr> {
    match listen {
        Listen::Off => None,
        Listen::At(address) => Some(address),
    }
}

/// Resolves `host:port` to its first address; `what` names the setting in errors (`--udp`,
/// `mgmt`).
pub fn resolve(text: &str, what: &'static str) -> Result<SocketAddr, SetupError> {
    text.to_socket_addrs()
        .map_err(|source| SetupError::Address { what, text: text.to_owned(), source })?
        .next()
        .ok_or_else(|| SetupError::NoAddress { what, text: text.to_owned() })
}

/// Etsy's idle rules: `deleteIdleStats` deletes every type after one idle flush, a per-type
/// `deleteCounters` (etc.) overrides it for its type, and deleted gauges live `gaugesMaxTTL`
/// flushes. Types Etsy keeps forever follow `--expire-idle` (`idle_flushes`, 0 = never).
fn idle_policy(etsy: &EtsyConfig, idle_flushes: u32) -> IdlePolicy {
    let delete_all = etsy.delete_idle_stats.unwrap_or(false);
    let deleting = |specific: Option<bool>| specific.unwrap_or(delete_all);
    let gauge_ttl = etsy.gauges_max_ttl.filter(|ttl| *ttl > 1).unwrap_or(1);
    IdlePolicy {
        counters: if deleting(etsy.delete_counters) { 1 } else { idle_flushes },
        timers: if deleting(etsy.delete_timers) { 1 } else { idle_flushes },
        sets: if deleting(etsy.delete_sets) { 1 } else { idle_flushes },
        gauges: if deleting(etsy.delete_gauges) { gauge_ttl } else { idle_flushes },
    }
}

/// An idle time as a number of flushes, rounded up; zero stays zero (never).
fn idle_flushes(idle: Duration, interval_ms: u64) -> u32 {
    let flushes = (idle.as_millis() as u64).div_ceil(interval_ms.max(1));
    flushes.min(u64::from(u32::MAX)) as u32
}

/// Etsy's `graphite` section and `prefixStats`/`flush_counts`, over proctor's defaults.
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{idle_flushes, resolve, Listen, Overrides, Setup, SetupError};
    use crate::aggregate::IdlePolicy;
    use crate::config::{parse_etsy_config, EtsyConfig};

    fn setup(file: &str, overrides: &Overrides) -> Setup {
        let etsy = parse_etsy_config(file).expect("config parses");
        Setup::from_etsy(&etsy, overrides).expect("setup")
    }

    fn describe(setup: &Setup, key: &str) -> String {
        setup.server.describe.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).expect("described")
    }

    #[test]
    fn idle_expiry_rounds_up_to_whole_flushes() {
        assert_eq!(idle_flushes(Duration::ZERO, 10_000), 0);
        assert_eq!(idle_flushes(Duration::from_secs(3600), 10_000), 360);
        assert_eq!(idle_flushes(Duration::from_secs(15), 10_000), 2);
    }

    #[test]
    fn no_file_and_no_flags_is_etsys_default() {
        let setup = Setup::from_etsy(&EtsyConfig::default(), &Overrides::default()).expect("setup");
        assert_eq!(setup.udp.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:8125"));
        assert_eq!(setup.admin.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:8126"));
        assert_eq!(setup.tcp, None);
        assert!(setup.graphite.is_none() && !setup.console);
        let server = &setup.server;
        assert_eq!((server.flush.interval_ms, server.flush.percent_thresholds.clone()), (10_000, vec![90.0]));
        assert_eq!(server.limits.idle, IdlePolicy::default());
        assert_eq!((server.limits.max_keys, server.limits.max_samples_per_timer, server.shards), (100_000, 10_000, 1));
        assert!(server.parse.sanitize_keys && server.health_up);
        assert_eq!(server.prefix_stats, "statsd");
        assert_eq!(describe(&setup, "graphite"), "off");
        assert_eq!(describe(&setup, "tcp"), "off");
    }

    #[test]
    fn the_file_sets_addresses_flushes_and_names() {
        let file = r#"{
            address: "127.0.0.2", port: 9125, mgmt_port: 9126,
            servers: [{ server: "./servers/tcp", port: 9127 }],
            flushInterval: 2000, percentThreshold: [95, 99],
            histogram: [{ metric: "lat", bins: [10, "inf"] }],
            prefixStats: "own", keyNameSanitize: false, healthStatus: "down",
            graphiteHost: "127.0.0.3", graphitePort: 2103,
            graphite: { legacyNamespace: false, globalPrefix: "app", globalSuffix: "x" },
        }"#;
        let setup = setup(file, &Overrides::default());
        assert_eq!(setup.udp.map(|a| a.to_string()).as_deref(), Some("127.0.0.2:9125"));
        assert_eq!(setup.tcp.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:9127"));
        assert_eq!(setup.admin.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:9126"));
        let server = &setup.server;
        assert_eq!(server.flush.interval_ms, 2000);
        assert_eq!(server.flush.percent_thresholds, vec![95.0, 99.0]);
        assert_eq!(server.flush.histograms[0].metric, "lat");
        assert_eq!(server.prefix_stats, "own");
        assert!(!server.parse.sanitize_keys && !server.health_up);
        let graphite = setup.graphite.clone().expect("graphite from graphiteHost");
        assert_eq!(graphite.address, "127.0.0.3:2103");
        assert!(!graphite.naming.legacy_namespace);
        assert_eq!(graphite.naming.global_prefix, "app");
        assert_eq!(graphite.naming.global_suffix.as_deref(), Some("x"));
        assert_eq!(graphite.naming.prefix_stats, "own");
        assert_eq!(describe(&setup, "graphite"), "127.0.0.3:2103");
        assert_eq!(describe(&setup, "percentThreshold"), "[95.0, 99.0]");
    }

    #[test]
    fn the_backends_list_decides_graphite_and_console() {
        let without =
            setup(r#"{ graphiteHost: "127.0.0.1", backends: ["./backends/console"] }"#, &Overrides::default());
        assert!(without.graphite.is_none() && without.console);
        let with = setup(r#"{ graphiteHost: "127.0.0.1", backends: ["./backends/graphite"] }"#, &Overrides::default());
        assert_eq!(with.graphite.map(|g| g.address).as_deref(), Some("127.0.0.1:2003"));
        assert!(!with.console);
    }

    #[test]
    fn delete_keys_and_expire_idle_make_the_idle_policy() {
        let overrides = Overrides { expire_idle: Duration::from_secs(25), ..Overrides::default() };
        let all = setup("{ deleteIdleStats: true, gaugesMaxTTL: 5 }", &overrides);
        assert_eq!(all.server.limits.idle, IdlePolicy { counters: 1, timers: 1, sets: 1, gauges: 5 });
        // A per-type key wins over deleteIdleStats; the rest follow --expire-idle (3 flushes of 10 s).
        let some = setup("{ deleteIdleStats: true, deleteTimers: false, deleteGauges: false }", &overrides);
        assert_eq!(some.server.limits.idle, IdlePolicy { counters: 1, timers: 3, sets: 1, gauges: 3 });
        let gauges = setup("{ deleteGauges: true, gaugesMaxTTL: 1 }", &Overrides::default());
        assert_eq!(gauges.server.limits.idle, IdlePolicy { gauges: 1, ..IdlePolicy::default() });
        assert_eq!(describe(&gauges, "idleFlushes"), "IdlePolicy { counters: 0, timers: 0, sets: 0, gauges: 1 }");
    }

    #[test]
    fn overrides_win_over_the_file() {
        let file = r#"{ port: 9125, flushInterval: 2000, graphiteHost: "127.0.0.3" }"#;
        let tcp = "127.0.0.1:7000".parse().expect("addr");
        let overrides = Overrides {
            udp: Some(Listen::Off),
            tcp: Some(Listen::At(tcp)),
            admin: Some(Listen::Off),
            flush_interval: Some(Duration::from_millis(500)),
            graphite: Some("127.0.0.4:2003".to_owned()),
            console: true,
            max_keys: Some(7),
            max_timer_samples: Some(8),
            shards: Some(0),
            ..Overrides::default()
        };
        let setup = setup(file, &overrides);
        assert_eq!((setup.udp, setup.tcp, setup.admin), (None, Some(tcp), None));
        assert_eq!(setup.server.flush.interval_ms, 500);
        assert_eq!(setup.graphite.as_ref().map(|g| g.address.as_str()), Some("127.0.0.4:2003"));
        assert!(setup.console);
        assert_eq!((setup.server.limits.max_keys, setup.server.limits.max_samples_per_timer), (7, 8));
        assert_eq!(setup.server.shards, 1, "at least one shard");
        assert_eq!(describe(&setup, "udp"), "off");
        assert_eq!(describe(&setup, "maxKeys"), "7");
    }

    #[test]
    fn unusable_settings_are_typed_errors() {
        let zero = Overrides { flush_interval: Some(Duration::ZERO), ..Overrides::default() };
        let err = Setup::from_etsy(&EtsyConfig::default(), &zero).expect_err("zero interval");
        assert!(matches!(err, SetupError::FlushInterval));
        assert_eq!(err.to_string(), "the flush interval must be at least 1ms");
        // A bad port fails before any name lookup, so the test asks no resolver.
        let err = resolve("127.0.0.1:port", "--udp").expect_err("bad port");
        assert_eq!(err.to_string(), "bad --udp address \"127.0.0.1:port\"");
        assert!(std::error::Error::source(&err).is_some(), "the cause is kept");
    }
}
