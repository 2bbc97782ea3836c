//! The aggregator: one shard's counters, gauges, timers and sets between two flushes.
//!
//! It is a plain data structure driven by its caller: `apply` a parsed metric, `flush` to take
//! the window's values and reset them by Etsy's rules (counters and timers to zero, sets
//! emptied, gauges kept, or each deleted when idle). It does no I/O, starts no threads and never
//! reads the clock; "idle" is counted in flushes, not seconds.
//!
//! Memory is bounded: a cap on distinct keys, on timer samples kept per key and per shard per
//! flush, and on set members. Overflow is counted, never silently merged. A timer that
//! overflowed keeps a uniform reservoir sample (Vitter's algorithm R) plus exact count, sum,
//! sum of squares, minimum and maximum, and is flagged approximate.

use std::collections::{HashMap, HashSet};

use crate::parse::{Metric, MetricValue};

/// After how many flushes without an update a key of each type is removed; 0 keeps it forever.
/// Etsy's `deleteCounters` etc. are 1, `deleteGauges` is `gaugesMaxTTL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdlePolicy {
    pub counters: u32,
    pub timers: u32,
    pub sets: u32,
    pub gauges: u32,
}

/// Limits of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggregatorConfig {
    /// Distinct keys over all four types.
    pub max_keys: usize,
    /// Timer samples kept per key per flush before the reservoir takes over.
    pub max_samples_per_timer: usize,
    /// Timer samples kept over all keys per flush.
    pub max_samples_total: usize,
    /// Members kept per set per flush.
    pub max_set_members: usize,
    /// Bytes of keys and set members held (each counted with a fixed per-entry overhead):
    /// the key cap bounds how many keys, this how much they and the sets' members weigh.
    pub max_bytes: usize,
    pub idle: IdlePolicy,
}

/// What one key or set member costs beyond its bytes: the map entry, the boxed string's
/// header, the value (an estimate; it only has to be the right size to bound memory).
pub const ENTRY_OVERHEAD: usize = 64;

impl Default for AggregatorConfig {
    fn default() -> Self {
        AggregatorConfig {
            max_keys: 100_000,
            max_samples_per_timer: 10_000,
            max_samples_total: 2_000_000,
            max_set_members: 100_000,
            max_bytes: 256 << 20,
            idle: IdlePolicy::default(),
        }
    }
}

/// Things the aggregator refused to keep, cumulative since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggregatorDrops {
    /// Metrics for a new key that arrived while `max_keys` keys existed.
    pub key_limit_metrics: u64,
    /// Metrics for a new key, and set members, refused because `max_bytes` were held.
    pub byte_limit_metrics: u64,
    /// Timer samples that went only into the reservoir's exact sums, not the kept samples.
    pub timer_samples_not_kept: u64,
    /// Set members beyond `max_set_members` (the set's count then is a lower bound).
    pub set_members: u64,
}

#[derive(Debug)]
struct Entry<T> {
    value: T,
    /// Flushes since the last update.
    idle_flushes: u32,
}

#[derive(Debug, Default)]
struct TimerState {
    samples: Vec<f64>,
    /// Etsy's `timer_counters`: sum of `1 / sample_rate`.
    count: f64,
    /// Samples seen this flush, for the reservoir.
    seen: u64,
    /// Exact sums over everything seen, used once samples were not all kept.
    sum: f64,
    sum_squares: f64,
    min: f64,
    max: f64,
    rng: u64,
}

/// A set's members this window, and whether any were refused at the cap.
type SetState = (HashSet<Box<str>>, bool);

/// A timer's window as handed to the flush: the kept samples (unsorted) and, when not all could
/// be kept, the exact aggregates over everything seen.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerWindow {
    pub samples: Vec<f64>,
    pub count: f64,
    pub overflow: Option<TimerExact>,
}

/// Exact aggregates of an overflowed timer window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerExact {
    pub seen: u64,
    pub sum: f64,
    pub sum_squares: f64,
    pub min: f64,
    pub max: f64,
}

/// One shard's flushed window. Keys of different shards never overlap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShardWindow {
    pub counters: Vec<(Box<str>, f64)>,
    pub gauges: Vec<(Box<str>, f64)>,
    pub timers: Vec<(Box<str>, TimerWindow)>,
    /// Key, member count, and whether members were dropped (count is then a lower bound).
    pub sets: Vec<(Box<str>, usize, bool)>,
}

/// Which of the four maps an admin command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counters,
    Timers,
    Gauges,
    Sets,
}

