//! The shards: disjoint sets of keys (chosen by key hash), each one [`Aggregator`] behind a
//! mutex. Ingest threads apply their parsed metrics under the lock, one batch at a time; the
//! flush thread and the admin interface take the same lock, so a flush sees every batch
//! applied before it and none half-applied.
//!
//! Parsed metrics travel in [`ShardBatch`]es (keys and set members in one string, values in a
//! vector, both reused) built by [`Router`]. Nothing here parses, reads a socket or starts a
//! thread.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::aggregate::{Aggregator, AggregatorDrops, DumpValue, MetricType, ShardWindow};
use crate::parse::{BadLine, Metric, MetricSink, MetricValue};

/// One shard. The lock is held for one batch, one flush, or one admin read.
pub(crate) type Shard = Mutex<Aggregator>;

fn lock(shard: &Shard) -> MutexGuard<'_, Aggregator> {
    // A panic while applying would be a bug in the aggregator; its maps are still whole, so
    // the data is used rather than lost.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One shard's window and figures, taken by the flush thread.
pub(crate) struct ShardReport {
    pub(crate) window: ShardWindow,
    pub(crate) keys: usize,
    /// Bytes of keys and set members the shard held at the end of the window (before the
    /// flush freed its members).
    pub(crate) bytes: usize,
    pub(crate) drops: AggregatorDrops,
}

/// Takes the shard's window (Etsy's reset rules apply) and its figures.
pub(crate) fn flush(shard: &Shard) -> ShardReport {
    let mut aggregator = lock(shard);
    let bytes = aggregator.bytes();
    let window = aggregator.flush();
    ShardReport { window, keys: aggregator.key_count(), bytes, drops: aggregator.drops() }
}

/// For the admin interface: a read of every shard (`counters`, `gauges`, …).
pub(crate) fn dump_all(shards: &[Shard], kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
    let mut all = Vec::new();
    for shard in shards {
        all.extend(lock(shard).dump(kind));
    }
    all
}

/// For the admin interface: delete keys in every shard; per pattern, the keys deleted.
pub(crate) fn delete_all(shards: &[Shard], kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
    let mut all: Vec<Vec<Box<str>>> = patterns.iter().map(|_| Vec::new()).collect();
    for shard in shards {
        for (mine, theirs) in all.iter_mut().zip(lock(shard).delete(kind, patterns)) {
            mine.extend(theirs);
        }
    }
    all
}

/// Parsed metrics for one shard, keys and set members stored in one string.
#[derive(Debug, Default)]
pub(crate) struct ShardBatch {
    text: String,
    items: Vec<Item>,
}

#[derive(Debug)]
struct Item {
    key: (u32, u32),
    value: ItemValue,
}

#[derive(Debug)]
enum ItemValue {
    Counter { value: f64, sample_rate: f64 },
    Gauge { value: f64, delta: bool },
    Timer { value: f64, sample_rate: f64 },
    Set((u32, u32)),
}

/// Past this capacity a batch's string is shrunk after use: one burst of 64 KiB datagrams
/// should not pin megabytes for the rest of the run.
const KEEP_TEXT_BYTES: usize = 1 << 20;

impl ShardBatch {
    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn push_text(&mut self, text: &str) -> (u32, u32) {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        (start, self.text.len() as u32)
    }

    fn clear(&mut self) {
        self.text.clear();
        self.items.clear();
        if self.text.capacity() > KEEP_TEXT_BYTES {
            self.text.shrink_to(KEEP_TEXT_BYTES / 16);
            self.items.shrink_to(KEEP_TEXT_BYTES / 16);
        }
    }

    /// Applies every metric to the shard's aggregator, under one lock.
    fn apply_to(&self, shard: &Shard) {
        let mut aggregator = lock(shard);
        for item in &self.items {
            let text = |(start, end): (u32, u32)| &self.text[start as usize..end as usize];
            let value = match item.value {
                ItemValue::Counter { value, sample_rate } => MetricValue::Counter { value, sample_rate },
                ItemValue::Gauge { value, delta } => MetricValue::Gauge { value, delta },
                ItemValue::Timer { value, sample_rate } => MetricValue::Timer { value, sample_rate },
                ItemValue::Set(range) => MetricValue::Set { member: text(range) },
            };
            aggregator.apply(&Metric { key: text(item.key), value });
        }
    }
}

/// Routes parsed metrics to per-shard batches by key hash; one per ingest thread, reused.
#[derive(Debug)]
pub(crate) struct Router {
    batches: Vec<ShardBatch>,
}

impl Router {
    pub(crate) fn new(shards: usize) -> Self {
        Router { batches: (0..shards.max(1)).map(|_| ShardBatch::default()).collect() }
    }

    /// Applies each shard's batch under that shard's lock (one shard at a time, so ingest
    /// threads on other shards are not held up), then empties the batches for reuse.
    pub(crate) fn apply(&mut self, shards: &[Shard]) {
        for (batch, shard) in self.batches.iter_mut().zip(shards) {
            if !batch.is_empty() {
                batch.apply_to(shard);
                batch.clear();
            }
        }
    }
}

impl MetricSink for Router {
    fn metric(&mut self, metric: Metric<'_>) {
        let shard = if self.batches.len() == 1 { 0 } else { shard_of(metric.key, self.batches.len()) };
        let batch = &mut self.batches[shard];
        let key = batch.push_text(metric.key);
        let value = match metric.value {
            MetricValue::Counter { value, sample_rate } => ItemValue::Counter { value, sample_rate },
            MetricValue::Gauge { value, delta } => ItemValue::Gauge { value, delta },
            MetricValue::Timer { value, sample_rate } => ItemValue::Timer { value, sample_rate },
            MetricValue::Set { member } => ItemValue::Set(batch.push_text(member)),
        };
        batch.items.push(Item { key, value });
    }

    fn bad_line(&mut self, _reason: BadLine, _line: &str) {}
}

fn shard_of(key: &str, shards: usize) -> usize {
    // FNV-1a; only spreading matters here, the maps themselves use SipHash.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::{flush, shard_of, Router, Shard};
    use crate::aggregate::{Aggregator, AggregatorConfig};
    use crate::parse::{LineParser, ParseOptions};

    #[test]
    fn routed_metrics_reach_the_shard_that_owns_their_key() {
        let shards: Vec<Shard> = (0..3).map(|_| Mutex::new(Aggregator::new(AggregatorConfig::default()))).collect();
        let mut router = Router::new(shards.len());
        let mut parser = LineParser::new(ParseOptions::default());
        let keys = ["a", "b", "c", "d", "e", "f"];
        for key in keys {
            parser.parse_packet(format!("{key}:1|c\n{key}:2|c\nu.{key}:m|s").as_bytes(), &mut router);
        }
        router.apply(&shards);
        // Applying empties the batches: a second apply adds nothing.
        router.apply(&shards);
        let (mut counters, mut sets) = (0, 0);
        for (index, shard) in shards.iter().enumerate() {
            let window = flush(shard).window;
            for (key, count) in &window.counters {
                assert_eq!(shard_of(key, 3), index, "{key}");
                assert_eq!(*count, 3.0);
                counters += 1;
            }
            for (key, members, _) in &window.sets {
                assert_eq!((shard_of(key, 3), *members), (index, 1));
                sets += 1;
            }
        }
        assert_eq!((counters, sets), (keys.len(), keys.len()));
    }
}
