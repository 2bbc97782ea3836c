//! Modes (peaks) of a set of durations, shared by `proctor strace` and the latency prober.
//!
//! Durations that pile up at 250 ms, 500 ms and 1 s are the signature of timeouts, and they
//! are what a person wants named without asking. The method:
//!
//! 1. Work on the **log scale**: timeouts differ by factors, and a log axis gives a 1 µs
//!    cluster and a 1 s cluster the same resolution. Input is either raw values
//!    ([`find_modes_in_values`]) or a [`LogHistogram`] ([`find_modes_in_histogram`]); both
//!    become log-scale bins with the mass spread evenly over each bin.
//! 2. **Gate with Hartigan's dip test**: if the dip is not significant (√n · dip below
//!    [`ModeConfig::dip_critical`]), the distribution is reported as unimodal with exactly
//!    one mode, so noise in a single lump never turns into several "peaks".
//! 3. Otherwise a Gaussian **KDE** at a fraction ([`ModeConfig::bandwidth_scale`], ½ by
//!    default) of Silverman's bandwidth finds candidate peaks; adjacent peaks whose valley is
//!    shallow are **merged**, and modes holding less than [`ModeConfig::min_fraction`] of the
//!    mass are **dropped**.
//! 4. Pairs of modes whose ratio is an integer within its measured uncertainty are **flagged**
//!    (500 ms ≈ 2 × 250 ms), the hint that one timeout is being retried. Each mode carries the
//!    standard error of its position (from the KDE's curvature at the peak), and a ratio is
//!    claimed only when it is known precisely enough to tell the integer from its neighbours.
//!
//! Two refinements keep the answer at the scale a person reads a histogram at:
//!
//! - **Rare but heavy clusters.** Values here are durations, so their sum is time. Five
//!   250 ms waits among a hundred 40 µs calls are 5 % of the calls and nearly all of the time;
//!   the dip test on counts cannot see them (a far, small lump barely moves the distribution
//!   function). With [`ModeConfig::min_total_fraction`] set, a cluster separated from the rest
//!   by an empty stretch of the KDE and holding at least that share of the sum is split off
//!   even when the dip test says "unimodal", and kept even when it is below the count floor.
//!   Every [`Mode`] carries both shares: `fraction` (of values) and `total_fraction` (of their
//!   sum).
//! - **Fine structure.** A clock that ticks every 4 ms turns one 64 ms lump into a comb of
//!   spikes at 60, 64, 68 and 72 ms, and the dip test rightly calls that multimodal. Adjacent
//!   modes closer than [`ModeConfig::fine_ratio`] are reported as one **coarse** mode, with the
//!   spikes kept as its [`FineStructure`] (and their step, when they are evenly spaced).
//!
//! Everything here is pure: no I/O, no clock, no threads, no randomness. The crate does not
//! know units; values come back in the units they went in. For that reason nothing here is
//! serializable: a JSON shape that carries these values is its caller's counterpart, with the
//! unit in each field's name (`value_ns` for the prober, `value_seconds` for strace).

mod dip;
mod histogram;

pub use histogram::{Bucket, LogHistogram, SUB_BUCKETS};

/// Knobs of the mode finder. [`Default`] weighs values by count alone; [`ModeConfig::durations`]
/// also keeps clusters that hold a large share of the time (strace and the prober use it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeConfig {
    /// Fraction of Silverman's rule-of-thumb bandwidth used for the KDE. Silverman's rule
    /// assumes one Gaussian and oversmooths mixtures; half of it separates modes a factor of
    /// two apart without resolving bucket noise.
    pub bandwidth_scale: f64,
    /// √n · dip above which unimodality is rejected. 0.43 is near the 95 % point of the
    /// dip's asymptotic null distribution (uniform, the least favourable unimodal case).
    pub dip_critical: f64,
    /// Adjacent peaks are merged when the density in the valley between them is above this
    /// fraction of the lower peak.
    pub valley_ratio: f64,
    /// Modes holding less than this fraction of all values are dropped.
    pub min_fraction: f64,
    /// Fewer values than this are reported as one mode without testing.
    pub min_count: u64,
    /// Modes holding fewer values than this are dropped too: one outlier is not a peak.
    pub min_mode_count: u64,
    /// The resolution values were measured with, in input units (strace prints durations
    /// in whole microseconds). Values that close together are one value: without this, 2 µs,
    /// 3 µs and 4 µs would look like separate spikes to the dip test. `None`: exact values.
    pub resolution: Option<f64>,
    /// Two modes are "a near-integer multiple" only when the ratio is measured this precisely:
    /// [`ModeConfig::ratio_standard_errors`] of its standard error are at most this absolute
    /// distance. Absolute, because a relative tolerance would call every large ratio "near" some
    /// integer (6.8 is within 3 % of 7); an imprecise ratio is near some integer by chance.
    pub ratio_tolerance: f64,
    /// ... and only when `upper / lower` is within this many of its standard errors of an
    /// integer from 2 to [`MAX_MULTIPLE`] (each mode's [`Mode::log_standard_error`] gives the
    /// ratio's). Two standard errors: a ratio that is truly an integer is claimed 95 % of the
    /// time, one measured precisely and off the integer is not (90 / 22 = 4.09 is not 4 ×).
    pub ratio_standard_errors: f64,
    /// Values are durations and their sum is time: a cluster holding at least this fraction of
    /// the sum of all values is a mode however few values it has (at least
    /// [`ModeConfig::min_mode_count`]), provided it is separated from its neighbours by a valley
    /// where the KDE falls below [`HEAVY_VALLEY_RATIO`] of its peak. `None` (the default):
    /// counts alone decide, as for values that are not durations.
    pub min_total_fraction: Option<f64>,
    /// Adjacent modes whose ratio is below this are one coarse mode with fine structure: a
    /// histogram with ten rows per decade (×1.26 per row) cannot show them apart, and on a
    /// timer-quantized lump they are the clock's ticks, not separate causes. Timeouts and
    /// retries (×2 and more) stay apart. 1.0 keeps every mode as found.
    pub fine_ratio: f64,
}

