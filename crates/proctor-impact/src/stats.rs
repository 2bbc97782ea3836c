//! Latency percentiles and the bootstrap interval of their difference between two arms.
//!
//! Pure: latencies in, numbers out; no clock, no I/O, and the same seed gives the same
//! intervals. Latencies are kept in buckets a thousandth wide (1,024 sub-buckets to every power
//! of two, exact below 1,024 ns), so a second of 24 children at 1,000 operations a second is a
//! few hundred (bucket, count) pairs rather than 24,000 numbers, and a quantile read from them
//! is within 0.05 % of the exact one.
//!
//! The unit of resampling is a [`Block`]: the operations of one second of one round. A stall
//! caused by a monitor delays every operation queued behind it, so single latencies are not
//! independent; seconds nearly are (the agent's cycle is one), and resampling them keeps each
//! stall whole. Where the arms took turns in short windows, whole cycles of turns are resampled
//! instead ([`paired_difference_intervals`]). This does not know what a round or an arm is: the
//! caller hands it blocks.

use std::collections::BTreeMap;

/// Sub-buckets to a power of two: the relative width of a bucket is at most 1 / 1,024.
const SUB_BUCKETS: u64 = 1024;
const SUB_BITS: u32 = 10;

/// The bucket of a latency of `ns` nanoseconds.
pub fn bucket_of(ns: u64) -> u32 {
    if ns < SUB_BUCKETS {
        return ns as u32;
    }
    let exponent = 63 - ns.leading_zeros();
    let shift = exponent - SUB_BITS;
    let mantissa = ns >> shift;
    ((u64::from(shift) + 1) * SUB_BUCKETS + (mantissa - SUB_BUCKETS)) as u32
}

/// The middle of bucket `bucket`, in nanoseconds: what a quantile falling in it is reported as.
pub fn bucket_value(bucket: u32) -> f64 {
    let bucket = u64::from(bucket);
    if bucket < SUB_BUCKETS {
        return bucket as f64;
    }
    let shift = bucket / SUB_BUCKETS - 1;
    let mantissa = bucket % SUB_BUCKETS + SUB_BUCKETS;
    let low = (mantissa << shift) as f64;
    low + ((1u64 << shift) as f64 - 1.0) / 2.0
}

/// The operations of one second of one round, bucketed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    /// (bucket, operations), ascending by bucket, no zero counts.
    pub buckets: Vec<(u32, u64)>,
    pub count: u64,
    /// The exact longest latency, in nanoseconds.
    pub max_ns: u64,
}

/// Builds a [`Block`] one latency at a time.
#[derive(Debug, Clone, Default)]
pub struct BlockBuilder {
    buckets: BTreeMap<u32, u64>,
    count: u64,
    max_ns: u64,
}

impl BlockBuilder {
    pub fn add(&mut self, ns: u64) {
        *self.buckets.entry(bucket_of(ns)).or_default() += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn build(self) -> Block {
        Block { buckets: self.buckets.into_iter().collect(), count: self.count, max_ns: self.max_ns }
    }
}

/// The percentiles reported, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub count: u64,
}

impl Percentiles {
    /// In the order the report lists them: p50, p99, p99.9, max.
    pub fn values(&self) -> [f64; 4] {
        [self.p50, self.p99, self.p999, self.max]
    }
}

/// The names of [`Percentiles::values`], as the report writes them.
pub const STATISTICS: [&str; 4] = ["p50", "p99", "p99.9", "max"];

/// Blocks added together (each any number of times) over a dense range of buckets.
#[derive(Debug)]
struct Pool {
    low: u32,
    counts: Vec<u64>,
    total: u64,
    max_ns: u64,
}

impl Pool {
    /// A pool able to hold any of `blocks`.
    fn for_blocks<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> Pool {
        let (mut low, mut high) = (u32::MAX, 0);
        for block in blocks {
            if let (Some(first), Some(last)) = (block.buckets.first(), block.buckets.last()) {
                low = low.min(first.0);
                high = high.max(last.0);
            }
        }
        let size = if low > high { 0 } else { (high - low) as usize + 1 };
        Pool { low: low.min(high), counts: vec![0; size], total: 0, max_ns: 0 }
    }

    fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.total = 0;
        self.max_ns = 0;
    }

    fn add(&mut self, block: &Block) {
        for &(bucket, count) in &block.buckets {
            self.counts[(bucket - self.low) as usize] += count;
        }
        self.total += block.count;
        self.max_ns = self.max_ns.max(block.max_ns);
    }

    /// Nearest rank: the smallest bucket holding at least ⌈q·n⌉ operations at or below it.
    fn percentiles(&self) -> Option<Percentiles> {
        if self.total == 0 {
            return None;
        }
        let ranks = [0.5, 0.99, 0.999].map(|q: f64| ((q * self.total as f64).ceil() as u64).max(1));
        let mut found = [0.0; 3];
        let mut next = 0;
        let mut seen = 0;
        for (offset, count) in self.counts.iter().enumerate() {
            seen += count;
            while next < ranks.len() && seen >= ranks[next] {
                found[next] = bucket_value(self.low + offset as u32);
                next += 1;
            }
            if next == ranks.len() {
                break;
            }
        }
        // A quantile is never reported above the exact maximum its bucket's middle may pass.
        let max = self.max_ns as f64;
        Some(Percentiles {
            p50: found[0].min(max),
            p99: found[1].min(max),
            p999: found[2].min(max),
            max,
            count: self.total,
        })
    }
}

/// The percentiles of all `blocks` together; `None` when they hold no operation.
pub fn percentiles(blocks: &[Block]) -> Option<Percentiles> {
    let mut pool = Pool::for_blocks(blocks);
    blocks.iter().for_each(|block| pool.add(block));
    pool.percentiles()
}

/// A 95 % interval, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small generator whose whole state is the seed,
/// so an interval is reproduced from the seed alone.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2⁻³² for any n here).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Blocks with operations each arm needs for an interval: resampling one block gives that
/// block back every time, an interval of no width that would claim a certainty nobody has.
pub const MIN_BLOCKS: usize = 2;

/// The bootstrap 95 % percentile interval of `other`'s statistic minus `base`'s, for each of
/// p50, p99, p99.9 and max: `resamples` times, each arm's blocks are drawn with replacement (as
/// many as it has) and pooled. `None` when either arm has fewer than [`MIN_BLOCKS`] blocks
/// with operations.
pub fn difference_intervals(base: &[Block], other: &[Block], resamples: usize, seed: u64) -> Option<[Interval; 4]> {
    let enough = |blocks: &[Block]| blocks.iter().filter(|b| b.count > 0).count() >= MIN_BLOCKS;
    if !enough(base) || !enough(other) || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut base_pool = Pool::for_blocks(base);
    let mut other_pool = Pool::for_blocks(other);
    let mut differences: [Vec<f64>; 4] = Default::default();
    for _ in 0..resamples {
        let mut draw = |pool: &mut Pool, blocks: &[Block]| {
            pool.clear();
            for _ in 0..blocks.len() {
                pool.add(&blocks[rng.below(blocks.len())]);
            }
            pool.percentiles()
        };
        // A draw of only empty blocks has no percentiles; it is drawn again next time round.
        let (Some(a), Some(b)) = (draw(&mut base_pool, base), draw(&mut other_pool, other)) else {
            continue;
        };
        for (i, (x, y)) in a.values().iter().zip(b.values()).enumerate() {
            differences[i].push(y - x);
        }
    }
    intervals_of(differences)
}

/// The same interval for a design where the arms took turns in short windows: `units` are
/// the turns of one cycle, each the base arm's blocks and the other arm's blocks from windows
/// next to each other in time. A resample draws whole cycles (as many as there are) and pools
/// both arms' blocks of each drawn cycle, so what the host did during a cycle (another tenant's
/// build, a slow minute) lands in both arms of every draw that has it, and the interval is that
/// of the difference, not of each arm's spread. `None` with fewer than [`MIN_BLOCKS`] cycles in
/// which both arms had operations.
pub fn paired_difference_intervals(
    units: &[(&[Block], &[Block])],
    resamples: usize,
    seed: u64,
) -> Option<[Interval; 4]> {
    let has_ops = |blocks: &[Block]| blocks.iter().any(|b| b.count > 0);
    let usable = units.iter().filter(|(base, other)| has_ops(base) && has_ops(other)).count();
    if usable < MIN_BLOCKS || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut base_pool = Pool::for_blocks(units.iter().flat_map(|unit| unit.0.iter()));
    let mut other_pool = Pool::for_blocks(units.iter().flat_map(|unit| unit.1.iter()));
    let mut differences: [Vec<f64>; 4] = Default::default();
    for _ in 0..resamples {
        base_pool.clear();
        other_pool.clear();
        for _ in 0..units.len() {
            let (base, other) = units[rng.below(units.len())];
            base.iter().for_each(|block| base_pool.add(block));
            other.iter().for_each(|block| other_pool.add(block));
        }
        let (Some(a), Some(b)) = (base_pool.percentiles(), other_pool.percentiles()) else {
            continue;
        };
        for (i, (x, y)) in a.values().iter().zip(b.values()).enumerate() {
            differences[i].push(y - x);
        }
    }
    intervals_of(differences)
}

