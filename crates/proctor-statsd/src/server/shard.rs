//! The shard threads: each owns one [`Aggregator`] (a disjoint set of keys, chosen by key hash)
//! and applies the batches parsers send it, answering flush, dump and delete requests over the
//! same channel, so every request sees what was queued before it.
//!
//! Parsed metrics travel in [`ShardBatch`]es (keys and set members in one string, values in a
//! vector) built by [`Router`]. A shard does no parsing and no I/O.

use std::sync::mpsc::{self, Receiver, SyncSender};

use crate::aggregate::{Aggregator, AggregatorDrops, DumpValue, MetricType, ShardWindow};
use crate::parse::{BadLine, Metric, MetricSink, MetricValue};

pub(crate) enum ShardMsg {
    Batch(ShardBatch),
    Flush(SyncSender<ShardReport>),
    Dump(MetricType, SyncSender<Vec<(Box<str>, DumpValue)>>),
    Delete(MetricType, Vec<String>, SyncSender<Vec<Vec<Box<str>>>>),
    Stop,
}

pub(crate) struct ShardReport {
    pub(crate) window: ShardWindow,
    pub(crate) keys: usize,
    pub(crate) drops: AggregatorDrops,
}

/// Parsed metrics for one shard, keys and set members stored in one string.
#[derive(Default)]
pub(crate) struct ShardBatch {
    text: String,
    items: Vec<Item>,
}

struct Item {
    key: (u32, u32),
    value: ItemValue,
}

enum ItemValue {
    Counter { value: f64, sample_rate: f64 },
    Gauge { value: f64, delta: bool },
    Timer { value: f64, sample_rate: f64 },
    Set((u32, u32)),
}

impl ShardBatch {
    /// Metrics in the batch.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn push_text(&mut self, text: &str) -> (u32, u32) {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        (start, self.text.len() as u32)
    }
}

/// Routes parsed metrics to per-shard batches by key hash.
pub(crate) struct Router {
    pub(crate) batches: Vec<ShardBatch>,
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

pub(crate) fn shard_loop(receiver: Receiver<ShardMsg>, mut aggregator: Aggregator) {
    while let Ok(message) = receiver.recv() {
        match message {
            ShardMsg::Batch(batch) => {
                for item in &batch.items {
                    let text = |(start, end): (u32, u32)| &batch.text[start as usize..end as usize];
                    let value = match item.value {
                        ItemValue::Counter { value, sample_rate } => MetricValue::Counter { value, sample_rate },
                        ItemValue::Gauge { value, delta } => MetricValue::Gauge { value, delta },
                        ItemValue::Timer { value, sample_rate } => MetricValue::Timer { value, sample_rate },
                        ItemValue::Set(range) => MetricValue::Set { member: text(range) },
                    };
                    aggregator.apply(&Metric { key: text(item.key), value });
                }
            }
            ShardMsg::Flush(reply) => {
                let window = aggregator.flush();
                let report = ShardReport { window, keys: aggregator.key_count(), drops: aggregator.drops() };
                let _ = reply.send(report);
            }
            ShardMsg::Dump(kind, reply) => {
                let _ = reply.send(aggregator.dump(kind));
            }
            ShardMsg::Delete(kind, patterns, reply) => {
                let _ = reply.send(aggregator.delete(kind, &patterns));
            }
            ShardMsg::Stop => return,
        }
    }
}

/// For the admin thread: a read of every shard (`counters`, `gauges`, …).
pub(crate) fn dump_all(shards: &[SyncSender<ShardMsg>], kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
    let mut all = Vec::new();
    for shard in shards {
        let (reply, answer) = mpsc::sync_channel(1);
        if shard.send(ShardMsg::Dump(kind, reply)).is_ok() {
            all.extend(answer.recv().unwrap_or_default());
        }
    }
    all
}

/// For the admin thread: delete keys in every shard; per pattern, the keys deleted.
pub(crate) fn delete_all(shards: &[SyncSender<ShardMsg>], kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
    let mut all: Vec<Vec<Box<str>>> = patterns.iter().map(|_| Vec::new()).collect();
    for shard in shards {
        let (reply, answer) = mpsc::sync_channel(1);
        if shard.send(ShardMsg::Delete(kind, patterns.to_vec(), reply)).is_ok() {
            for (mine, theirs) in all.iter_mut().zip(answer.recv().unwrap_or_default()) {
                mine.extend(theirs);
            }
        }
    }
    all
}
