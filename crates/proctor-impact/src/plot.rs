//! The arms' latency distributions side by side: a panel per arm that ran, each a histogram
//! of the target's latencies on one shared log-scale axis (20 bins a decade), the height of a
//! bar the share of operations in it on a log scale (so a tail of a few operations in a
//! thousand still shows), with p50, p99 and p99.9 as dashed lines and the maximum as a dot.
//!
//! Pure: the report in, shapes (and through `proctor_plot` the file's bytes) out.

use proctor_plot::axis::{log_ticks, seconds_label};
use proctor_plot::label::{centre_inside, elide_end};
use proctor_plot::{Anchor, Shape, BLUE, GRID, INK, ORANGE, VERMILLION};

pub use proctor_plot::{Format, UnknownFormat};

use crate::report::ImpactReport;
use crate::stats::bucket_value;

const PANEL_WIDTH: f64 = 300.0;
const GAP: f64 = 24.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 66.0;
const PLOT_HEIGHT: f64 = 260.0;
const BOTTOM: f64 = 70.0;
const BINS_PER_DECADE: f64 = 20.0;

/// The picture's size in pixels for `panels` panels.
fn size(panels: usize) -> (f64, f64) {
    let panels = panels.max(1) as f64;
    (LEFT + panels * PANEL_WIDTH + (panels - 1.0) * GAP + RIGHT, TOP + PLOT_HEIGHT + BOTTOM)
}

