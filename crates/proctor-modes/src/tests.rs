//! Planted-mode tests: mixtures with known peaks must be found within 5 %, a single lump must
//! give exactly one mode. A fixed-seed generator keeps every run identical.

use super::*;

/// SplitMix64: tiny, deterministic, good enough to draw test samples (the corpus uses it too).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Log-normal around `center` with relative spread `sigma`.
    pub(crate) fn around(&mut self, center: f64, sigma: f64) -> f64 {
        center * (sigma * self.normal()).exp()
    }
}

/// `(center, relative spread, count)` lumps, shuffled together.
fn mixture(seed: u64, lumps: &[(f64, f64, usize)]) -> Vec<f64> {
    let mut rng = Rng(seed);
    let mut values = Vec::new();
    for &(center, sigma, count) in lumps {
        for _ in 0..count {
            values.push(rng.around(center, sigma));
        }
    }
    values
}

fn check_modes(report: &ModeReport, expected: &[f64]) {
    let found: Vec<f64> = report.modes.iter().map(|mode| mode.value).collect();
    assert_eq!(found.len(), expected.len(), "found {found:?}, expected {expected:?}");
    for (value, want) in found.iter().zip(expected) {
        assert!((value / want - 1.0).abs() < 0.05, "found {found:?}, expected {expected:?}");
    }
}

/// `(lower, upper, multiple)` of each near-integer ratio claimed.
fn near_pairs(report: &ModeReport) -> Vec<(usize, usize, u32)> {
    report.near_multiples.iter().map(|pair| (pair.lower, pair.upper, pair.multiple)).collect()
}

#[test]
fn finds_the_three_timeouts() {
    // Seconds: the futex waits of the motivating hunt, over a floor of fast wake-ups.
    let values = mixture(1, &[(0.250, 0.02, 600), (0.500, 0.02, 300), (1.0, 0.02, 150), (20e-6, 0.3, 900)]);
    let report = find_modes_in_values(&values, &ModeConfig::default());
    assert!(!report.unimodal);
    check_modes(&report, &[20e-6, 0.250, 0.500, 1.0]);
    let counts: Vec<u64> = report.modes.iter().map(|mode| mode.count).collect();
    assert!(counts[1].abs_diff(600) < 20 && counts[3].abs_diff(150) < 20, "{counts:?}");
}

#[test]
fn flags_near_integer_ratios() {
    let values = mixture(2, &[(250.0, 0.02, 500), (500.0, 0.02, 500), (1700.0, 0.02, 500)]);
    let report = find_modes_in_values(&values, &ModeConfig::default());
    check_modes(&report, &[250.0, 500.0, 1700.0]);
    let pairs = near_pairs(&report);
    // 1700 / 250 = 6.8 and 1700 / 500 = 3.4 are not near integers.
    assert_eq!(pairs, vec![(0, 1, 2)], "{report:?}");
}

#[test]
fn one_lump_is_exactly_one_mode() {
    for seed in 10..20 {
        let values = mixture(seed, &[(0.003, 0.5, 5000)]);
        let report = find_modes_in_values(&values, &ModeConfig::default());
        assert!(report.unimodal, "seed {seed}: dip {}", report.dip);
        assert_eq!(report.modes.len(), 1);
        // A wide lump's peak is less certain than a timeout's: 10 % here.
        assert!((report.modes[0].value / 0.003 - 1.0).abs() < 0.1, "{report:?}");
    }
}

#[test]
fn skewed_lump_is_one_mode() {
    // Uniform on a linear scale is skewed on the log scale but still unimodal.
    let mut rng = Rng(7);
    let values: Vec<f64> = (0..3000).map(|_| 1.0 + 99.0 * rng.uniform()).collect();
    let report = find_modes_in_values(&values, &ModeConfig::default());
    assert_eq!(report.modes.len(), 1, "{report:?}");
}

#[test]
fn small_modes_are_dropped() {
    let values = mixture(3, &[(1.0, 0.03, 2000), (100.0, 0.03, 20)]);
    let report = find_modes_in_values(&values, &ModeConfig::default());
    check_modes(&report, &[1.0]);
    let kept = mixture(3, &[(1.0, 0.03, 2000), (100.0, 0.03, 100)]);
    check_modes(&find_modes_in_values(&kept, &ModeConfig::default()), &[1.0, 100.0]);
}

#[test]
fn histogram_input_agrees_with_values() {
    let values = mixture(4, &[(250e6, 0.02, 400), (500e6, 0.02, 200), (1e9, 0.02, 100)]);
    let mut histogram = LogHistogram::new();
    for value in &values {
        histogram.record(*value as u64);
    }
    let report = find_modes_in_histogram(&histogram, &ModeConfig::default());
    check_modes(&report, &[250e6, 500e6, 1e9]);
    assert_eq!(report.count, 700);
}