impl ModeConfig {
    /// What proctor uses for durations (strace calls, request latencies): [`Default`] plus
    /// clusters that hold a fifth of the time or more.
    pub fn durations() -> Self {
        Self { min_total_fraction: Some(DURATIONS_MIN_TOTAL_FRACTION), ..Self::default() }
    }
}

/// [`ModeConfig::durations`]' share of the time that makes a rare cluster a mode: a fifth is
/// "a large share" by any reading, and well above what a noise bump in a lump's tail holds.
pub const DURATIONS_MIN_TOTAL_FRACTION: f64 = 0.2;

/// A peak's interval ends where the KDE falls below this fraction of the peak: an empty stretch,
/// several bandwidths wide, not a lump's thinning tail.
pub const PEAK_EDGE_RATIO: f64 = 1e-3;

/// A heavy cluster is split off only where the KDE between it and its neighbour falls below
/// this fraction of the cluster's own peak: nearly empty, a gap a person sees, not a dent.
pub const HEAVY_VALLEY_RATIO: f64 = 0.1;

impl Default for ModeConfig {
    fn default() -> Self {
        Self {
            bandwidth_scale: 0.5,
            dip_critical: 0.43,
            valley_ratio: 0.7,
            min_fraction: 0.02,
            min_count: 10,
            min_mode_count: 3,
            resolution: None,
            ratio_tolerance: 0.1,
            ratio_standard_errors: 2.0,
            min_total_fraction: None,
            fine_ratio: 1.2,
        }
    }
}

/// One mode: where the density peaks and how much mass its basin holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mode {
    /// The peak, in input units.
    pub value: f64,
    /// The standard error of `value` on the natural-log scale, so a relative one (0.01: ±1 %),
    /// measured from the KDE's curvature at the peak (see `peak_log_standard_error`).
    pub log_standard_error: f64,
    /// The peak's interval, in input units: inside the basin the mode owns (from the valley on
    /// its left to the one on its right, the data's extremes for the outer modes), the stretch
    /// around the peak where the KDE stays above [`PEAK_EDGE_RATIO`] of the peak. Values past
    /// an empty stretch (three reads of 300 ms beside hundreds of 15 µs) are in no mode.
    pub low: f64,
    pub high: f64,
    /// Values in the peak's interval (rounded for histogram input): `count`, `fraction`,
    /// `total` and `total_fraction` are those of the calls in the peak, never of its outliers.
    pub count: u64,
    /// `count` over all values.
    pub fraction: f64,
    /// Sum of the values in the basin, in input units (for durations: the time they took).
    pub total: f64,
    /// `total` over the sum of all values (0 when that sum is 0).
    pub total_fraction: f64,
}

/// The spikes inside one coarse mode (see [`ModeConfig::fine_ratio`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FineStructure {
    /// Index of the coarse mode in [`ModeReport::modes`].
    pub mode: usize,
    /// The spikes, by increasing value, each with its own basin, count and total; at least two.
    pub spikes: Vec<Mode>,
    /// The spacing of the spikes when they sit on a lattice (three or more spikes, every gap
    /// within a quarter of an integer multiple of the smallest): the clock's tick, in input
    /// units. `None` for irregular or only two spikes.
    pub step: Option<f64>,
}

/// `modes[upper].value ≈ multiple × modes[lower].value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearMultiple {
    pub lower: usize,
    pub upper: usize,
    pub multiple: u32,
    /// The exact ratio `upper / lower`.
    pub ratio: f64,
    /// The ratio's standard error, from both modes' [`Mode::log_standard_error`].
    pub ratio_standard_error: f64,
}

/// What [`find_modes_in_values`] and [`find_modes_in_histogram`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeReport {
    /// Coarse modes by increasing value; empty only when there was no usable value.
    pub modes: Vec<Mode>,
    /// The spikes inside coarse modes that have more than one, by mode.
    pub fine_structure: Vec<FineStructure>,
    /// Near-integer ratios between (coarse) modes.
    pub near_multiples: Vec<NearMultiple>,
    /// Values used (positive and finite for value input).
    pub count: u64,
    /// Sum of the values used, in input units.
    pub total: f64,
    /// Hartigan's dip of the log-scale distribution (0 to 0.25).
    pub dip: f64,
    /// True when exactly one mode was found before dropping small ones and before grouping
    /// fine structure (the dip gate kept the distribution whole, or no split survived).
    pub unimodal: bool,
    /// KDE bandwidth of the first split on the natural-log scale (0 when nothing was split).
    pub bandwidth_log: f64,
}

