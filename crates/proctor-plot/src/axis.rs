//! Axis helpers every plot shares: round tick values (1-2-5 steps for plain numbers, binary
//! steps for bytes, clock steps for time) and their labels, in the units the rest of the CLI
//! writes (`250 ms`, `1.5 GiB`, `512 KiB/s`). Pure arithmetic: where the ticks go on the page
//! is the caller's layout.

/// Up to about `max_ticks` round values (1, 2 or 5 times a power of ten apart) covering
/// `[low, high]`, starting at or below `low` and ending at or above `high`.
pub fn nice_ticks(low: f64, high: f64, max_ticks: usize) -> Vec<f64> {
    if !(low.is_finite() && high.is_finite()) || max_ticks < 2 {
        return Vec::new();
    }
    let (low, high) = if high > low { (low, high) } else { (low, low + 1.0) };
    let raw = (high - low) / (max_ticks - 1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power);
    let first = (low / step).floor() as i64;
    let last = (high / step).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// Round byte values from 0 up to at least `high`, at most `max_ticks` of them: 1, 2 or 5
/// times a binary unit and its tens and hundreds (`0, 200, 400, 600 MiB`), or 256 and 512 of
/// it where the ticks reach the next unit (`0, 512 MiB, 1 GiB, 1.5 GiB`), so every label is a
/// short number of one unit and never `27.9 GiB` or `977 KiB`.
pub fn byte_ticks(high: f64, max_ticks: usize) -> Vec<f64> {
    byte_ticks_between(0.0, high, max_ticks)
}

/// Round byte values from at or below `low` up to at least `high`, at most `max_ticks` of
/// them, by the rules of [`byte_ticks`]; every tick is exactly what its label says
/// ([`bytes_label`] writes two decimals), so an axis fitted to 8 GiB and a bit steps by
/// 256 MiB (`8 GiB, 8.25 GiB, 8.5 GiB`), never by 200 MiB (`8.2 GiB` would be 8.195).
pub fn byte_ticks_between(low: f64, high: f64, max_ticks: usize) -> Vec<f64> {
    if !(low.is_finite() && high.is_finite()) || max_ticks < 2 {
        return Vec::new();
    }
    let low = low.max(0.0);
    let high = high.max(low + 1.0);
    let raw = (high - low) / (max_ticks - 1) as f64;
    for power in 0..7 {
        let unit = 1024f64.powi(power);
        for multiple in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 256.0, 512.0] {
            let step = multiple * unit;
            let (first, last) = ((low / step).floor(), (high / step).ceil());
            // Decimal steps only while every tick stays under 1000 of the unit: no "1000 MiB"
            // or "1200 MiB" (256 and 512 land on the next unit's quarters and halves).
            if step < raw || last - first > (max_ticks - 1) as f64 {
                continue;
            }
            if multiple != 256.0 && multiple != 512.0 && last * step >= 1000.0 * unit {
                continue;
            }
            let ticks: Vec<f64> = (first as u64..=last as u64).map(|i| i as f64 * step).collect();
            if ticks.iter().all(|tick| exactly_labelled(*tick)) {
                return ticks;
            }
        }
    }
    Vec::new()
}

/// Whether [`bytes_label`] writes `bytes` without rounding it.
fn exactly_labelled(bytes: f64) -> bool {
    let mut value = bytes;
    while value.abs() >= 1024.0 {
        value /= 1024.0;
    }
    let hundredths = value * 100.0;
    (hundredths - hundredths.round()).abs() < 1e-6
}