/// The shapes of the plot, and its width and height.
pub fn shapes(report: &ImpactReport, title: &str) -> (Vec<Shape>, f64, f64) {
    // Each arm that ran: its name, its bins (log10 of the bin's lower edge, operations), its
    // percentiles and its total.
    let mut panels = Vec::new();
    for (arm, blocks) in report.arms.iter().zip(&report.blocks) {
        let Some(latency) = arm.latency else { continue };
        let mut bins: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
        for block in blocks {
            for &(bucket, count) in &block.buckets {
                let seconds = (bucket_value(bucket) / 1e9).max(1e-9);
                *bins.entry((seconds.log10() * BINS_PER_DECADE).floor() as i64).or_default() += count;
            }
        }
        panels.push((arm, bins, latency));
    }
    let (width, height) = size(panels.len());
    let mut out = vec![Shape::title(LEFT, 20.0, elide_end(title, proctor_plot::TITLE_SIZE, width - LEFT - RIGHT))];
    out.push(Shape::text(
        LEFT,
        38.0,
        "share of operations by latency (log-log); dashed: p50, p99, p99.9 · dot: max",
        INK,
        Anchor::Start,
    ));
    if panels.is_empty() {
        out.push(Shape::text(width / 2.0, TOP + PLOT_HEIGHT / 2.0, "no operations", INK, Anchor::Middle));
        return (out, width, height);
    }
    // The shared axes: whole decades around every arm's fastest and slowest bin; shares from
    // the smallest one any bar has up to 1.
    let first = panels.iter().filter_map(|p| p.1.keys().next()).min().copied().unwrap_or(-60) as f64 / BINS_PER_DECADE;
    let last = panels.iter().filter_map(|p| p.1.keys().last()).max().copied().unwrap_or(0) as f64 / BINS_PER_DECADE;
    let (x_low, x_high) = (first.floor(), (last + 1.0 / BINS_PER_DECADE).ceil().max(first.floor() + 1.0));
    let most = panels.iter().map(|p| p.2.operations).max().unwrap_or(1).max(1) as f64;
    let y_low = (1.0 / most).log10().floor().min(-1.0);
    let bottom = TOP + PLOT_HEIGHT;
    let y_of = |share: f64| bottom - (share.log10() - y_low) / -y_low * PLOT_HEIGHT;
    // The y axis: a label per decade where there is room.
    let decades = -y_low;
    let every = (decades / (PLOT_HEIGHT / 18.0)).ceil().max(1.0) as i64;
    for decade in (y_low as i64..=0).rev() {
        let y = y_of(10f64.powi(decade as i32));
        out.push(Shape::line(LEFT, y, width - RIGHT, y, GRID));
        if decade % every == 0 {
            out.push(Shape::text(LEFT - 6.0, y + 4.0, share_label(decade), INK, Anchor::End));
        }
    }
    for (index, (arm, bins, latency)) in panels.iter().enumerate() {
        let left = LEFT + index as f64 * (PANEL_WIDTH + GAP);
        let x_of = |log_seconds: f64| left + (log_seconds - x_low) / (x_high - x_low) * PANEL_WIDTH;
        let total = latency.operations.max(1) as f64;
        for (&bin, &count) in bins {
            let x = x_of(bin as f64 / BINS_PER_DECADE);
            let x2 = x_of((bin + 1) as f64 / BINS_PER_DECADE);
            let y = y_of(count as f64 / total);
            out.push(Shape::rect(x, y, (x2 - x - 0.5).max(1.0), bottom - y, BLUE));
        }
        out.push(Shape::line(left, bottom, left + PANEL_WIDTH, bottom, INK));
        out.push(Shape::line(left, TOP, left, bottom, INK));
        let pixels_per_decade = PANEL_WIDTH / (x_high - x_low);
        for (log_seconds, labelled) in log_ticks(x_low, x_high, pixels_per_decade, 56.0) {
            let x = x_of(log_seconds);
            out.push(Shape::line(x, bottom, x, bottom + 4.0, INK));
            if labelled && (log_seconds - log_seconds.round()).abs() < 1e-9 {
                let text = seconds_label(10f64.powf(log_seconds));
                // A label that would have to move off its tick to stay in the panel is left out:
                // on a log axis a label beside its tick reads as another value.
                let centre =
                    centre_inside(x, &text, proctor_plot::LABEL_SIZE, left - GAP / 2.0, left + PANEL_WIDTH + GAP / 2.0);
                if (centre - x).abs() < 0.5 {
                    out.push(Shape::text(x, bottom + 17.0, text, INK, Anchor::Middle));
                }
            }
        }
        for (seconds, color) in
            [(latency.p50_seconds, INK), (latency.p99_seconds, ORANGE), (latency.p999_seconds, VERMILLION)]
        {
            let x = x_of(seconds.max(1e-9).log10());
            out.push(Shape::dashed(x, TOP, x, bottom, color));
        }
        out.push(Shape::dot(x_of(latency.max_seconds.max(1e-9).log10()), bottom - 4.0, 4.0, VERMILLION, Some(INK)));
        // A line of text under (or over) the panel, cut to its width.
        let line = |y: f64, text: &str, color| {
            Shape::text(left, y, elide_end(text, proctor_plot::LABEL_SIZE, PANEL_WIDTH), color, Anchor::Start)
        };
        out.push(line(TOP - 6.0, &arm.name, INK));
        let figures = format!(
            "p99 {} · p99.9 {} · max {}",
            seconds_label(round3(latency.p99_seconds)),
            seconds_label(round3(latency.p999_seconds)),
            seconds_label(round3(latency.max_seconds))
        );
        out.push(line(bottom + 36.0, &figures, INK));
        if let Some(p99) = arm.differences.as_ref().and_then(|d| d.get(1)) {
            let text = match (p99.low_seconds, p99.high_seconds) {
                (Some(low), Some(high)) => {
                    format!("p99 {:+.3} ms [{:+.3}, {:+.3}]", p99.seconds * 1e3, low * 1e3, high * 1e3)
                }
                _ => format!("p99 {:+.3} ms (no interval)", p99.seconds * 1e3),
            };
            let color = if p99.includes_zero == Some(false) { VERMILLION } else { INK };
            out.push(line(bottom + 54.0, &text, color));
        }
    }
    (out, width, height)
}

/// Three significant digits, so a label reads `1.23 ms`, not `1.2345678 ms`.
fn round3(seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    let scale = 10f64.powf(2.0 - seconds.log10().floor());
    (seconds * scale).round() / scale
}

/// A decade of the share axis: `100 %`, `1 %`, `0.01 %`, then `1e-5 %`.
fn share_label(decade: i64) -> String {
    match decade + 2 {
        power if power >= 0 => format!("{} %", 10u64.pow(power as u32)),
        power if power >= -3 => format!("{} %", 10f64.powi(power as i32)),
        power => format!("1e{power} %"),
    }
}