/// A bin on the natural-log scale. For the dip test its mass is spread evenly over
/// `[low, high)`; for the KDE it sits at `center` (the log of the values' mean when known).
/// `sum` is the sum of its values in input units, for the share of the total a mode holds.
#[derive(Debug, Clone, Copy)]
struct Bin {
    low: f64,
    high: f64,
    weight: f64,
    center: f64,
    sum: f64,
}

impl Bin {
    fn center(&self) -> f64 {
        self.center
    }
}

/// Bins per factor of two for raw values, matching [`LogHistogram`]'s resolution.
const VALUE_BINS_PER_OCTAVE: f64 = SUB_BUCKETS as f64;

/// Modes of raw values. Zero, negative and non-finite values are ignored (they have no
/// logarithm); the report's `count` says how many were used.
pub fn find_modes_in_values(values: &[f64], config: &ModeConfig) -> ModeReport {
    let width = std::f64::consts::LN_2 / VALUE_BINS_PER_OCTAVE;
    let mut indexed: Vec<(i64, f64)> = values
        .iter()
        .filter(|value| value.is_finite() && **value > 0.0)
        .map(|&value| ((value.ln() / width).floor() as i64, value))
        .collect();
    indexed.sort_unstable_by_key(|&(index, _)| index);
    let mut bins: Vec<Bin> = Vec::new();
    for (index, value) in indexed {
        let low = index as f64 * width;
        match bins.last_mut() {
            Some(last) if last.low == low => {
                last.weight += 1.0;
                last.sum += value;
            }
            _ => bins.push(Bin { low, high: low + width, weight: 1.0, center: low + width / 2.0, sum: value }),
        }
    }
    find_modes_in_bins(&bins, config)
}

/// Modes of a histogram's values. Zeros (e.g. strace's `<0.000000>`) have no logarithm;
/// they are placed just below the smallest non-zero value the resolution allows (or at
/// `[¼, ½)` without a resolution) so they keep their mass.
pub fn find_modes_in_histogram(histogram: &LogHistogram, config: &ModeConfig) -> ModeReport {
    let resolution = config.resolution.filter(|r| r.is_finite() && *r > 0.0);
    let mut bins: Vec<Bin> = Vec::new();
    for bucket in histogram.buckets() {
        let (low, high) = (bucket.low as f64, bucket.high as f64);
        let (mut low, high) = match resolution {
            // A bucket narrower than the resolution stands for the whole resolution step
            // around its value; neighbouring buckets in the same step share one bin.
            Some(step) if high - low < step => {
                let units = ((low + high) / 2.0 / step).round();
                if units < 1.0 {
                    (step / 4.0, step / 2.0)
                } else {
                    ((units - 0.5) * step, (units + 0.5) * step)
                }
            }
            Some(_) => (low, high),
            None if low < 1.0 => (0.25, 0.5_f64.max(high.min(1.0))),
            None => (low, high),
        };
        let weight = bucket.count as f64;
        let sum = bucket.mean * weight;
        let mean = bucket.mean.max(low);
        if let Some(last) = bins.last_mut() {
            // Steps and buckets may overlap where they meet; the earlier bin takes the mass.
            if (low.ln() - last.low).abs() < 1e-12 || low.max(last.high.exp()) >= high {
                let merged = last.weight + weight;
                last.center = (last.center * last.weight + mean.ln() * weight) / merged;
                last.weight = merged;
                last.sum += sum;
                continue;
            }
            low = low.max(last.high.exp());
        }
        let (low, high) = (low.ln(), high.ln());
        bins.push(Bin { low, high, weight, center: mean.ln().clamp(low, high), sum });
    }
    find_modes_in_bins(&bins, config)
}

fn find_modes_in_bins(bins: &[Bin], config: &ModeConfig) -> ModeReport {
    let total: f64 = bins.iter().map(|bin| bin.weight).sum();
    let sum: f64 = bins.iter().map(|bin| bin.sum).sum();
    let mut report = ModeReport {
        modes: Vec::new(),
        fine_structure: Vec::new(),
        near_multiples: Vec::new(),
        count: total.round() as u64,
        total: sum,
        dip: 0.0,
        unimodal: true,
        bandwidth_log: 0.0,
    };
    if bins.is_empty() {
        return report;
    }
    report.dip = dip::dip(&cdf_vertices(bins, total));
    let mut splitter = Splitter {
        config,
        grand_total: total,
        grand_sum: sum,
        modes: Vec::new(),
        identical: Vec::new(),
        bandwidth: 0.0,
    };
    splitter.split(bins, MAX_SPLIT_DEPTH);
    report.bandwidth_log = splitter.bandwidth;
    let found = splitter.modes;
    report.unimodal = found.len() == 1;
    // One outlier is not a peak, nor a spike of one.
    let spikes: Vec<Mode> = found.iter().copied().filter(|mode| mode.count >= config.min_mode_count).collect();
    let heavy = |mode: &Mode| config.min_total_fraction.is_some_and(|share| mode.total_fraction >= share);
    // Clusters of identical values are peaks of their own, never a lump's fine structure.
    let identical = splitter.identical.iter().map(|&mode| (mode, vec![mode]));
    let mut kept: Vec<(Mode, Vec<Mode>)> = coarsen(bins, &spikes, config)
        .into_iter()
        .chain(identical)
        .filter(|(mode, _)| mode.fraction >= config.min_fraction || heavy(mode))
        .collect();
    kept.sort_by(|a, b| a.0.value.total_cmp(&b.0.value));
    if kept.is_empty() {
        // Every mode was below the mass floor (a flat, ragged distribution): keep the largest.
        if let Some(biggest) = found.iter().copied().max_by_key(|mode| mode.count) {
            kept = vec![(biggest, Vec::new())];
        }
    }
    for (index, (mode, spikes)) in kept.into_iter().enumerate() {
        report.modes.push(mode);
        if spikes.len() > 1 {
            let step = lattice_step(&spikes);
            report.fine_structure.push(FineStructure { mode: index, spikes, step });
        }
    }
    report.near_multiples = near_multiples(&report.modes, config);
    report
}