/// One shard of aggregated state.
#[derive(Debug)]
pub struct Aggregator {
    config: AggregatorConfig,
    counters: HashMap<Box<str>, Entry<f64>>,
    gauges: HashMap<Box<str>, Entry<f64>>,
    timers: HashMap<Box<str>, Entry<TimerState>>,
    sets: HashMap<Box<str>, Entry<SetState>>,
    samples_kept: usize,
    /// Bytes of keys and set members held, per [`ENTRY_OVERHEAD`].
    bytes: usize,
    drops: AggregatorDrops,
}

impl Aggregator {
    pub fn new(config: AggregatorConfig) -> Self {
        Aggregator {
            config,
            counters: HashMap::new(),
            gauges: HashMap::new(),
            timers: HashMap::new(),
            sets: HashMap::new(),
            samples_kept: 0,
            bytes: 0,
            drops: AggregatorDrops::default(),
        }
    }

    /// Bytes of keys and set members held now (each with [`ENTRY_OVERHEAD`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn key_count(&self) -> usize {
        self.counters.len() + self.gauges.len() + self.timers.len() + self.sets.len()
    }

    pub fn drops(&self) -> AggregatorDrops {
        self.drops
    }

    /// Adds one metric to the window.
    pub fn apply(&mut self, metric: &Metric<'_>) {
        let key = metric.key;
        let key_cost = key.len() + ENTRY_OVERHEAD;
        let over_bytes = self.bytes + key_cost > self.config.max_bytes;
        let full = self.key_count() >= self.config.max_keys || over_bytes;
        let keys_before = self.key_count();
        let kept = match metric.value {
            MetricValue::Counter { value, sample_rate } => upsert(
                &mut self.counters,
                key,
                full,
                || 0.0,
                |count| *count = saturate(*count + value * (1.0 / sample_rate)),
            ),
            // Etsy adjusts only a gauge that exists and is non-zero; otherwise `+5` sets 5.
            MetricValue::Gauge { value, delta } => upsert(
                &mut self.gauges,
                key,
                full,
                || 0.0,
                |gauge| *gauge = if delta && *gauge != 0.0 { saturate(*gauge + value) } else { value },
            ),
            MetricValue::Timer { value, sample_rate } => {
                let (per_key_cap, budget_left) =
                    (self.config.max_samples_per_timer, self.samples_kept < self.config.max_samples_total);
                let (samples_kept, drops) = (&mut self.samples_kept, &mut self.drops);
                upsert(
                    &mut self.timers,
                    key,
                    full,
                    || TimerState { rng: seed(key), ..TimerState::default() },
                    |timer| match add_sample(timer, value, sample_rate, per_key_cap, budget_left) {
                        SampleFate::Appended => *samples_kept += 1,
                        SampleFate::Reservoir => drops.timer_samples_not_kept += 1,
                    },
                )
            }
            MetricValue::Set { member } => {
                let (max_members, drops) = (self.config.max_set_members, &mut self.drops);
                let member_cost = member.len() + ENTRY_OVERHEAD;
                let room = self.config.max_bytes.saturating_sub(self.bytes + key_cost);
                let bytes = &mut self.bytes;
                upsert(
                    &mut self.sets,
                    key,
                    full,
                    || (HashSet::new(), false),
                    |(members, overflowed)| {
                        if members.contains(member) {
                            return;
                        }
                        if members.len() >= max_members {
                            *overflowed = true;
                            drops.set_members += 1;
                        } else if member_cost > room {
                            *overflowed = true;
                            drops.set_members += 1;
                            drops.byte_limit_metrics += 1;
                        } else {
                            members.insert(member.into());
                            *bytes += member_cost;
                        }
                    },
                )
            }
        };
        if !kept {
            if over_bytes {
                self.drops.byte_limit_metrics += 1;
            } else {
                self.drops.key_limit_metrics += 1;
            }
        } else if self.key_count() > keys_before {
            self.bytes += key_cost;
        }
    }

    /// Takes this window's values and resets the state for the next one.
    pub fn flush(&mut self) -> ShardWindow {
        let mut window = ShardWindow::default();
        let idle = self.config.idle;
        window.counters.reserve(self.counters.len());
        for (key, entry) in &mut self.counters {
            window.counters.push((key.clone(), entry.value));
            entry.value = 0.0;
        }
        window.gauges.extend(self.gauges.iter().map(|(key, entry)| (key.clone(), entry.value)));
        window.timers.reserve(self.timers.len());
        for (key, entry) in &mut self.timers {
            let state = std::mem::take(&mut entry.value);
            let overflow = (state.seen > state.samples.len() as u64).then_some(TimerExact {
                seen: state.seen,
                sum: state.sum,
                sum_squares: state.sum_squares,
                min: state.min,
                max: state.max,
            });
            entry.value.rng = state.rng;
            window.timers.push((key.clone(), TimerWindow { samples: state.samples, count: state.count, overflow }));
        }
        for (key, entry) in &mut self.sets {
            let (members, overflowed) = &mut entry.value;
            window.sets.push((key.clone(), members.len(), *overflowed));
            let freed: usize = members.iter().map(|m| m.len() + ENTRY_OVERHEAD).sum();
            self.bytes = self.bytes.saturating_sub(freed);
            members.clear();
            *overflowed = false;
        }
        self.samples_kept = 0;
        let mut freed = age(&mut self.counters, idle.counters);
        freed += age(&mut self.gauges, idle.gauges);
        freed += age(&mut self.timers, idle.timers);
        freed += age(&mut self.sets, idle.sets);
        self.bytes = self.bytes.saturating_sub(freed);
        window
    }

    /// Current values for the admin interface, formatted by the caller.
    pub fn dump(&self, kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
        match kind {
            MetricType::Counters => {
                self.counters.iter().map(|(k, e)| (k.clone(), DumpValue::Number(e.value))).collect()
            }
            MetricType::Gauges => self.gauges.iter().map(|(k, e)| (k.clone(), DumpValue::Number(e.value))).collect(),
            MetricType::Timers => {
                self.timers.iter().map(|(k, e)| (k.clone(), DumpValue::Samples(e.value.samples.clone()))).collect()
            }
            MetricType::Sets => {
                self.sets.iter().map(|(k, e)| (k.clone(), DumpValue::Number(e.value.0.len() as f64))).collect()
            }
        }
    }

    /// Etsy's `delcounters` etc.: each pattern is a full key, or a prefix ending in `.*`.
    /// Returns, per pattern, the keys deleted.
    pub fn delete(&mut self, kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
        let members_before: usize =
            self.sets.values().flat_map(|e| e.value.0.iter()).map(|m| m.len() + ENTRY_OVERHEAD).sum();
        let deleted: Vec<Vec<Box<str>>> = patterns
            .iter()
            .map(|pattern| match kind {
                MetricType::Counters => delete_matching(&mut self.counters, pattern),
                MetricType::Gauges => delete_matching(&mut self.gauges, pattern),
                MetricType::Timers => delete_matching(&mut self.timers, pattern),
                MetricType::Sets => delete_matching(&mut self.sets, pattern),
            })
            .collect();
        let members_after: usize =
            self.sets.values().flat_map(|e| e.value.0.iter()).map(|m| m.len() + ENTRY_OVERHEAD).sum();
        let keys: usize = deleted.iter().flatten().map(|k| k.len() + ENTRY_OVERHEAD).sum();
        self.bytes = self.bytes.saturating_sub(keys + members_before.saturating_sub(members_after));
        deleted
    }
}