/// The 2.5 % and 97.5 % points of each statistic's resampled differences.
fn intervals_of(differences: [Vec<f64>; 4]) -> Option<[Interval; 4]> {
    if differences[0].is_empty() {
        return None;
    }
    Some(differences.map(|mut d| {
        d.sort_by(f64::total_cmp);
        Interval { low: percentile_of_sorted(&d, 0.025), high: percentile_of_sorted(&d, 0.975) }
    }))
}

/// The `q` quantile of sorted values, nearest rank.
fn percentile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(latencies: impl IntoIterator<Item = u64>) -> Block {
        let mut builder = BlockBuilder::default();
        latencies.into_iter().for_each(|ns| builder.add(ns));
        builder.build()
    }

    #[test]
    fn buckets_are_exact_below_1024_ns_and_a_thousandth_wide_above() {
        for ns in [0, 1, 999, 1023] {
            assert_eq!(bucket_value(bucket_of(ns)), ns as f64);
        }
        for ns in [1024u64, 1025, 5_000, 123_456, 9_999_999, 4_000_000_000, 70_000_000_000] {
            let value = bucket_value(bucket_of(ns));
            assert!((value - ns as f64).abs() / ns as f64 <= 1.0 / 2048.0 + 1e-12, "{ns} -> {value}");
        }
        // Buckets ascend with the value, so a scan in bucket order is a scan in latency order.
        let mut last = 0;
        for ns in (0..2_000_000u64).step_by(97) {
            let bucket = bucket_of(ns);
            assert!(bucket >= last, "{ns}");
            last = bucket;
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        // 1..=1000 µs: p50 is the 500th value, p99 the 990th, p99.9 the 999th.
        let b = block((1..=1000).map(|us| us * 1000));
        let p = percentiles(&[b]).expect("operations");
        let near = |got: f64, want: f64| (got - want).abs() / want < 1e-3;
        assert!(near(p.p50, 500_000.0), "{p:?}");
        assert!(near(p.p99, 990_000.0), "{p:?}");
        assert!(near(p.p999, 999_000.0), "{p:?}");
        assert_eq!(p.max, 1_000_000.0);
        assert_eq!(p.count, 1000);
        assert_eq!(percentiles(&[Block::default()]), None);
    }

    #[test]
    fn blocks_pool_as_one() {
        let whole = percentiles(&[block((1..=2000).map(|n| n * 100))]).expect("ops");
        let halves =
            percentiles(&[block((1..=1000).map(|n| n * 100)), block((1001..=2000).map(|n| n * 100))]).expect("ops");
        assert_eq!(whole, halves);
    }

    #[test]
    fn the_same_seed_gives_the_same_interval_and_another_seed_may_not() {
        let base: Vec<Block> = (0..20).map(|i| block((0..100).map(|n| 10_000 + n * 37 + i * 101))).collect();
        let other: Vec<Block> = (0..20).map(|i| block((0..100).map(|n| 10_500 + n * 41 + i * 89))).collect();
        let a = difference_intervals(&base, &other, 300, 7).expect("intervals");
        let b = difference_intervals(&base, &other, 300, 7).expect("intervals");
        assert_eq!(a, b);
        let c = difference_intervals(&base, &other, 300, 8).expect("intervals");
        assert_ne!(a, c);
        for interval in a {
            assert!(interval.low <= interval.high, "{interval:?}");
        }
    }

    #[test]
    fn an_arm_against_itself_has_an_interval_around_zero() {
        let blocks: Vec<Block> =
            (0..30).map(|i| block((0..200).map(|n| 5_000 + (n * 7919 + i * 104_729) % 20_000))).collect();
        let intervals = difference_intervals(&blocks, &blocks, 500, 1).expect("intervals");
        for (name, interval) in STATISTICS.iter().zip(intervals) {
            assert!(interval.low <= 0.0 && interval.high >= 0.0, "{name}: {interval:?}");
        }
    }

    #[test]
    fn a_stall_in_one_arm_moves_its_interval_away_from_zero() {
        let quiet: Vec<Block> = (0..20).map(|i| block((0..1000).map(|n| 5_000 + (n + i) % 500))).collect();
        // Every block of the other arm has 2 % of its operations stalled 5 ms.
        let stalled: Vec<Block> = (0..20)
            .map(|i| block((0..1000).map(|n| if n % 50 == 0 { 5_000_000 } else { 5_000 + (n + i) % 500 })))
            .collect();
        let [p50, p99, p999, max] = difference_intervals(&quiet, &stalled, 500, 3).expect("intervals");
        // The median barely moves (the stalled 2 % push it up by a few operations' worth).
        assert!(p50.low.abs() < 100.0 && p50.high.abs() < 100.0, "{p50:?}");
        assert!(p99.low > 4_000_000.0, "{p99:?}");
        assert!(p999.low > 4_000_000.0 && max.low > 4_000_000.0, "{p999:?} {max:?}");
        assert_eq!(difference_intervals(&quiet, &[], 100, 1), None);
        // One block, resampled, is always itself: no interval rather than one of no width.
        assert_eq!(difference_intervals(&quiet, &stalled[..1], 100, 1), None);
        assert!(difference_intervals(&quiet, &stalled[..2], 100, 1).is_some());
    }

    #[test]
    fn cycles_drawn_whole_cancel_what_the_host_did_to_both_arms() {
        // 40 cycles; in each, both arms see the same host: most cycles quiet, a few with a
        // tail (a slow minute), and the arms alike within each cycle. The arms do not differ,
        // so an interval must include 0; drawn as pairs it must also be far narrower than each
        // arm's blocks drawn on their own, which mix quiet and slow cycles independently.
        let mut units: Vec<(Vec<Block>, Vec<Block>)> = Vec::new();
        for cycle in 0..40u64 {
            let tail = if cycle % 7 == 3 { 8_000_000 } else { 0 };
            // Each arm its own scatter of the same distribution (a different stream of draws).
            let window = |arm: u64| {
                let mut rng = SplitMix64::new(cycle * 2 + arm);
                block((0..1000u64).map(|n| {
                    let base = 50_000 + rng.below(10_000) as u64;
                    if n % 100 == 0 {
                        base + tail
                    } else {
                        base
                    }
                }))
            };
            units.push((vec![window(0)], vec![window(1)]));
        }
        let pairs: Vec<(&[Block], &[Block])> = units.iter().map(|(a, b)| (a.as_slice(), b.as_slice())).collect();
        let paired = paired_difference_intervals(&pairs, 500, 5).expect("intervals");
        let base: Vec<Block> = units.iter().flat_map(|u| u.0.clone()).collect();
        let other: Vec<Block> = units.iter().flat_map(|u| u.1.clone()).collect();
        let unpaired = difference_intervals(&base, &other, 500, 5).expect("intervals");
        let width = |i: Interval| i.high - i.low;
        for (name, (p, u)) in STATISTICS.iter().zip(paired.iter().zip(unpaired)) {
            assert!(p.low <= 0.0 && p.high >= 0.0, "{name}: {p:?}");
            if *name == "p99.9" {
                assert!(width(*p) * 10.0 < width(u), "{name}: paired {p:?}, unpaired {u:?}");
            }
        }
        // Too few cycles with operations in both arms: no interval.
        assert_eq!(paired_difference_intervals(&pairs[..1], 100, 1), None);
        let empty: Vec<Block> = vec![Block::default()];
        let hollow: Vec<(&[Block], &[Block])> = vec![(&empty, &units[0].1), (&units[1].0, &empty)];
        assert_eq!(paired_difference_intervals(&hollow, 100, 1), None);
    }

    #[test]
    fn draws_are_uniform_enough() {
        let mut rng = SplitMix64::new(42);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[rng.below(5)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
    }
}