/// The plot as an SVG document.
pub fn svg(report: &ImpactReport, title: &str) -> String {
    let (shapes, width, height) = shapes(report, title);
    proctor_plot::svg(width as u32, height as u32, &shapes)
}

/// The plot as a PNG.
pub fn png(report: &ImpactReport, title: &str) -> Vec<u8> {
    let (shapes, width, height) = shapes(report, title);
    proctor_plot::png(width as u32, height as u32, &shapes)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::{ArmReport, ImpactReport, WorkloadReport};
    use crate::stats::{percentiles, Block, BlockBuilder};
    use crate::workload::{Workload, WorkloadConfig};

    fn report() -> ImpactReport {
        let block = |slow: u64| {
            let mut b = BlockBuilder::default();
            (0..2000u64).for_each(|n| b.add(if n % 100 == 0 { slow } else { 60_000 + n * 10 }));
            b.build()
        };
        let arms: Vec<Vec<Block>> =
            vec![vec![block(400_000), block(500_000)], vec![block(2_000_000), block(3_000_000)], vec![]];
        let base = percentiles(&arms[0]);
        let reports = ["none", "proctor serve", "psutil"]
            .iter()
            .zip(&arms)
            .map(|(name, blocks)| {
                let skipped = blocks.is_empty().then(|| "no psutil".to_string());
                let intervals = crate::stats::difference_intervals(&arms[0], blocks, 100, 1);
                ArmReport::new(
                    *name == "none",
                    name.to_string(),
                    skipped,
                    percentiles(blocks),
                    base,
                    intervals,
                    0,
                    2.0,
                    None,
                    None,
                    0.0,
                    None,
                    None,
                    vec![],
                )
            })
            .collect();
        let config =
            WorkloadConfig { workload: Workload::Pagefault, children: 2, size_bytes: 1 << 20, rate_per_sec: 1000.0 };
        ImpactReport {
            workload: WorkloadReport::new(&config, 1, 2),
            rounds: 2,
            duration_seconds: 1.0,
            turn_seconds: None,
            warmup_seconds: None,
            block_seconds: 1.0,
            resamples: 100,
            seed: 1,
            dropped_between_rounds: 0,
            pauses_let_finish_a_traced_read: None,
            attribution: None,
            arms: reports,
            blocks: arms,
        }
    }

    #[test]
    fn every_arm_that_ran_gets_a_panel_with_readable_labels_and_its_marks_on_the_axis() {
        let (shapes, width, height) = shapes(&report(), "proctor impact: a test");
        let problems = proctor_plot::label::problems(width, height, &shapes);
        assert!(problems.is_empty(), "{problems:#?}");
        let texts: Vec<&str> = shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(texts.contains(&"none") && texts.contains(&"proctor serve"), "{texts:?}");
        assert!(!texts.contains(&"psutil"), "a skipped arm has no panel");
        // The p99 line of the first panel lies where its value is between the decade ticks.
        let tick = |label: &str| {
            shapes.iter().find_map(|s| match s {
                Shape::Text { text, x, .. } if text == label => Some(*x),
                _ => None,
            })
        };
        let (Some(one_ms), Some(hundred_us)) = (tick("1 ms"), tick("100 µs")) else { panic!("ticks: {texts:?}") };
        let p99 = report().arms[0].latency.expect("latency").p99_seconds;
        let want = hundred_us + (p99.log10() + 4.0) * (one_ms - hundred_us);
        let dashed: Vec<f64> = shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Line { x1, dashed: true, .. } => Some(*x1),
                _ => None,
            })
            .collect();
        assert!(dashed.iter().any(|x| (x - want).abs() < 1.0), "p99 {p99} at {want}: {dashed:?}");
    }

    #[test]
    fn share_labels_read_as_percentages() {
        assert_eq!(share_label(0), "100 %");
        assert_eq!(share_label(-2), "1 %");
        assert_eq!(share_label(-4), "0.01 %");
        assert_eq!(share_label(-5), "0.001 %");
        assert_eq!(share_label(-7), "1e-5 %");
        assert_eq!(round3(0.0012345), 0.00123);
    }
}