/// A value shown by the admin interface.
#[derive(Debug, Clone, PartialEq)]
pub enum DumpValue {
    Number(f64),
    Samples(Vec<f64>),
}

enum SampleFate {
    Appended,
    Reservoir,
}

fn add_sample(
    state: &mut TimerState,
    value: f64,
    sample_rate: f64,
    per_key_cap: usize,
    budget_left: bool,
) -> SampleFate {
    state.count = saturate(state.count + 1.0 / sample_rate);
    state.seen += 1;
    if state.seen == 1 {
        state.min = value;
        state.max = value;
    } else {
        state.min = state.min.min(value);
        state.max = state.max.max(value);
    }
    state.sum = saturate(state.sum + value);
    state.sum_squares = saturate(state.sum_squares + value * value);
    if state.samples.len() < per_key_cap && budget_left {
        state.samples.push(value);
        return SampleFate::Appended;
    }
    // Algorithm R: the n-th sample replaces a kept one with probability k/n, which keeps the
    // kept samples a uniform sample of everything seen.
    let kept = state.samples.len() as u64;
    if kept > 0 {
        let pick = next_random(&mut state.rng) % state.seen;
        if pick < kept {
            state.samples[pick as usize] = value;
        }
    }
    SampleFate::Reservoir
}

/// Updates the key's entry, creating it first unless the map is `full`; false when refused.
///
/// One hash lookup for a key seen before (the common case), two on its first sight: the map
/// is keyed by `Box<str>`, and the entry API would need an owned key for every metric.
fn upsert<T>(
    map: &mut HashMap<Box<str>, Entry<T>>,
    key: &str,
    full: bool,
    new: impl FnOnce() -> T,
    update: impl FnOnce(&mut T),
) -> bool {
    if let Some(entry) = map.get_mut(key) {
        entry.idle_flushes = 0;
        update(&mut entry.value);
        return true;
    }
    if full {
        return false;
    }
    let mut entry = Entry { value: new(), idle_flushes: 0 };
    update(&mut entry.value);
    map.insert(key.into(), entry);
    true
}