/// How often a piece may be split again. Each level needs a significant dip, so this only
/// bounds pathological input; three levels already separate µs, ms and s clusters.
const MAX_SPLIT_DEPTH: u32 = 4;

/// Splits bins into modes, recursively, collecting them in `modes`.
struct Splitter<'a> {
    config: &'a ModeConfig,
    /// Count and sum of the whole input: fractions are relative to these.
    grand_total: f64,
    grand_sum: f64,
    modes: Vec<Mode>,
    /// Clusters of identical values found inside a lump (see [`identical_bins`]).
    identical: Vec<Mode>,
    /// KDE bandwidth of the first split (0 until something is split).
    bandwidth: f64,
}

impl Splitter<'_> {
    /// The mode of a piece taken whole, valued at `value` (log scale) with that standard error.
    fn whole(&self, bins: &[Bin], value: f64, log_standard_error: f64) -> Mode {
        let total: f64 = bins.iter().map(|bin| bin.weight).sum();
        let sum: f64 = bins.iter().map(|bin| bin.sum).sum();
        Mode {
            value: value.exp(),
            log_standard_error,
            low: bins.first().map_or(0.0, |bin| bin.low.exp()),
            high: bins.last().map_or(0.0, |bin| bin.high.exp()),
            count: total.round() as u64,
            fraction: total / self.grand_total,
            total: sum,
            total_fraction: if self.grand_sum > 0.0 { sum / self.grand_sum } else { 0.0 },
        }
    }

    /// Silverman's rule assumes one Gaussian: on a mixture of µs wake-ups and 250 ms / 500 ms /
    /// 1 s timeouts its bandwidth is as wide as the gaps between the timeouts. So each basin
    /// found at one level is tested again with its own dip and, if still multimodal, split
    /// with its own bandwidth.
    fn split(&mut self, bins: &[Bin], depth_left: u32) {
        let total: f64 = bins.iter().map(|bin| bin.weight).sum();
        if bins.is_empty() {
            return;
        }
        if bins.len() == 1 || (total.round() as u64) < self.config.min_count {
            let mode = self.whole(bins, median_center(bins, total), median_log_standard_error(bins, total));
            self.modes.push(mode);
            return;
        }
        let silverman = silverman(bins, total);
        let floor = typical_width(bins);
        let dip = dip::dip(&cdf_vertices(bins, total));
        let bandwidth = (self.config.bandwidth_scale * silverman).max(floor);
        if depth_left == 0 || total.sqrt() * dip < self.config.dip_critical {
            // Unimodal by count; a rare cluster can still hold most of the time.
            if depth_left > 0 {
                if let Some(boundaries) = self.heavy_boundaries(bins, bandwidth) {
                    self.split_at(bins, &boundaries, depth_left);
                    return;
                }
            }
            // One mode at the highest density. The full Silverman bandwidth is the right one
            // for a single lump; halving it only adds noise to the peak's position.
            let grid = Grid::new(bins, silverman.max(floor));
            let peak = grid.argmax_all();
            let members = grid.peak_bins(peak, bins);
            let identical = identical_bins(members, silverman.max(floor), self.config);
            if !identical.is_empty() {
                // The clusters are peaks; the lump around them is valued without them.
                for &index in &identical {
                    let bin = &members[index..=index];
                    let mode = self.whole(bin, members[index].center(), median_log_standard_error(bin, bin[0].weight));
                    self.identical.push(mode);
                }
                let rest: Vec<Bin> = members
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| !identical.contains(index))
                    .map(|(_, bin)| *bin)
                    .collect();
                let weight: f64 = rest.iter().map(|bin| bin.weight).sum();
                if weight > 0.0 {
                    let grid = Grid::new(&rest, self::silverman(&rest, weight).max(typical_width(&rest)));
                    let peak = grid.argmax_all();
                    let error = grid.peak_log_standard_error(peak, &rest, weight);
                    let mode = self.whole(grid.peak_bins(peak, &rest), grid.refined_peak(peak), error);
                    self.modes.push(mode);
                }
                return;
            }
            let error = grid.peak_log_standard_error(peak, bins, total);
            let mode = self.whole(members, grid.refined_peak(peak), error);
            self.modes.push(mode);
            return;
        }
        if self.bandwidth == 0.0 {
            self.bandwidth = bandwidth;
        }
        let grid = Grid::new(bins, bandwidth);
        let peaks = merge_shallow(&grid.density, grid.local_maxima(), self.config.valley_ratio);
        if peaks.len() < 2 {
            let peak = peaks.first().copied().unwrap_or_else(|| grid.argmax_all());
            let error = grid.peak_log_standard_error(peak, bins, total);
            let mode = self.whole(grid.peak_bins(peak, bins), grid.refined_peak(peak), error);
            self.modes.push(mode);
            return;
        }
        // Basin boundaries: the lowest density between adjacent surviving peaks.
        let boundaries: Vec<f64> =
            peaks.windows(2).map(|pair| grid.x(valley(&grid.density, pair[0], pair[1]))).collect();
        self.split_at(bins, &boundaries, depth_left);
    }

    /// Splits `bins` at the log-scale `boundaries` (increasing) and splits each piece again.
    fn split_at(&mut self, bins: &[Bin], boundaries: &[f64], depth_left: u32) {
        let mut start = 0;
        for index in 0..=boundaries.len() {
            let end = match boundaries.get(index) {
                Some(&boundary) => start + bins[start..].partition_point(|bin| bin.center() < boundary),
                None => bins.len(),
            };
            self.split(&bins[start..end], depth_left - 1);
            start = end;
        }
    }

    /// Where to cut a piece the dip test kept whole so that rare clusters holding a large share
    /// of the time stand apart: around each basin of the KDE (at the split bandwidth) that
    /// holds at least `min_total_fraction` of the whole input's sum and
    /// [`ModeConfig::min_mode_count`] values, is not the piece's most populous basin, and is
    /// separated from both neighbours by a nearly empty valley. `None`: nothing to cut.
    fn heavy_boundaries(&self, bins: &[Bin], bandwidth: f64) -> Option<Vec<f64>> {
        let share = self.config.min_total_fraction?;
        if self.grand_sum <= 0.0 {
            return None;
        }
        let grid = Grid::new(bins, bandwidth);
        let peaks = merge_shallow(&grid.density, grid.local_maxima(), self.config.valley_ratio);
        if peaks.len() < 2 {
            return None;
        }
        let valleys: Vec<usize> = peaks.windows(2).map(|pair| valley(&grid.density, pair[0], pair[1])).collect();
        let mut basins: Vec<(f64, f64)> = Vec::with_capacity(peaks.len());
        let mut start = 0;
        for index in 0..peaks.len() {
            let end = match valleys.get(index) {
                Some(&at) => start + bins[start..].partition_point(|bin| bin.center() < grid.x(at)),
                None => bins.len(),
            };
            let piece = &bins[start..end];
            basins.push((piece.iter().map(|bin| bin.weight).sum(), piece.iter().map(|bin| bin.sum).sum()));
            start = end;
        }
        let most_populous = basins.iter().enumerate().max_by(|a, b| a.1 .0.total_cmp(&b.1 .0)).map(|(index, _)| index);
        let mut cut = vec![false; valleys.len()];
        for (index, &(count, sum)) in basins.iter().enumerate() {
            let heavy = Some(index) != most_populous
                && count.round() as u64 >= self.config.min_mode_count
                && sum / self.grand_sum >= share;
            let empty_beside = |at: Option<&usize>| {
                at.is_none_or(|&at| grid.density[at] <= HEAVY_VALLEY_RATIO * grid.density[peaks[index]])
            };
            let left = index.checked_sub(1).map(|left| &valleys[left]);
            if heavy && empty_beside(left) && empty_beside(valleys.get(index)) {
                if index > 0 {
                    cut[index - 1] = true;
                }
                if index < valleys.len() {
                    cut[index] = true;
                }
            }
        }
        let boundaries: Vec<f64> =
            valleys.iter().zip(&cut).filter(|(_, &cut)| cut).map(|(&at, _)| grid.x(at)).collect();
        (!boundaries.is_empty()).then_some(boundaries)
    }
}