#[test]
fn degenerate_inputs() {
    let config = ModeConfig::default();
    let empty = find_modes_in_values(&[], &config);
    assert!(empty.modes.is_empty());
    let junk = find_modes_in_values(&[0.0, -1.0, f64::NAN, f64::INFINITY], &config);
    assert!(junk.modes.is_empty());
    let same = find_modes_in_values(&[5.0; 1000], &config);
    check_modes(&same, &[5.0]);
    let mut zeros = LogHistogram::new();
    zeros.record_n(0, 50);
    zeros.record_n(1_000_000, 50);
    let report = find_modes_in_histogram(&zeros, &config);
    assert_eq!(report.modes.len(), 2, "{report:?}");
}

#[test]
fn coarse_resolution_is_not_a_set_of_spikes() {
    // strace prints whole microseconds: 2, 3, 4, 5 µs are one lump, not four modes.
    let mut histogram = LogHistogram::new();
    for (micros, count) in [(2u64, 5u64), (3, 12), (4, 20), (5, 9), (6, 3), (8, 1)] {
        histogram.record_n(micros * 1000, count);
    }
    let config = ModeConfig { resolution: Some(1000.0), ..ModeConfig::default() };
    let report = find_modes_in_histogram(&histogram, &config);
    assert_eq!(report.modes.len(), 1, "{report:?}");
    assert!((report.modes[0].value / 4000.0 - 1.0).abs() < 0.15, "{report:?}");
    // With zeros and a far lump, both are kept.
    histogram.record_n(0, 40);
    histogram.record_n(250_000_000, 40);
    let report = find_modes_in_histogram(&histogram, &config);
    assert_eq!(report.modes.len(), 3, "{report:?}");
}

#[test]
fn one_outlier_is_not_a_peak() {
    let mut values = mixture(5, &[(0.25, 0.01, 40)]);
    values.push(3.8);
    let report = find_modes_in_values(&values, &ModeConfig::default());
    check_modes(&report, &[0.25]);
}

#[test]
fn multiples_name_the_nearest_lower_mode() {
    let values = mixture(6, &[(250.0, 0.02, 400), (500.0, 0.02, 300), (1000.0, 0.02, 200)]);
    let report = find_modes_in_values(&values, &ModeConfig::default());
    let pairs = near_pairs(&report);
    assert_eq!(pairs, vec![(0, 1, 2), (1, 2, 2)]);
}

/// The Wolfram case: a hundred fast calls and five 250 ms waits. By count the waits are a
/// speck the dip test cannot see; by time they are everything.
#[test]
fn a_rare_cluster_that_holds_the_time_is_a_mode() {
    let values = mixture(8, &[(40e-6, 0.2, 100), (0.25, 0.01, 5)]);
    let by_count = find_modes_in_values(&values, &ModeConfig::default());
    check_modes(&by_count, &[40e-6]);
    // The one peak is the fast calls': the waits, past an empty stretch, are not in it
    // (issue 32 item 6: its shares were 100 % of calls and of time).
    let fast = by_count.modes[0];
    assert_eq!(fast.count, 100, "{by_count:?}");
    assert!(fast.total_fraction < 0.01 && fast.high < 1e-3, "{by_count:?}");

    let report = find_modes_in_values(&values, &ModeConfig::durations());
    check_modes(&report, &[40e-6, 0.25]);
    let (fast, slow) = (report.modes[0], report.modes[1]);
    assert_eq!((fast.count, slow.count), (100, 5), "{report:?}");
    assert!((slow.fraction - 5.0 / 105.0).abs() < 1e-9, "{slow:?}");
    assert!(slow.total_fraction > 0.99 && fast.total_fraction < 0.01, "{report:?}");
    assert!((slow.total + fast.total - report.total).abs() < 1e-9 * report.total, "{report:?}");

    // Rarer still, under the 2 % count floor: the time keeps it.
    let rarer = mixture(9, &[(40e-6, 0.2, 1000), (0.25, 0.01, 5)]);
    check_modes(&find_modes_in_values(&rarer, &ModeConfig::durations()), &[40e-6, 0.25]);
    // Fewer than `min_mode_count` values are an outlier, however long.
    let single = mixture(10, &[(40e-6, 0.2, 100), (0.25, 0.01, 2)]);
    check_modes(&find_modes_in_values(&single, &ModeConfig::durations()), &[40e-6]);
}

/// Counting time must not turn the tail of one lump into a second mode.
#[test]
fn a_heavy_tail_without_a_gap_stays_one_mode() {
    for seed in 10..20 {
        let values = mixture(seed, &[(0.003, 0.5, 5000)]);
        let report = find_modes_in_values(&values, &ModeConfig::durations());
        assert_eq!(report.modes.len(), 1, "seed {seed}: {report:?}");
    }
    let mut rng = Rng(7);
    let wide: Vec<f64> = (0..3000).map(|_| (1e-6f64.ln() + 12.0 * rng.uniform()).exp()).collect();
    let report = find_modes_in_values(&wide, &ModeConfig::durations());
    assert_eq!(report.modes.len(), 1, "log-uniform over five decades: {report:?}");
}

