//! `--plot`: each member's private dirty memory over the watch (what it copied), above the
//! family's PSS (what it uses) against its RSS (what it would use unshared). SVG or PNG, drawn
//! as `proctor_plot` shapes like every other plot.

use proctor_plot::axis::{byte_ticks, bytes_label, elapsed_label, elapsed_ticks};
use proctor_plot::label::{box_width, centre_inside, elide_middle, Lanes, GAP, KERNING_ALLOWANCE};
use proctor_plot::{Anchor, Shape, BLUE, GREEN, GRID, INK, LABEL_SIZE, ORANGE, PURPLE, SKY_BLUE, VERMILLION};

use crate::family::Role;
use crate::watch::Report;

pub use proctor_plot::{Format, UnknownFormat};

const WIDTH: f64 = 900.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const PANEL: f64 = 200.0;
const LINE: f64 = 14.0;
const COLORS: [[u8; 3]; 6] = [BLUE, ORANGE, GREEN, PURPLE, SKY_BLUE, VERMILLION];

/// A line: its legend name, colour and (seconds, bytes) points.
type Series = (String, [u8; 3], Vec<(f64, f64)>);

fn text(x: f64, y: f64, s: impl Into<String>, color: [u8; 3], anchor: Anchor) -> Shape {
    Shape::text(x, y, s, color, anchor)
}

/// A panel: value axis in bytes, a line per series, the legend above it in lanes. Returns the
/// y of its bottom edge.
fn panel(shapes: &mut Vec<Shape>, top: f64, title: &str, span: f64, series: &[Series]) -> f64 {
    let plot_width = WIDTH - LEFT - RIGHT;
    shapes.push(Shape::title(LEFT, top, title));
    // The legend: one lane after another, as many as the names need.
    let mut lanes = Lanes::new(LEFT, WIDTH - KERNING_ALLOWANCE);
    let mut legend = Vec::new();
    let mut x = LEFT;
    for (name, color, _) in series {
        let width = box_width(name, LABEL_SIZE) + 14.0;
        let (left, lane) = lanes.place(x + width / 2.0, width);
        legend.push((left, lane, name.clone(), *color));
        x = left + width + GAP;
    }
    let rows = lanes.len().max(1) as f64;
    for (left, lane, name, color) in legend {
        let y = top + 6.0 + (lane as f64 + 1.0) * LINE;
        shapes.push(Shape::rect(left, y - 7.0, 10.0, 3.0, color));
        shapes.push(text(left + 14.0, y, name, INK, Anchor::Start));
    }
    let top = top + 12.0 + rows * LINE;
    let high = series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).fold(0.0f64, f64::max).max(1.0);
    let ticks = byte_ticks(high, 6);
    let top_value = ticks.last().copied().unwrap_or(high).max(high);
    let bottom = top + PANEL;
    let x_of = |t: f64| LEFT + (t / span.max(1e-9)).clamp(0.0, 1.0) * plot_width;
    let y_of = |v: f64| bottom - (v / top_value).clamp(0.0, 1.0) * PANEL;
    for t in &ticks {
        let y = y_of(*t);
        shapes.push(Shape::rect(LEFT, y, plot_width, 1.0, GRID));
        // Zero is the axis itself; its label would meet the first time label.
        if *t > 0.0 {
            shapes.push(text(LEFT - 6.0, y + 4.0, bytes_label(*t), INK, Anchor::End));
        }
    }
    for (_, color, points) in series {
        for pair in points.windows(2) {
            shapes.push(Shape::Line {
                x1: x_of(pair[0].0),
                y1: y_of(pair[0].1),
                x2: x_of(pair[1].0),
                y2: y_of(pair[1].1),
                color: *color,
                width: 2.0,
                dashed: false,
            });
        }
        if let [only] = points.as_slice() {
            shapes.push(Shape::dot(x_of(only.0), y_of(only.1), 2.5, *color, None));
        }
    }
    shapes.push(Shape::rect(LEFT, bottom, plot_width, 1.0, INK));
    let ticks: Vec<f64> = elapsed_ticks(span, 9).into_iter().filter(|t| *t <= span * 1.0001).collect();
    let step = ticks.get(1).copied().unwrap_or(span);
    let mut last_right = f64::MIN;
    for t in &ticks {
        let x = x_of(*t);
        shapes.push(Shape::rect(x, bottom, 1.0, 4.0, INK));
        let label = elapsed_label(*t, step);
        let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
        let half = box_width(&label, LABEL_SIZE) / 2.0;
        if centre - half >= last_right + GAP {
            last_right = centre + half;
            shapes.push(text(centre, bottom + 16.0, label, INK, Anchor::Middle));
        }
    }
    bottom + 16.0
}