/// Round values of elapsed time from 0 up to at least `high_seconds`, at most `max_ticks` of
/// them: 1-2-5 steps below a minute, then 1, 2, 5, 10, 15, 30 minutes, 1, 2, 6, 12 hours, days.
pub fn elapsed_ticks(high_seconds: f64, max_ticks: usize) -> Vec<f64> {
    if !high_seconds.is_finite() || max_ticks < 2 {
        return Vec::new();
    }
    let raw = high_seconds.max(1e-9) / (max_ticks - 1) as f64;
    let step = if raw <= 30.0 {
        let power = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
    } else {
        const STEPS: [f64; 10] = [60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 21_600.0, 43_200.0];
        STEPS.iter().copied().find(|s| *s >= raw).unwrap_or_else(|| (raw / 86_400.0).ceil() * 86_400.0)
    };
    let count = (high_seconds.max(0.0) / step).ceil().max(1.0) as u64;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// Ticks of a log10 axis from decade `low` to decade `high` (whole numbers), drawn
/// `pixels_per_decade` apart: `(log10 of the value, labelled)`. Every decade is a tick; its
/// label is kept while labels are at least `min_spacing` pixels apart, else every second,
/// third… decade's; decades wide enough get labelled 2× and 5× ticks too (100 ms, 200 ms,
/// 500 ms, 1 s).
pub fn log_ticks(low: f64, high: f64, pixels_per_decade: f64, min_spacing: f64) -> Vec<(f64, bool)> {
    if !(low.is_finite() && high.is_finite() && pixels_per_decade > 0.0) {
        return Vec::new();
    }
    let every = (min_spacing / pixels_per_decade).ceil().max(1.0) as i64;
    // The narrower gap of 1-2-5-10 is from 2 to 5 (0.40 of a decade) … from 1 to 2 (0.30).
    let minor = pixels_per_decade * 2f64.log10() >= min_spacing;
    let mut ticks = Vec::new();
    let mut decade = low.round();
    while decade <= high.round() {
        ticks.push((decade, (decade - low.round()) as i64 % every == 0));
        if minor && decade < high.round() {
            ticks.push((decade + 2f64.log10(), true));
            ticks.push((decade + 5f64.log10(), true));
        }
        decade += 1.0;
    }
    ticks
}

/// `0 B`, `512 KiB`, `1 GiB`, `1.5 GiB`: a byte value in the largest binary unit it fills,
/// with at most two decimals and no trailing zeros.
pub fn bytes_label(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{} {}", short(value), UNITS[unit])
}

/// `0 s`, `100 ns`, `1 µs`, `250 ms`, `1.5 s`: a duration in the largest unit (up to seconds)
/// it fills, with at most two decimals and no trailing zeros.
pub fn seconds_label(seconds: f64) -> String {
    let magnitude = seconds.abs();
    let (value, unit) = if magnitude == 0.0 || magnitude >= 1.0 {
        (seconds, "s")
    } else if magnitude >= 1e-3 {
        (seconds * 1e3, "ms")
    } else if magnitude >= 1e-6 {
        (seconds * 1e6, "µs")
    } else {
        (seconds * 1e9, "ns")
    };
    format!("{} {unit}", short(value))
}

/// An elapsed-time tick: seconds below a minute and for steps under one (`90 s`), else whole
/// minutes (`15 min`) or hours (`6 h`), as [`elapsed_ticks`] places them.
pub fn elapsed_label(seconds: f64, step: f64) -> String {
    if seconds == 0.0 {
        seconds_label(seconds)
    } else if step >= 3600.0 && seconds % 3600.0 == 0.0 {
        format!("{} h", short(seconds / 3600.0))
    } else if step >= 60.0 && seconds % 60.0 == 0.0 {
        format!("{} min", short(seconds / 60.0))
    } else {
        seconds_label(seconds)
    }
}

/// `0%`, `2.5%`, `50%`: a percentage with as many decimals as the ticks' `step` needs.
pub fn percent_label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 || step <= 0.0 { 0 } else { (-step.log10()).ceil() as usize };
    format!("{value:.decimals$}%")
}