/// Counts a flush without an update on every key and drops keys idle for `limit` flushes;
/// returns the bytes of the keys dropped.
fn age<T>(map: &mut HashMap<Box<str>, Entry<T>>, limit: u32) -> usize {
    for entry in map.values_mut() {
        entry.idle_flushes = entry.idle_flushes.saturating_add(1);
    }
    let mut freed = 0;
    if limit > 0 {
        map.retain(|key, entry| {
            let keep = entry.idle_flushes < limit;
            if !keep {
                freed += key.len() + ENTRY_OVERHEAD;
            }
            keep
        });
    }
    freed
}

fn delete_matching<T>(map: &mut HashMap<Box<str>, Entry<T>>, pattern: &str) -> Vec<Box<str>> {
    let mut deleted = Vec::new();
    if let Some((key, _)) = map.remove_entry(pattern) {
        deleted.push(key);
    }
    if let Some(folder) = pattern.strip_suffix('*').filter(|_| pattern.ends_with(".*")) {
        let matching: Vec<Box<str>> = map.keys().filter(|key| key.starts_with(folder)).cloned().collect();
        for key in matching {
            map.remove(&key);
            deleted.push(key);
        }
    }
    deleted
}

/// Sums of finite values can still overflow; a counter pinned at ±f64::MAX is wrong but
/// visible, where Infinity would poison every downstream sum.
pub fn saturate(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(-f64::MAX, f64::MAX)
    }
}

fn seed(key: &str) -> u64 {
    // FNV-1a: the reservoir only needs a different, non-zero stream per key.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash | 1
}