/// 300 request latencies from a server whose waits end on 4 ms timer ticks: a 64 ms lump
/// lands on 60, 64, 68 and 72 ms. A person sees three modes; the spikes are a note.
fn quantized_latencies_ms() -> Vec<f64> {
    let mut rng = Rng(11);
    let mut values = Vec::new();
    for (center, count) in [(65.0, 180), (132.0, 90), (224.0, 30)] {
        for _ in 0..count {
            let tick = if center < 100.0 { (rng.around(center, 0.05) / 4.0).round() * 4.0 } else { center };
            values.push(rng.around(tick, 0.002));
        }
    }
    values
}

#[test]
fn a_timer_quantized_lump_is_one_coarse_mode_with_its_step() {
    let values = quantized_latencies_ms();
    let every_spike = find_modes_in_values(&values, &ModeConfig { fine_ratio: 1.0, ..ModeConfig::default() });
    assert!(every_spike.modes.len() >= 5, "the comb is real at full resolution: {every_spike:?}");

    let report = find_modes_in_values(&values, &ModeConfig::default());
    check_modes(&report, &[64.0, 132.0, 224.0]);
    assert_eq!(report.fine_structure.len(), 1, "{:?}", report.fine_structure);
    let fine = &report.fine_structure[0];
    assert_eq!(fine.mode, 0);
    assert!(fine.spikes.len() >= 3, "{fine:?}");
    let step = fine.step.unwrap_or_else(|| panic!("evenly spaced spikes have a step: {fine:?}"));
    assert!((step - 4.0).abs() < 0.2, "{fine:?}");
    let counts: u64 = fine.spikes.iter().map(|spike| spike.count).sum();
    assert_eq!(counts, report.modes[0].count, "the coarse mode is its spikes: {report:?}");
    let (low, high) = (fine.spikes[0].low, fine.spikes[fine.spikes.len() - 1].high);
    assert_eq!((report.modes[0].low, report.modes[0].high), (low, high));
}

#[test]
fn timeouts_and_retries_are_not_fine_structure() {
    let values = mixture(12, &[(0.250, 0.01, 300), (0.500, 0.01, 200), (0.750, 0.01, 100)]);
    let report = find_modes_in_values(&values, &ModeConfig::durations());
    check_modes(&report, &[0.25, 0.5, 0.75]);
    assert!(report.fine_structure.is_empty(), "{:?}", report.fine_structure);
}

/// Issue 32: three designed modes at 22, 90 and 180 ms printed "91.4 ms ≈ 4 × 23.3 ms". 90 / 22
/// is 4.09, and with a few hundred values per mode that is measured well enough to say it is
/// not 4; 180 / 90 is 2 within its error.
#[test]
fn a_ratio_measured_off_the_integer_is_not_a_multiple() {
    let values = mixture(13, &[(22.0, 0.03, 400), (90.0, 0.03, 400), (180.0, 0.03, 400)]);
    let report = find_modes_in_values(&values, &ModeConfig::durations());
    check_modes(&report, &[22.0, 90.0, 180.0]);
    let pairs = near_pairs(&report);
    assert_eq!(pairs, vec![(1, 2, 2)], "{report:?}");
    let claim = report.near_multiples[0];
    assert!((claim.ratio - 2.0).abs() <= 2.0 * claim.ratio_standard_error, "{claim:?}");
}

/// The 22 ms lump of `proctor-probe`'s planted-modes test as a loaded run recorded it (ms):
/// 16 requests a few tenths over the delay, the rest a time slice late or more. The finder
/// splits it into spikes at ~22.2 and ~25.7 ms, closer than `fine_ratio`, so one coarse mode;
/// the spike that holds most of the lump is where the mode is. Valued by the bridging KDE it
/// was 23.5 ms, 5 % from where 16 of its 30 requests were.
#[test]
fn a_coarse_mode_that_one_spike_dominates_is_valued_at_that_spike() {
    let lump = [
        22.128, 22.201, 22.201, 22.207, 22.220, 22.222, 22.230, 22.232, 22.242, 22.248, 22.252, 22.253, 22.269, 22.278,
        22.285, 22.310, 23.913, 24.410, 25.431, 25.462, 25.547, 25.570, 25.674, 25.700, 25.719, 25.745, 26.012, 26.892,
        30.166, 33.996,
    ];
    let mut rng = Rng(22);
    let mut values: Vec<f64> = lump.to_vec();
    for center in [90.3, 180.4] {
        values.extend((0..30).map(|_| rng.around(center, 0.001)));
    }
    let report = find_modes_in_values(&values, &ModeConfig::durations());
    let first = report.modes.first().unwrap_or_else(|| panic!("no modes: {report:?}"));
    assert!(report.fine_structure.iter().any(|f| f.mode == 0 && f.spikes.len() >= 2), "split in spikes: {report:?}");
    assert!((first.value / 22.25 - 1.0).abs() < 0.01, "the 22 ms lump's mode at {:.2} ms: {report:?}", first.value);
}