/// At most two decimals, trailing zeros dropped: `1`, `1.5`, `1.25`.
fn short(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// Ticks for a time span given in Unix nanoseconds: a round step (1 s … 1 day) giving at most
/// `max_ticks` ticks inside `[from_ns, to_ns]`, each with a UTC label (`HH:MM:SS`, or `HH:MM`
/// for steps of a minute or more).
pub fn time_ticks(from_ns: u64, to_ns: u64, max_ticks: usize) -> Vec<(u64, String)> {
    const STEPS: [u64; 17] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400];
    let span_s = to_ns.saturating_sub(from_ns) / 1_000_000_000;
    let max_ticks = max_ticks.max(1) as u64;
    let step =
        STEPS.iter().copied().find(|s| span_s / s < max_ticks).unwrap_or(86_400 * (span_s / 86_400 / max_ticks + 1));
    let step_ns = step * 1_000_000_000;
    let mut t = from_ns.div_ceil(step_ns) * step_ns;
    let mut ticks = Vec::new();
    while t <= to_ns {
        let secs = t / 1_000_000_000 % 86_400;
        let label = if step >= 60 {
            format!("{:02}:{:02}", secs / 3600, secs % 3600 / 60)
        } else {
            format!("{:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
        };
        ticks.push((t, label));
        t += step_ns;
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 100.0, 5), vec![0.0, 50.0, 100.0]);
        assert_eq!(nice_ticks(0.0, 7.3, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(nice_ticks(0.0, 0.0, 5), vec![0.0, 0.5, 1.0]);
        assert!(nice_ticks(f64::NAN, 1.0, 5).is_empty());
    }

    const KIB: f64 = 1024.0;
    const MIB: f64 = KIB * 1024.0;
    const GIB: f64 = MIB * 1024.0;

    fn labels(ticks: &[f64], label: impl Fn(f64) -> String) -> Vec<String> {
        ticks.iter().map(|t| label(*t)).collect()
    }

    #[test]
    fn byte_ticks_are_round_in_binary_units() {
        // The figures: memory of 27.9 GiB, a rate just under 1 MB/s.
        assert_eq!(labels(&byte_ticks(27.9 * GIB, 4), bytes_label), ["0 B", "10 GiB", "20 GiB", "30 GiB"]);
        assert_eq!(labels(&byte_ticks(1e6, 4), bytes_label), ["0 B", "512 KiB", "1 MiB"]);
        assert_eq!(labels(&byte_ticks(1.2 * GIB, 4), bytes_label), ["0 B", "512 MiB", "1 GiB", "1.5 GiB"]);
        assert_eq!(labels(&byte_ticks(700.0 * MIB, 4), bytes_label), ["0 B", "256 MiB", "512 MiB", "768 MiB"]);
        assert_eq!(labels(&byte_ticks(500.0 * MIB, 4), bytes_label), ["0 B", "200 MiB", "400 MiB", "600 MiB"]);
        assert_eq!(labels(&byte_ticks(0.0, 4), bytes_label), ["0 B", "1 B"]);
        // 200 MiB steps would end at 1000 MiB: quarters of a GiB instead.
        assert_eq!(labels(&byte_ticks(900.0 * MIB, 6), bytes_label), ["0 B", "256 MiB", "512 MiB", "768 MiB", "1 GiB"]);
        assert!(byte_ticks(f64::NAN, 4).is_empty());
        // Fitted to memory used growing from 8 GiB by 313 MiB: quarters of a GiB, each label
        // exact (200 MiB steps would be labelled 8.2 GiB for 8.195).
        assert_eq!(
            labels(&byte_ticks_between(8.0 * GIB, 8.0 * GIB + 313.0 * MIB, 4), bytes_label),
            ["8 GiB", "8.25 GiB", "8.5 GiB"]
        );
        // A process from 300 to 313 MiB: MiB steps.
        assert_eq!(
            labels(&byte_ticks_between(300.0 * MIB, 313.0 * MIB, 4), bytes_label),
            ["300 MiB", "305 MiB", "310 MiB", "315 MiB"]
        );
        for (low, high) in [(1e3, 5e3), (2.2e10, 2.3e10), (7.9e9, 8.8e9), (5e5, 3.3e7)] {
            let ticks = byte_ticks_between(low, high, 4);
            assert!(ticks.len() >= 2 && ticks.len() <= 4, "{low}..{high}: {ticks:?}");
            assert!(ticks[0] <= low && ticks[ticks.len() - 1] >= high, "{low}..{high}: {ticks:?}");
            assert!(ticks.iter().all(|t| exactly_labelled(*t)), "{low}..{high}: {ticks:?}");
        }
        for high in [3.0, 999.0, 5e5, 3.3e7, 7.7e8, 2.2e10, 9e12] {
            let ticks = byte_ticks(high, 5);
            assert!(ticks.len() <= 5 && ticks.last().is_some_and(|t| *t >= high), "{high}: {ticks:?}");
        }
    }

    #[test]
    fn labels_are_written_as_the_cli_writes_units() {
        assert_eq!(bytes_label(0.0), "0 B");
        assert_eq!(bytes_label(1536.0), "1.5 KiB");
        assert_eq!(bytes_label(1.25 * GIB), "1.25 GiB");
        assert_eq!(
            labels(&[0.0, 1e-7, 1e-6, 2.5e-5, 0.25, 1.0, 1.5, 1000.0], seconds_label),
            ["0 s", "100 ns", "1 µs", "25 µs", "250 ms", "1 s", "1.5 s", "1000 s"]
        );
        assert_eq!(percent_label(50.0, 25.0), "50%");
        assert_eq!(percent_label(0.5, 0.5), "0.5%");
        assert_eq!(percent_label(0.25, 0.05), "0.25%");
    }

    #[test]
    fn log_ticks_thin_crowded_decades_and_fill_wide_ones() {
        let labelled = |ticks: Vec<(f64, bool)>| -> Vec<String> {
            ticks.iter().filter(|(_, l)| *l).map(|(v, _)| seconds_label(10f64.powf(*v) * 1e-9)).collect()
        };
        // Nine decades in 90 px: every third labelled, every one a tick.
        let crowded = log_ticks(3.0, 12.0, 10.0, 25.0);
        assert_eq!(crowded.len(), 10);
        assert_eq!(labelled(crowded), ["1 µs", "1 ms", "1 s", "1000 s"]);
        assert_eq!(labelled(log_ticks(6.0, 9.0, 100.0, 50.0)), ["1 ms", "10 ms", "100 ms", "1 s"]);
        assert_eq!(labelled(log_ticks(7.0, 8.0, 600.0, 50.0)), ["10 ms", "20 ms", "50 ms", "100 ms"]);
        assert!(log_ticks(0.0, f64::NAN, 10.0, 5.0).is_empty());
    }

    #[test]
    fn elapsed_ticks_are_1_2_5_then_clock_steps() {
        assert_eq!(elapsed_ticks(2.2, 6), vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
        assert_eq!(labels(&elapsed_ticks(0.3, 4), |t| elapsed_label(t, 0.1)), ["0 s", "100 ms", "200 ms", "300 ms"]);
        let five_minutes = elapsed_ticks(300.0, 6);
        assert_eq!(five_minutes, vec![0.0, 60.0, 120.0, 180.0, 240.0, 300.0]);
        assert_eq!(elapsed_label(120.0, 60.0), "2 min");
        assert_eq!(
            labels(&elapsed_ticks(86_400.0, 6), |t| elapsed_label(t, 21_600.0)),
            ["0 s", "6 h", "12 h", "18 h", "24 h"]
        );
    }

    #[test]
    fn time_ticks_pick_a_round_step_and_label_in_utc() {
        let t0 = 1_700_000_000 * 1_000_000_000; // 22:13:20 UTC
        let ticks = time_ticks(t0, t0 + 60 * 1_000_000_000, 6);
        let labels: Vec<&str> = ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, vec!["22:13:30", "22:13:45", "22:14:00", "22:14:15"]);
        let hour = time_ticks(t0, t0 + 3600 * 1_000_000_000, 8);
        assert_eq!(hour.first().map(|(_, l)| l.as_str()), Some("22:20"));
        assert_eq!(hour.len(), 6, "{hour:?}");
    }
}