/// Groups adjacent modes closer than [`ModeConfig::fine_ratio`] into coarse modes: each group
/// becomes one mode over the group's basins, valued at the peak of a KDE smooth enough to
/// bridge the gaps between its spikes, and keeps its spikes (just the one when alone). A group
/// one of whose spikes holds at least half its values is valued at that spike: the bridging
/// KDE would put it between the spikes, where nothing may lie (a 22 ms lump split by a late
/// time slice into spikes at 22.2 and 25.7 ms was valued 23.4 ms, 5 % off where its requests
/// were).
fn coarsen(bins: &[Bin], modes: &[Mode], config: &ModeConfig) -> Vec<(Mode, Vec<Mode>)> {
    let mut groups: Vec<Vec<Mode>> = Vec::new();
    for &mode in modes {
        match groups.last_mut() {
            Some(group) if group.last().is_some_and(|last| mode.value / last.value < config.fine_ratio) => {
                group.push(mode);
            }
            _ => groups.push(vec![mode]),
        }
    }
    groups
        .into_iter()
        .map(|spikes| {
            // A group is never empty: it starts with the mode that opened it.
            let (first, last) = (spikes[0], spikes[spikes.len() - 1]);
            if spikes.len() == 1 {
                return (first, spikes);
            }
            let sum = |field: fn(&Mode) -> f64| spikes.iter().map(field).sum::<f64>();
            let (low, high) = (first.low.ln(), last.high.ln());
            let members: Vec<Bin> = bins
                .iter()
                .copied()
                .filter(|bin| bin.center() >= low - 1e-12 && bin.center() <= high + 1e-12)
                .collect();
            let widest_gap = spikes.windows(2).map(|pair| (pair[1].value / pair[0].value).ln()).fold(0.0f64, f64::max);
            let count: u64 = spikes.iter().map(|mode| mode.count).sum();
            let heaviest = spikes.iter().max_by_key(|mode| mode.count).filter(|mode| mode.count * 2 >= count);
            let (value, log_standard_error) = if let Some(spike) = heaviest {
                (spike.value, spike.log_standard_error)
            } else if members.is_empty() {
                (first.value, first.log_standard_error)
            } else {
                let weight: f64 = members.iter().map(|bin| bin.weight).sum();
                let bandwidth = silverman(&members, weight).max(widest_gap).max(typical_width(&members));
                let grid = Grid::new(&members, bandwidth);
                let peak = grid.argmax_all();
                (grid.refined_peak(peak).exp(), grid.peak_log_standard_error(peak, &members, weight))
            };
            let coarse = Mode {
                value,
                log_standard_error,
                low: first.low,
                high: last.high,
                count,
                fraction: sum(|mode| mode.fraction),
                total: sum(|mode| mode.total),
                total_fraction: sum(|mode| mode.total_fraction),
            };
            (coarse, spikes)
        })
        .collect()
}