fn next_random(state: &mut u64) -> u64 {
    // xorshift64: fast, good enough to pick reservoir slots, and deterministic for tests.
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[cfg(test)]
mod tests {
    use super::{Aggregator, AggregatorConfig, IdlePolicy, MetricType, ShardWindow, ENTRY_OVERHEAD};
    use crate::parse::{Metric, MetricValue};

    fn apply(agg: &mut Aggregator, key: &str, value: MetricValue<'_>) {
        agg.apply(&Metric { key, value });
    }

    fn sorted(mut window: ShardWindow) -> ShardWindow {
        window.counters.sort_by(|a, b| a.0.cmp(&b.0));
        window.gauges.sort_by(|a, b| a.0.cmp(&b.0));
        window.timers.sort_by(|a, b| a.0.cmp(&b.0));
        window.sets.sort_by(|a, b| a.0.cmp(&b.0));
        window
    }

    #[test]
    fn gauge_delta_follows_etsy() {
        let mut agg = Aggregator::new(AggregatorConfig::default());
        // A delta on a missing gauge sets it.
        apply(&mut agg, "g", MetricValue::Gauge { value: -5.0, delta: true });
        apply(&mut agg, "g", MetricValue::Gauge { value: 2.0, delta: true });
        assert_eq!(agg.flush().gauges, vec![("g".into(), -3.0)]);
        // A delta on a zero gauge also sets it.
        apply(&mut agg, "g", MetricValue::Gauge { value: 0.0, delta: false });
        apply(&mut agg, "g", MetricValue::Gauge { value: 7.0, delta: true });
        assert_eq!(agg.flush().gauges, vec![("g".into(), 7.0)]);
        // Gauges persist across flushes.
        assert_eq!(agg.flush().gauges, vec![("g".into(), 7.0)]);
    }

    #[test]
    fn counters_reset_to_zero_and_idle_keys_expire() {
        let config = AggregatorConfig {
            idle: IdlePolicy { counters: 2, ..IdlePolicy::default() },
            ..AggregatorConfig::default()
        };
        let mut agg = Aggregator::new(config);
        apply(&mut agg, "c", MetricValue::Counter { value: 1.0, sample_rate: 0.1 });
        assert_eq!(agg.flush().counters, vec![("c".into(), 10.0)]);
        assert_eq!(agg.flush().counters, vec![("c".into(), 0.0)]);
        assert_eq!(agg.flush().counters, vec![]);
    }

    #[test]
    fn the_byte_cap_bounds_keys_and_set_members_and_gives_back_what_leaves() {
        let key = |i: usize| format!("k{i:0>100}");
        // Room for about ten 100-byte keys with their overhead.
        let config = AggregatorConfig {
            max_bytes: 10 * (101 + ENTRY_OVERHEAD),
            idle: IdlePolicy { counters: 1, ..IdlePolicy::default() },
            ..AggregatorConfig::default()
        };
        let mut agg = Aggregator::new(config);
        for i in 0..50 {
            apply(&mut agg, &key(i), MetricValue::Counter { value: 1.0, sample_rate: 1.0 });
        }
        assert_eq!(agg.key_count(), 10);
        assert_eq!(agg.drops().byte_limit_metrics, 40);
        assert_eq!(agg.drops().key_limit_metrics, 0, "the key count was not the limit");
        assert_eq!(agg.bytes(), 10 * (101 + ENTRY_OVERHEAD));
        // Idle keys expire at the next flush (counters after one idle flush): their bytes go back.
        agg.flush();
        agg.flush();
        assert_eq!((agg.key_count(), agg.bytes()), (0, 0));
        // A set's members count too, and are given back at each flush.
        let big = "m".repeat(300);
        for i in 0..10 {
            let member = format!("{big}{i}");
            apply(&mut agg, "s", MetricValue::Set { member: &member });
        }
        let window = agg.flush();
        let (_, members, overflowed) = window.sets[0].clone();
        assert!(members < 10 && overflowed, "{members} members kept of 10");
        assert!(agg.drops().set_members > 0);
        assert_eq!(agg.bytes(), 1 + ENTRY_OVERHEAD, "the key alone after the flush");
    }

    #[test]
    fn key_cap_counts_what_it_refuses() {
        let config = AggregatorConfig { max_keys: 2, ..AggregatorConfig::default() };
        let mut agg = Aggregator::new(config);
        for key in ["a", "b", "c", "a"] {
            apply(&mut agg, key, MetricValue::Counter { value: 1.0, sample_rate: 1.0 });
        }
        assert_eq!(agg.drops().key_limit_metrics, 1);
        assert_eq!(sorted(agg.flush()).counters, vec![("a".into(), 2.0), ("b".into(), 1.0)]);
    }

    #[test]
    fn timer_overflow_keeps_exact_sums_and_a_bounded_sample() {
        let config = AggregatorConfig { max_samples_per_timer: 10, ..AggregatorConfig::default() };
        let mut agg = Aggregator::new(config);
        for i in 1..=1000 {
            apply(&mut agg, "t", MetricValue::Timer { value: f64::from(i), sample_rate: 1.0 });
        }
        let window = agg.flush();
        let (_, timer) = &window.timers[0];
        assert_eq!(timer.samples.len(), 10);
        assert_eq!(timer.count, 1000.0);
        let exact = timer.overflow.expect("overflowed");
        assert_eq!((exact.seen, exact.sum, exact.min, exact.max), (1000, 500_500.0, 1.0, 1000.0));
        assert_eq!(agg.drops().timer_samples_not_kept, 990);
        // The reservoir is not just the first ten samples.
        assert!(timer.samples.iter().any(|v| *v > 10.0));
    }

    /// `1 / sample_rate` is finite for every rate the parser passes, but adding it up is not:
    /// five samples at the smallest normal rate (each counting 4.5e307) overflow a timer's count.
    #[test]
    fn timer_count_saturates_instead_of_reaching_infinity() {
        let mut agg = Aggregator::new(AggregatorConfig::default());
        for _ in 0..5 {
            apply(&mut agg, "t", MetricValue::Timer { value: 1.0, sample_rate: f64::MIN_POSITIVE });
        }
        let window = agg.flush();
        assert_eq!(window.timers[0].1.count, f64::MAX);
    }

    #[test]
    fn sets_count_distinct_members_and_admin_deletes_folders() {
        let mut agg = Aggregator::new(AggregatorConfig::default());
        for member in ["x", "y", "x"] {
            apply(&mut agg, "s", MetricValue::Set { member });
        }
        apply(&mut agg, "app.a", MetricValue::Counter { value: 1.0, sample_rate: 1.0 });
        apply(&mut agg, "app.b", MetricValue::Counter { value: 1.0, sample_rate: 1.0 });
        apply(&mut agg, "other", MetricValue::Counter { value: 1.0, sample_rate: 1.0 });
        let mut deleted = agg.delete(MetricType::Counters, &["app.*".to_owned()]);
        deleted[0].sort();
        assert_eq!(deleted, vec![vec!["app.a".into(), "app.b".into()]]);
        let window = agg.flush();
        assert_eq!(window.sets, vec![("s".into(), 2, false)]);
        assert_eq!(window.counters, vec![("other".into(), 1.0)]);
    }
}
