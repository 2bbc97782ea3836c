//! A log-scale histogram of non-negative integer values (HDR-like buckets).
//!
//! Values below [`SUB_BUCKETS`] get one bucket each; above that every power of two is split
//! into [`SUB_BUCKETS`] equal buckets, so a bucket is never wider than 1/64 ≈ 1.6 % of its
//! lower edge. Each bucket also keeps the sum of its values, so its mean is exact and a
//! peak at exactly 250 ms is reported as 250 ms, not as the middle of its bucket. Memory
//! grows with the largest value seen (at most ~3,800 buckets of 16 bytes for the whole `u64`
//! range), never with the number of values. The histogram does not know units:
//! callers pick one (proctor uses nanoseconds for durations).

/// log2 of the number of buckets per power of two.
const SUB_BITS: u32 = 6;
/// Buckets per power of two; also the count of exact buckets for small values.
pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;

/// Counts of values in logarithmic buckets, plus exact count, sum, min and max.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogHistogram {
    counts: Vec<u64>,
    /// Sum of the values in each bucket, as f64: exact enough for a mean, never overflows.
    sums: Vec<f64>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// One non-empty bucket: values in `[low, high)` were seen `count` times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub low: u64,
    pub high: u64,
    pub count: u64,
    /// Mean of the values in the bucket.
    pub mean: f64,
}

/// Index of the bucket holding `value`.
fn bucket_index(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let shift = exponent - SUB_BITS;
    let sub = (value >> shift) - SUB_BUCKETS;
    ((u64::from(shift) + 1) * SUB_BUCKETS + sub) as usize
}

/// Lowest value of bucket `index`; saturates at `u64::MAX` past the top bucket.
fn bucket_low(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let shift = index / SUB_BUCKETS - 1;
    let sub = index % SUB_BUCKETS;
    let low = u128::from(SUB_BUCKETS + sub) << shift;
    u64::try_from(low).unwrap_or(u64::MAX)
}

impl LogHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one value. Inlined: `proctor strace` calls it once per line, and across crates a
    /// plain call (and the multiply by a count of 1) was a visible share of its time.
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Adds `count` copies of `value`.
    #[inline]
    pub fn record_n(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        let index = bucket_index(value);
        if index >= self.counts.len() {
            self.counts.resize(index + 1, 0);
            self.sums.resize(index + 1, 0.0);
        }
        self.counts[index] += count;
        self.sums[index] += value as f64 * count as f64;
        if self.total == 0 || value < self.min {
            self.min = value;
        }
        self.max = self.max.max(value);
        self.total += count;
        self.sum += u128::from(value) * u128::from(count);
    }

    /// Adds every value of `other` (exactly: same bucket layout).
    pub fn merge(&mut self, other: &LogHistogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
            self.sums.resize(other.counts.len(), 0.0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        for (mine, theirs) in self.sums.iter_mut().zip(&other.sums) {
            *mine += theirs;
        }
        if self.total == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.total += other.total;
        self.sum += other.sum;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Exact sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Smallest value recorded (exact), `None` when empty.
    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }

    /// Largest value recorded (exact), `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    /// Exact mean, `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }

    /// The value below which a fraction `q` (0..=1) of the values lie, to bucket precision:
    /// the middle of the bucket holding that rank, clamped to the exact min and max.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        // The rank is 1-based: q = 0 is the first value, q = 1 the last.
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let low = bucket_low(index);
                let high = bucket_low(index + 1);
                let middle = low + (high - low) / 2;
                return Some(middle.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// The non-empty buckets, lowest first.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.counts.iter().enumerate().filter(|(_, &count)| count > 0).map(|(index, &count)| Bucket {
            low: bucket_low(index),
            high: bucket_low(index + 1),
            count,
            mean: self.sums[index] / count as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_edges_are_contiguous_and_contain_their_values() {
        for index in 0..3000 {
            let low = bucket_low(index);
            let high = bucket_low(index + 1);
            assert!(low < high, "bucket {index}: {low}..{high}");
            assert_eq!(bucket_index(low), index);
            assert_eq!(bucket_index(high - 1), index);
        }
        assert_eq!(bucket_index(u64::MAX), bucket_index(u64::MAX - 1));
    }

    #[test]
    fn buckets_are_at_most_two_percent_wide() {
        for value in [100u64, 1_000, 250_000_000, 1_000_000_000, u64::MAX / 3] {
            let index = bucket_index(value);
            let width = bucket_low(index + 1) - bucket_low(index);
            assert!((width as f64) / (value as f64) < 0.02, "{value}");
        }
    }

    #[test]
    fn quantiles_and_exact_stats() {
        let mut histogram = LogHistogram::new();
        for value in 1..=1000u64 {
            histogram.record(value * 1000);
        }
        assert_eq!(histogram.count(), 1000);
        assert_eq!(histogram.min(), Some(1000));
        assert_eq!(histogram.max(), Some(1_000_000));
        assert_eq!(histogram.sum(), 1000 * 500_500);
        let median = histogram.quantile(0.5).expect("non-empty") as f64;
        assert!((median / 500_000.0 - 1.0).abs() < 0.02, "{median}");
        let p99 = histogram.quantile(0.99).expect("non-empty") as f64;
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.02, "{p99}");
        assert_eq!(LogHistogram::new().quantile(0.5), None);
    }

    #[test]
    fn merge_equals_recording_everything_once() {
        let mut left = LogHistogram::new();
        let mut right = LogHistogram::new();
        let mut both = LogHistogram::new();
        for value in [0u64, 5, 70, 9_000, 1 << 40] {
            left.record(value);
            both.record(value);
        }
        for value in [3u64, 1 << 50] {
            right.record_n(value, 4);
            both.record_n(value, 4);
        }
        left.merge(&right);
        assert_eq!(left, both);
    }
}