/// The lattice spacing of three or more spikes: the smallest gap, when every gap is within a
/// quarter of a whole multiple of it (a tick the clock may skip).
fn lattice_step(spikes: &[Mode]) -> Option<f64> {
    if spikes.len() < 3 {
        return None;
    }
    let gaps: Vec<f64> = spikes.windows(2).map(|pair| pair[1].value - pair[0].value).collect();
    let smallest = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    if smallest <= 0.0 || !smallest.is_finite() {
        return None;
    }
    let on_lattice = gaps.iter().all(|gap| {
        let multiple = gap / smallest;
        (multiple - multiple.round()).abs() <= 0.25
    });
    // The step is the span over the ticks it covers: less sensitive to one spike's jitter
    // than the smallest gap alone.
    let ticks: f64 = gaps.iter().map(|gap| (gap / smallest).round()).sum();
    on_lattice.then(|| (spikes[spikes.len() - 1].value - spikes[0].value) / ticks)
}

/// Vertices of the piecewise-linear CDF: mass rises evenly across each bin, flat between.
fn cdf_vertices(bins: &[Bin], total: f64) -> Vec<(f64, f64)> {
    let mut vertices: Vec<(f64, f64)> = Vec::with_capacity(bins.len() * 2);
    let mut cumulative = 0.0;
    for bin in bins {
        match vertices.last() {
            Some(&(x, _)) if x >= bin.low => {}
            _ => vertices.push((bin.low, cumulative / total)),
        }
        cumulative += bin.weight;
        vertices.push((bin.high, cumulative / total));
    }
    vertices
}

/// Value (log scale) below which a fraction `q` of the mass lies, interpolating in a bin.
fn weighted_quantile(bins: &[Bin], total: f64, q: f64) -> f64 {
    let target = q * total;
    let mut cumulative = 0.0;
    for bin in bins {
        if cumulative + bin.weight >= target {
            let inside = if bin.weight > 0.0 { (target - cumulative) / bin.weight } else { 0.0 };
            return bin.low + (bin.high - bin.low) * inside;
        }
        cumulative += bin.weight;
    }
    bins.last().map_or(0.0, |bin| bin.high)
}

/// The center of the bin holding the median: the best single value for a piece too small
/// or too narrow for a KDE (a bin's edges are not values anyone measured).
fn median_center(bins: &[Bin], total: f64) -> f64 {
    let mut cumulative = 0.0;
    for bin in bins {
        cumulative += bin.weight;
        if cumulative >= total / 2.0 {
            return bin.center();
        }
    }
    bins.last().map_or(0.0, Bin::center)
}

/// Indices of the bins in `bins` (one lump, KDE `bandwidth`) that hold a cluster of identical
/// values: twenty sleeps of exactly 10 ms among sleeps of every length. A bin is one when it is
/// much narrower than the lump's bandwidth (a quarter), holds at least
/// [`ModeConfig::min_mode_count`] values, and holds at least [`IDENTICAL_EXCESS`] times the
/// count its neighbours within a bandwidth (on the denser side) predict, by at least [`IDENTICAL_SIGMAS`] Poisson
/// standard deviations (of at least one value). A lump's own peak is smooth: its bins hold what
/// their neighbours predict, so it has none.
fn identical_bins(bins: &[Bin], bandwidth: f64, config: &ModeConfig) -> Vec<usize> {
    let mut found = Vec::new();
    for (index, bin) in bins.iter().enumerate() {
        let width = bin.high - bin.low;
        if bin.weight < config.min_mode_count as f64 || width > bandwidth / 4.0 {
            continue;
        }
        let center = bin.center();
        let first = bins.partition_point(|other| other.center() < center - bandwidth);
        let last = bins.partition_point(|other| other.center() <= center + bandwidth);
        // The denser side predicts: at a lump's sharp edge (a service time's floor) the empty
        // side would make the first bin look like a spike.
        let side = |range: &[Bin]| range.iter().map(|other| other.weight).sum::<f64>() / bandwidth * width;
        let expected = side(&bins[first..index]).max(side(&bins[index + 1..last]));
        if bin.weight >= IDENTICAL_EXCESS * expected
            && bin.weight - expected >= IDENTICAL_SIGMAS * expected.max(1.0).sqrt()
        {
            found.push(index);
        }
    }
    found
}

