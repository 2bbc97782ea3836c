//! Axis helpers shared by the plots that put several panels on one time axis: round tick
//! values for a value range and labelled ticks for a span of wall-clock time. Pure arithmetic:
//! where the ticks go on the page is the caller's layout.

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

/// Ticks for a time span given in Unix nanoseconds: a round step (1 s … 1 day) giving at most
/// `max_ticks` ticks inside `[from_ns, to_ns]`, each with a UTC label (`HH:MM:SS`, or `HH:MM`
/// for steps of a minute or more).
pub fn time_ticks(from_ns: u64, to_ns: u64, max_ticks: usize) -> Vec<(u64, String)> {
    const STEPS: [u64; 16] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 86_400];
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