/// The shapes and the picture's height.
fn layout(report: &Report, title: &str) -> (Vec<Shape>, f64) {
    let mut shapes = vec![Shape::title(10.0, 18.0, elide_middle(title, 13.0, WIDTH - 20.0))];
    let span = report.watched_secs.max(1.0);
    let members: Vec<Series> = report
        .members
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let name = match g.role {
                Role::Master => format!("master {}", g.pid),
                Role::Worker => format!("worker {} ({})", g.number, g.pid),
            };
            (name, COLORS[i % COLORS.len()], g.points.iter().map(|p| (p.0, p.1 as f64)).collect())
        })
        .collect();
    let bottom =
        panel(&mut shapes, 44.0, "private dirty memory per process: what each copied or wrote", span, &members);
    let family = vec![
        (
            "sum of RSS: unshared".to_string(),
            ORANGE,
            report.family.iter().map(|p| (p.at_secs, p.unshared_bytes as f64)).collect(),
        ),
        (
            "sum of PSS: used".to_string(),
            BLUE,
            report.family.iter().map(|p| (p.at_secs, p.used_bytes as f64)).collect(),
        ),
    ];
    let bottom =
        panel(&mut shapes, bottom + 36.0, "the family: what it uses against what it would use unshared", span, &family);
    shapes.push(text(WIDTH / 2.0, bottom + LINE + 4.0, "time since the first round", INK, Anchor::Middle));
    (shapes, bottom + LINE + 16.0)
}

pub fn svg(report: &Report, title: &str) -> String {
    let (shapes, height) = layout(report, title);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

pub fn png(report: &Report, title: &str) -> Vec<u8> {
    let (shapes, height) = layout(report, title);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::{MemberRead, Round};
    use crate::watch::Tracker;
    use proctor_procfs::smaps::Counters;

    fn report(workers: u32) -> Report {
        let m = 1024 * 1024;
        let mut t = Tracker::new();
        for minute in 0..6u64 {
            let members = (0..=workers)
                .map(|i| MemberRead {
                    pid: 100 + i,
                    ppid: 1,
                    start_ticks: 0,
                    comm: "w".into(),
                    role: if i == 0 { Role::Master } else { Role::Worker },
                    counters: Some(Counters {
                        rss_bytes: 210 * m,
                        pss_bytes: 60 * m + u64::from(i) * minute * m,
                        private_dirty_bytes: 10 * m + u64::from(i) * minute * m,
                        shared_dirty_bytes: 200 * m,
                        ..Counters::default()
                    }),
                    anonymous_known: true,
                    error: None,
                    cost: None,
                })
                .collect();
            t.push(&Round { at_secs: minute as f64 * 60.0, unix_ms: 0, members });
        }
        t.report()
    }

    #[test]
    fn labels_stay_inside_the_picture_and_apart() {
        for workers in [1, 3, 12] {
            let r = report(workers);
            let (shapes, height) = layout(&r, "proctor share 100: gunicorn");
            let problems = proctor_plot::label::problems(WIDTH, height, &shapes);
            assert!(problems.is_empty(), "{workers} workers: {problems:?}");
            let png = png(&r, "t");
            let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
            assert_eq!((size(16), size(20)), (WIDTH as u32, height as u32));
            assert!(svg(&r, "t").contains("worker 1 (101)"));
        }
    }
}