/// A cluster of identical values holds at least this many times what its neighbours predict...
pub const IDENTICAL_EXCESS: f64 = 5.0;
/// ... and exceeds it by this many Poisson standard deviations: noise in a lump never does.
pub const IDENTICAL_SIGMAS: f64 = 6.0;

/// The standard error of a piece's median on the log scale, for pieces too small or too narrow
/// for a KDE: 1.25 σ / √n (the median of a normal sample), where σ counts each bin's width as
/// a uniform spread of its values (a bin's edges are all that is known of them).
fn median_log_standard_error(bins: &[Bin], total: f64) -> f64 {
    let mean = bins.iter().map(|bin| bin.center() * bin.weight).sum::<f64>() / total;
    let variance = bins
        .iter()
        .map(|bin| ((bin.center() - mean).powi(2) + (bin.high - bin.low).powi(2) / 12.0) * bin.weight)
        .sum::<f64>()
        / total;
    1.25 * variance.sqrt() / total.sqrt()
}

/// Silverman's rule-of-thumb bandwidth on the log scale.
fn silverman(bins: &[Bin], total: f64) -> f64 {
    let mean = bins.iter().map(|bin| bin.center() * bin.weight).sum::<f64>() / total;
    let variance = bins.iter().map(|bin| (bin.center() - mean).powi(2) * bin.weight).sum::<f64>() / total;
    let iqr = weighted_quantile(bins, total, 0.75) - weighted_quantile(bins, total, 0.25);
    let spread = match (variance.sqrt(), iqr / 1.34) {
        (sd, robust) if robust > 0.0 => sd.min(robust),
        (sd, _) => sd,
    };
    0.9 * spread * total.powf(-0.2)
}

/// The median bin width: a KDE narrower than its input's resolution would find a "peak" in
/// every bucket, so bandwidths never go below this.
fn typical_width(bins: &[Bin]) -> f64 {
    let mut widths: Vec<f64> = bins.iter().map(|bin| bin.high - bin.low).collect();
    widths.sort_by(f64::total_cmp);
    widths[widths.len() / 2]
}

/// The KDE evaluated on an even grid of log-scale positions.
struct Grid {
    start: f64,
    step: f64,
    bandwidth: f64,
    density: Vec<f64>,
}

/// Upper bound on grid points; the step grows for very wide ranges instead.
const MAX_GRID_POINTS: usize = 8192;

impl Grid {
    fn new(bins: &[Bin], bandwidth: f64) -> Self {
        let (first, last) = (bins[0].low, bins[bins.len() - 1].high);
        let start = first - 3.0 * bandwidth;
        let span = last + 3.0 * bandwidth - start;
        let step = (bandwidth / 4.0).max(span / MAX_GRID_POINTS as f64);
        let points = (span / step).ceil() as usize + 1;
        let mut density = vec![0.0f64; points];
        // Only grid points within 4 bandwidths of a bin get its mass; beyond that a Gaussian
        // contributes less than 0.04 % of its peak.
        let reach = (4.0 * bandwidth / step).ceil() as isize;
        for bin in bins {
            // A bin wider than half a bandwidth (1 µs steps at a few µs are wide on the log
            // scale) is spread over its width; as one point it would be a spike of its own.
            let pieces = ((bin.high - bin.low) / (bandwidth / 2.0)).ceil().clamp(1.0, 64.0) as usize;
            let weight = bin.weight / pieces as f64;
            for piece in 0..pieces {
                let center = if pieces == 1 {
                    bin.center()
                } else {
                    bin.low + (bin.high - bin.low) * (piece as f64 + 0.5) / pieces as f64
                };
                let nearest = ((center - start) / step).round() as isize;
                let from = (nearest - reach).max(0) as usize;
                let to = ((nearest + reach).max(0) as usize).min(points - 1);
                for (index, slot) in density.iter_mut().enumerate().take(to + 1).skip(from) {
                    let z = (start + index as f64 * step - center) / bandwidth;
                    *slot += weight * (-0.5 * z * z).exp();
                }
            }
        }
        Self { start, step, bandwidth, density }
    }

    fn x(&self, index: usize) -> f64 {
        self.start + index as f64 * self.step
    }

    fn argmax_all(&self) -> usize {
        let mut best = 0;
        for (index, &value) in self.density.iter().enumerate() {
            if value > self.density[best] {
                best = index;
            }
        }
        best
    }

    /// Local maxima; a plateau counts once, at its left end.
    fn local_maxima(&self) -> Vec<usize> {
        let density = &self.density;
        let mut maxima = Vec::new();
        for index in 0..density.len() {
            let left = if index == 0 { f64::NEG_INFINITY } else { density[index - 1] };
            let mut right_index = index + 1;
            while right_index < density.len() && density[right_index] == density[index] {
                right_index += 1;
            }
            let right = density.get(right_index).copied().unwrap_or(f64::NEG_INFINITY);
            if density[index] > left && density[index] > right && density[index] > 0.0 {
                maxima.push(index);
            }
        }
        maxima
    }

    /// The standard error of the peak at `index` as an estimate of the mode's position, on the
    /// log scale. A kernel estimate's mode has variance `f R(K') / (n h³ f''²)` (Parzen 1962;
    /// R(K') = 1 / (4 √π) for the Gaussian kernel), with `f` and `f''` the density and its
    /// curvature at the peak: a sharp, crowded peak is placed precisely, a flat or sparse one is
    /// not. Here `n f` is the grid's density over `h √(2π)`, so n cancels. Values are placed at
    /// their bin's center, so a bin's width over √12 (of `bins`' median) is added in quadrature:
    /// no peak is placed more precisely than its input was binned. A peak without curvature
    /// (at the grid's edge, or flat) falls back to the median's error of `bins`.
    fn peak_log_standard_error(&self, index: usize, bins: &[Bin], total: f64) -> f64 {
        let fallback = || median_log_standard_error(bins, total);
        if index == 0 || index + 1 >= self.density.len() {
            return fallback();
        }
        let (left, middle, right) = (self.density[index - 1], self.density[index], self.density[index + 1]);
        let curvature = (left - 2.0 * middle + right) / (self.step * self.step);
        if curvature >= 0.0 || middle <= 0.0 {
            return fallback();
        }
        let h = self.bandwidth;
        let variance = std::f64::consts::SQRT_2 / 4.0 * middle / (h * h * curvature * curvature);
        let width = typical_width(bins);
        (variance + width * width / 12.0).sqrt()
    }

    /// The bins of `bins` (those the grid was made from) in the peak at `index`: between the
    /// nearest grid points on either side where the density falls below [`PEAK_EDGE_RATIO`] of
    /// the peak's. Never empty: the bin nearest the peak is always in.
    fn peak_bins<'b>(&self, index: usize, bins: &'b [Bin]) -> &'b [Bin] {
        let floor = PEAK_EDGE_RATIO * self.density[index];
        let mut left = index;
        while left > 0 && self.density[left] >= floor {
            left -= 1;
        }
        let mut right = index;
        while right + 1 < self.density.len() && self.density[right] >= floor {
            right += 1;
        }
        let (low, high) = (self.x(left), self.x(right));
        let start = bins.partition_point(|bin| bin.center() < low);
        let end = bins.partition_point(|bin| bin.center() <= high);
        if start < end {
            return &bins[start..end];
        }
        let peak = self.x(index);
        let nearest = bins.partition_point(|bin| bin.center() < peak).min(bins.len() - 1);
        &bins[nearest..=nearest]
    }

    /// The peak position refined by a parabola through the grid point and its neighbours.
    fn refined_peak(&self, index: usize) -> f64 {
        let x = self.x(index);
        if index == 0 || index + 1 >= self.density.len() {
            return x;
        }
        let (left, middle, right) = (self.density[index - 1], self.density[index], self.density[index + 1]);
        let curvature = left - 2.0 * middle + right;
        if curvature >= 0.0 {
            return x;
        }
        x + 0.5 * (left - right) / curvature * self.step
    }
}

/// Index of the lowest density strictly between two peaks.
fn valley(density: &[f64], left: usize, right: usize) -> usize {
    let mut lowest = left;
    for index in left..=right {
        if density[index] < density[lowest] {
            lowest = index;
        }
    }
    lowest
}

/// Repeatedly merges the adjacent pair with the shallowest valley while that valley is above
/// `valley_ratio` of the lower peak; the higher peak survives.
fn merge_shallow(density: &[f64], mut peaks: Vec<usize>, valley_ratio: f64) -> Vec<usize> {
    loop {
        let shallowest = peaks
            .windows(2)
            .enumerate()
            .map(|(position, pair)| {
                let lower_peak = density[pair[0]].min(density[pair[1]]);
                let depth = density[valley(density, pair[0], pair[1])] / lower_peak;
                (position, depth)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match shallowest {
            Some((position, depth)) if depth > valley_ratio => {
                let loser =
                    if density[peaks[position]] >= density[peaks[position + 1]] { position + 1 } else { position };
                peaks.remove(loser);
            }
            _ => return peaks,
        }
    }
}

/// Largest multiple worth flagging: beyond 10 a retry story is no longer the likely cause.
pub const MAX_MULTIPLE: u32 = 10;

/// For each mode, the nearest lower mode it is a near-integer multiple of (1 s ≈ 2 × 500 ms
/// rather than also 4 × 250 ms): the ratio is within [`ModeConfig::ratio_standard_errors`] of
/// its standard error of the integer, and that many standard errors are within
/// [`ModeConfig::ratio_tolerance`] (a ratio known only to ±0.5 is near some integer by chance).
fn near_multiples(modes: &[Mode], config: &ModeConfig) -> Vec<NearMultiple> {
    let mut found = Vec::new();
    for upper in 1..modes.len() {
        for lower in (0..upper).rev() {
            let ratio = modes[upper].value / modes[lower].value;
            let multiple = ratio.round();
            let (upper_error, lower_error) = (modes[upper].log_standard_error, modes[lower].log_standard_error);
            // The log of the ratio is a difference of independent estimates.
            let ratio_standard_error = ratio * upper_error.hypot(lower_error);
            let margin = config.ratio_standard_errors * ratio_standard_error;
            if (2.0..=f64::from(MAX_MULTIPLE)).contains(&multiple)
                && margin <= config.ratio_tolerance
                && (ratio - multiple).abs() <= margin
            {
                found.push(NearMultiple { lower, upper, multiple: multiple as u32, ratio, ratio_standard_error });
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod tests;
