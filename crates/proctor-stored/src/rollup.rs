//! The long-term tiers: raw samples rolled up, as they age, into a row per minute
//! (`DATA/rollup-1m`, an hour of rows per block) and a row per hour (`DATA/rollup-1h`, a day
//! per block), each row holding the min, mean, max and last value of every host, container and
//! group series ([`proctor_model::rollup`]) over its span. Each tier is a store of its own (the
//! same segments, CRCs, repair on open and retention as the raw tier, a writer lock of its own),
//! so a crash loses at most the block being written, and rolling again writes it again.
//!
//! [`roll`] is idempotent and bounded: it continues after the last block a tier holds, rolls
//! only whole hours (days) that the tier below has finished, at most [`HOURS_PER_ROLL`] hours
//! a call, and reads each hour's raw samples once (full decode: swap and PSS are in the parts a
//! lean decode skips). Then it [`compact`]s: each six hours of minute blocks that are over are
//! written again as one block, losslessly (a third fewer bytes). [`Roller`] calls it on a
//! thread of its own every few minutes beside a recording; `proctor rollup` calls it by hand.
//!
//! What it does not do: roll an hour that is not over (the tier lags the raw one by up to an
//! hour and a roll interval; readers take the rest from raw samples), or keep processes (top
//! processes over months would be cardinality without end; groups are the long-term unit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_groups::{churn, fold};
use proctor_model::{process_rows, RollupBlock, RollupRow, RowContext, Sample, Stat};
use proctor_report::{group_values, host_values, GROUP_SERIES, SERIES};
use proctor_store::frame::FrameKind;
use proctor_store::{
    same_run, stream_dir, Event, NewFrame, Reader, StoreConfig, StoreError, StoredFrame, Writer, HOUR_TIER, MINUTE_TIER,
};

/// Most hours one [`roll`] call rolls: a week of recording found unrolled is caught up over
/// many calls, a few seconds of CPU each, rather than in one burst of minutes.
pub const HOURS_PER_ROLL: u64 = 6;

// Hours of minute rows that [`compact`] writes again as one block (the tier's layout, so
// `range` holds it): six whole hours (aligned to UTC: 00–06, 06–12, …) take ~0.65 of the bytes
// of their six hour blocks (zstd finds each column's values of the six hours side by side),
// where a day's would take ~0.57 but decode to ~37 MB of rows at once for every reader that
// touches it, against ~9 MB.
pub use crate::range::COMPACT_HOURS;
const _: () = assert!(COMPACT_HOURS as usize * 60 <= proctor_store::rollup::MAX_COMPACTED_ROWS);
/// Most windows one [`roll`] call compacts (a tier written before compaction is caught up
/// over many calls).
pub const WINDOWS_PER_ROLL: u64 = 8;

/// How long each tier keeps its rows and how much disk both may use.
#[derive(Debug, Clone, PartialEq)]
pub struct RollupConfig {
    pub minute_age: Duration,
    pub hour_age: Duration,
    /// Both tiers together; the minute tier may use 7/8 of it, the hour tier 1/8.
    pub max_bytes: u64,
}

impl Default for RollupConfig {
    fn default() -> Self {
        RollupConfig {
            minute_age: Duration::from_secs(90 * 86_400),
            hour_age: Duration::from_secs(730 * 86_400),
            max_bytes: 512 << 20,
        }
    }
}

impl RollupConfig {
    /// The store configuration of the hour tier (`hours`) or the minute tier.
    pub fn tier(&self, hours: bool) -> StoreConfig {
        let (age, bytes, segment) = if hours {
            (self.hour_age, self.max_bytes / 8, Duration::from_secs(30 * 86_400))
        } else {
            (self.minute_age, self.max_bytes - self.max_bytes / 8, Duration::from_secs(86_400))
        };
        // Blocks are written once an hour: compress them hard.
        StoreConfig {
            retain_age: age,
            retain_bytes: bytes,
            segment_max_age: segment,
            level: 19,
            ..StoreConfig::default()
        }
    }
}

/// What one [`roll`] did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RollReport {
    pub minute_blocks: u64,
    pub hour_blocks: u64,
    pub samples_read: u64,
    /// Raw frames in the rolled hours that could not be read (skipped, counted).
    pub bad_frames: u64,
    /// Where the minute tier now ends (Unix seconds), if it has rows.
    pub minute_tier_end_unix_s: Option<u64>,
    /// Hours of raw samples finished but left for the next call (the per-call bound).
    pub hours_left: u64,
    /// Windows of [`COMPACT_HOURS`] written again as one block, and whole windows still held
    /// by more than one block (the per-call bound; or not exact, see [`compact`]).
    pub compacted_windows: u64,
    pub windows_left: u64,
    pub elapsed_ms: f64,
    /// Why a tier was not rolled (locked by another roller, say).
    pub note: Option<String>,
}

/// Rolls what the raw tier of `data` has finished into the minute tier, and finished days of
/// the minute tier into the hour tier.
pub fn roll(data: &Path, config: &RollupConfig) -> Result<RollReport, StoreError> {
    let started = Instant::now();
    let mut report = RollReport::default();
    let minute_dir = stream_dir(data, MINUTE_TIER)?;
    let hour_dir = stream_dir(data, HOUR_TIER)?;
    let mut minutes = match Writer::open(&minute_dir, config.tier(false)) {
        Ok((w, _)) => w,
        Err(StoreError::Locked { .. }) => {
            report.note = Some("another roller holds the minute tier".into());
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let mut raw = Reader::open(data)?;
    let newest_raw_s = newest_frame_s(&mut raw);
    let mut next = match last_block_end(&minute_dir)? {
        Some(end) => Some(end),
        None => oldest_frame_s(&mut raw).map(|s| s - s % 3600),
    };
    if let (Some(mut hour), Some(newest)) = (next, newest_raw_s) {
        let finished = newest - newest % 3600;
        while hour + 3600 <= finished {
            if report.minute_blocks >= HOURS_PER_ROLL {
                report.hours_left = (finished - hour) / 3600;
                break;
            }
            // A segment never holds hours of two compaction windows: compaction rewrites a
            // window's segments whole.
            if hour % (COMPACT_HOURS * 3600) == 0 {
                minutes.seal()?;
            }
            if let Some(block) = roll_hour(&mut raw, hour, &mut report)? {
                minutes.append_event(hour * 1_000_000_000, &Event::Rollup(block))?;
                report.minute_blocks += 1;
            }
            hour += 3600;
            next = Some(hour);
        }
    }
    report.minute_tier_end_unix_s = next;
    if let Some(end) = next {
        compact(&mut minutes, COMPACT_HOURS * 3600, end, WINDOWS_PER_ROLL, &mut report)?;
    }
    drop(minutes);
    match Writer::open(&hour_dir, config.tier(true)) {
        Ok((mut hours, _)) => roll_days(&minute_dir, &hour_dir, &mut hours, &mut report)?,
        Err(StoreError::Locked { .. }) => report.note = Some("another roller holds the hour tier".into()),
        Err(e) => return Err(e),
    }
    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(report)
}

fn oldest_frame_s(raw: &mut Reader) -> Option<u64> {
    let first = raw.segments().first()?.start_ns;
    let frames = raw.frames(first, first.saturating_add(86_400 * 1_000_000_000)).ok()?;
    frames.first().map(|f| f.unix_ns() / 1_000_000_000)
}

fn newest_frame_s(raw: &mut Reader) -> Option<u64> {
    let last = raw.segments().last()?.start_ns;
    let frames = raw.frames(last, u64::MAX).ok()?;
    frames.last().map(|f| f.unix_ns() / 1_000_000_000)
}

/// Where a tier's last block ends.
fn last_block_end(dir: &Path) -> Result<Option<u64>, StoreError> {
    let mut reader = Reader::open(dir)?;
    let Some(last) = reader.segments().last().map(|s| s.start_ns) else { return Ok(None) };
    let frames = reader.event_frames(last, u64::MAX)?;
    for frame in frames.iter().rev() {
        if let Some(Event::Rollup(block)) = reader.read_event(frame) {
            return Ok(block.end_unix_s());
        }
    }
    Ok(None)
}

/// Writes each whole window of `window_s` seconds (aligned to UTC) that ends by `until_s` and
/// is held by more than one block as one block of all its rows, at most `max_windows` a call:
/// lossless, as Prometheus compacts its two-hour blocks. The roller writes an hour a block (a
/// crash loses at most that hour, and the tier lags the raw samples by no more); once a window
/// is over, its six hour blocks take ~0.65 of their bytes as one.
///
/// A window is compacted only when its segments hold nothing outside it (the roller seals a
/// segment where a window starts; a tier written before that may straddle, and stays as it is),
/// none is set aside as damaged, every block of it reads, and its rows written again by
/// [`proctor_store::rollup::encode_block_exact`] decode to exactly what was read; otherwise it
/// is left as it is and counted in `windows_left`. The rewrite is
/// [`Writer::replace_segments`]: a crash leaves either the hour blocks, or the new block beside
/// some of them, whose rows [`crate::range::read_tier_block`] takes once and the next call
/// compacts again.
pub fn compact(
    writer: &mut Writer,
    window_s: u64,
    until_s: u64,
    max_windows: u64,
    report: &mut RollReport,
) -> Result<(), StoreError> {
    const NS: u64 = 1_000_000_000;
    let dir = writer.dir().to_owned();
    let mut reader = Reader::open(&dir)?;
    let frames = reader.event_frames(0, u64::MAX)?;
    // Per window, its segments and their frames; a window some segment shares with another is
    // left alone.
    let mut windows: BTreeMap<u64, (Vec<usize>, Vec<StoredFrame>)> = BTreeMap::new();
    let mut shared = std::collections::BTreeSet::new();
    let mut segment_window: BTreeMap<usize, u64> = BTreeMap::new();
    for frame in frames {
        let window = frame.unix_ns() / NS / window_s * window_s;
        match segment_window.insert(frame.segment, window) {
            Some(before) if before != window => {
                shared.insert(before);
                shared.insert(window);
            }
            _ => {}
        }
        let (segments, frames) = windows.entry(window).or_default();
        if segments.last() != Some(&frame.segment) {
            segments.push(frame.segment);
        }
        frames.push(frame);
    }
    for (window, (segments, frames)) in windows {
        if window + window_s > until_s || frames.len() < 2 || shared.contains(&window) {
            continue;
        }
        // A segment set aside as damaged is evidence, never rewritten or removed here.
        if segments.iter().any(|i| reader.segments()[*i].set_aside) {
            report.windows_left += 1;
            continue;
        }
        if report.compacted_windows >= max_windows {
            report.windows_left += 1;
            continue;
        }
        let Some(record) = compacted(&mut reader, &frames) else {
            report.windows_left += 1;
            continue;
        };
        let old: Vec<proctor_store::segment::SegmentInfo> =
            segments.iter().map(|i| reader.segments()[*i].clone()).collect();
        let frame = NewFrame {
            unix_ns: frames[0].unix_ns(),
            kind: FrameKind::Rollup,
            version: proctor_store::rollup::ROLLUP_VERSION,
            record: &record,
        };
        writer.replace_segments(&old, &[frame])?;
        report.compacted_windows += 1;
    }
    Ok(())
}

/// The record of one block holding every row of `frames`' blocks once, if each reads and the
/// record decodes to exactly them.
///
/// The check reads the hour blocks a second time, one at a time, against the decoded record,
/// rather than keeping the merged block beside its decoded copy: six hours of 530 series are
/// ~9 MB of rows, and the roller runs in `serve`.
fn compacted(reader: &mut Reader, frames: &[StoredFrame]) -> Option<Vec<u8>> {
    let mut read_until_s = 0;
    let mut blocks = Vec::with_capacity(frames.len());
    for frame in frames {
        let block = crate::range::read_tier_block(reader, frame, &mut read_until_s)?;
        // Names in order, each once, as the roller writes them (a merge keeps each then).
        if !block.names.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        blocks.push(block);
    }
    let record = proctor_store::rollup::encode_block_exact(&merge_blocks(blocks))?;
    let decoded = proctor_store::rollup::decode_block(&record).ok()?;
    let mut rows = decoded.rows.iter();
    let mut read_until_s = 0;
    for frame in frames {
        let block = crate::range::read_tier_block(reader, frame, &mut read_until_s)?;
        let at: Vec<usize> = block.names.iter().map(|n| decoded.names.binary_search(n).ok()).collect::<Option<_>>()?;
        for row in &block.rows {
            let got = rows.next()?;
            let mut want = vec![None; decoded.names.len()];
            for (i, v) in at.iter().zip(&row.values) {
                want[*i] = *v;
            }
            let same = (got.start_unix_s, got.span_s, got.samples) == (row.start_unix_s, row.span_s, row.samples)
                && got.values == want;
            if !same {
                return None;
            }
        }
    }
    rows.next().is_none().then_some(record)
}

/// Consecutive blocks of one tier as one: their rows in order, over the union of their names
/// (sorted, as the roller writes them), a series a block lacks absent from its rows.
pub fn merge_blocks(blocks: Vec<RollupBlock>) -> RollupBlock {
    let span_s = blocks.first().map_or(60, |b| b.span_s);
    let mut names: Vec<String> = blocks.iter().flat_map(|b| b.names.iter().cloned()).collect();
    names.sort_unstable();
    names.dedup();
    let mut rows = Vec::with_capacity(blocks.iter().map(|b| b.rows.len()).sum());
    for block in blocks {
        if block.names == names {
            rows.extend(block.rows);
            continue;
        }
        let at: Vec<usize> =
            block.names.iter().map(|n| names.binary_search(n).expect("the union holds every block's names")).collect();
        for row in block.rows {
            let mut values = vec![None; names.len()];
            for (i, v) in at.iter().zip(row.values) {
                values[*i] = v;
            }
            rows.push(RollupRow { values, ..row });
        }
    }
    RollupBlock { span_s, names, rows }
}

/// Per minute of `[from_s, to_s)`: the samples behind it and every series' stats.
pub type Minutes = BTreeMap<u64, (u32, BTreeMap<String, Stat>)>;

/// The minute rows of `[hour, hour + 1 h)`, from its raw samples (and the one before, for
/// rates); `None` when the hour has none.
fn roll_hour(raw: &mut Reader, hour: u64, report: &mut RollReport) -> Result<Option<RollupBlock>, StoreError> {
    let minutes = minute_stats(raw, hour, hour + 3600, report)?;
    Ok((!minutes.is_empty()).then(|| block_of(60, minutes)))
}

/// Reads the raw samples of `[from_s, to_s)` (and the minute before, for rates) and folds
/// them into per-minute stats.
pub fn minute_stats(raw: &mut Reader, from_s: u64, to_s: u64, report: &mut RollReport) -> Result<Minutes, StoreError> {
    const NS: u64 = 1_000_000_000;
    let frames = raw.frames(from_s.saturating_sub(60) * NS, to_s * NS - 1)?;
    let mut minutes = Minutes::new();
    let mut prev: Option<Sample> = None;
    for frame in &frames {
        let Some(cur) = raw.read(frame) else {
            report.bad_frames += 1;
            continue;
        };
        let before = prev.take().filter(|p| same_run(p, &cur));
        if cur.unix_ns >= from_s * NS {
            report.samples_read += 1;
            let minute = cur.unix_ns / NS / 60 * 60;
            let (samples, stats) = minutes.entry(minute).or_default();
            *samples += 1;
            for (name, v) in sample_values(&cur, before.as_ref()) {
                match stats.get_mut(&name) {
                    Some(s) => s.push(v),
                    None => {
                        stats.insert(name, Stat::one(v));
                    }
                }
            }
        }
        prev = Some(cur);
    }
    Ok(minutes)
}

/// Rows keyed by start, each (samples, stats by name), as one block.
pub fn block_of(span_s: u32, rows: Minutes) -> RollupBlock {
    let mut names: Vec<String> = rows.values().flat_map(|(_, s)| s.keys().cloned()).collect();
    names.sort_unstable();
    names.dedup();
    let rows = rows
        .into_iter()
        .map(|(start, (samples, stats))| RollupRow {
            start_unix_s: start,
            span_s,
            samples,
            values: names.iter().map(|n| stats.get(n).copied()).collect(),
        })
        .collect();
    RollupBlock { span_s, names, rows }
}

/// Every series' value at `cur`: host and container under the catalog's names
/// ([`proctor_units::series`]; `container.cpu_used_cpus`, `container.memory_current_bytes`)
/// and groups (`group.NAME.SERIES`).
pub fn sample_values(cur: &Sample, prev: Option<&Sample>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for ((name, _, _), v) in SERIES.iter().zip(host_values(cur, prev)) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.push((name.to_string(), v));
        }
    }
    if let Some(c) = &cur.container {
        if let Some(m) = c.counters.memory_current_bytes {
            out.push(("container.memory_current_bytes".into(), m as f64));
        }
        let cpu = prev.and_then(|p| {
            let secs = cur.mono_ns.checked_sub(p.mono_ns)? as f64 / 1e9;
            let used = c.counters.cpu_usage_usec?.checked_sub(p.container.as_ref()?.counters.cpu_usage_usec?)?;
            (secs > 0.0).then(|| used as f64 / 1e6 / secs)
        });
        if let Some(cpu) = cpu {
            out.push(("container.cpu_used_cpus".into(), cpu));
        }
    }
    if let Some(members) = cur.groups.as_deref() {
        let rows = process_rows(cur, prev, RowContext::default());
        let names = members.names();
        let churned = prev.and_then(|p| {
            let before = p.groups.as_deref()?;
            let procs = |s: &Sample| s.processes.iter().map(|p| (p.pid, p.start_ticks)).collect::<Vec<_>>();
            Some(churn(&procs(p), &before.names(), &procs(cur), &names))
        });
        let boot = cur.host.stat.as_ref().and_then(|s| s.boot_time_secs);
        let mut groups = fold(&rows, &names, cur.clock_ticks_per_sec, boot, churned.as_ref());
        proctor_groups::add_stored_exited(&mut groups, cur, prev);
        for g in groups {
            let values = group_values(&g, prev.is_some(), churned.is_some());
            for ((series, _, _), v) in GROUP_SERIES.iter().zip(values) {
                if let Some(v) = v.filter(|v| v.is_finite()) {
                    out.push((format!("group.{}.{series}", g.name), v));
                }
            }
        }
    }
    out
}

/// Days the minute tier has finished, as hour rows, into the hour tier.
fn roll_days(
    minute_dir: &Path,
    hour_dir: &Path,
    hours: &mut Writer,
    report: &mut RollReport,
) -> Result<(), StoreError> {
    let Some(minute_end) = last_block_end(minute_dir)? else { return Ok(()) };
    let mut reader = Reader::open(minute_dir)?;
    let mut day = match last_block_end(hour_dir)? {
        Some(end) => end,
        None => {
            let Some(first) = reader.segments().first().map(|s| s.start_ns / 1_000_000_000) else { return Ok(()) };
            first - first % 86_400
        }
    };
    let finished = minute_end - minute_end % 86_400;
    while day + 86_400 <= finished {
        let frames = reader.event_frames(day * 1_000_000_000, (day + 86_400) * 1_000_000_000 - 1)?;
        let mut rows: BTreeMap<u64, (u32, BTreeMap<String, Stat>)> = BTreeMap::new();
        let mut read_until_s = 0;
        for frame in &frames {
            let Some(block) = crate::range::read_tier_block(&mut reader, frame, &mut read_until_s) else {
                report.bad_frames += 1;
                continue;
            };
            for row in &block.rows {
                let (samples, stats) = rows.entry(row.start_unix_s - row.start_unix_s % 3600).or_default();
                *samples += row.samples;
                for (name, v) in block.names.iter().zip(&row.values) {
                    let Some(v) = v else { continue };
                    stats
                        .entry(name.clone())
                        .or_insert(Stat { min: 0.0, mean: 0.0, max: 0.0, last: 0.0, n: 0 })
                        .merge(v);
                }
            }
        }
        if !rows.is_empty() {
            hours.append_event(day * 1_000_000_000, &Event::Rollup(block_of(3600, rows)))?;
            report.hour_blocks += 1;
        }
        day += 86_400;
    }
    Ok(())
}

/// Rolls `data` up on a thread of its own: a minute after it starts, then every `every`.
#[derive(Debug)]
pub struct Roller {
    /// Dropped to stop the thread, which waits on the other end between rolls and so wakes
    /// only to roll (it polled a flag every 200 ms: 5 wakeups a second on an idle agent).
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    last: Arc<std::sync::Mutex<Option<Result<RollReport, String>>>>,
}

impl Roller {
    pub fn spawn(data: PathBuf, config: RollupConfig, every: Duration) -> std::io::Result<Roller> {
        let (stop, stopped) = mpsc::channel::<()>();
        let last = Arc::new(std::sync::Mutex::new(None));
        let thread_last = Arc::clone(&last);
        let thread = std::thread::Builder::new().name("proctor-rollup".into()).spawn(move || {
            let mut wait = Duration::from_secs(60).min(every);
            while stopped.recv_timeout(wait) == Err(mpsc::RecvTimeoutError::Timeout) {
                let result = roll(&data, &config).map_err(|e| e.to_string());
                if let Err(e) = &result {
                    eprintln!("proctor: rolling up {} failed: {e}", data.display());
                }
                *thread_last.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                wait = every;
            }
        })?;
        Ok(Roller { stop: Some(stop), thread: Some(thread), last })
    }

    /// What the last roll did, if one ran.
    pub fn last(&self) -> Option<Result<RollReport, String>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn stop(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::{fold_range, fold_tiered, FoldConfig};
    use proctor_model::{HostSample, ProcessSample, SampleCost, SampleGroups};
    use proctor_procfs::host::{CpuTicks, MemInfo, Stat as CpuStat};
    use proctor_report::GroupSelect;

    /// Every stored host series of the catalog is a value of a row: a sample pair with every
    /// host file the series read gives each of them a value, under the catalog's name.
    #[test]
    fn rows_keep_every_stored_host_series_of_the_catalog() {
        use proctor_procfs::host::{DiskStat, LoadAvg, NetDev, Pressure, PressureLine};
        let rich = |t: u64| {
            let mut s = sample(0, t);
            let h = &mut s.host;
            if let Some(stat) = h.stat.as_mut() {
                stat.total.nice = 2 * t;
                stat.total.system = 3 * t;
                stat.total.iowait = t;
                stat.total.irq = t;
                stat.total.softirq = t;
                stat.total.steal = t;
                stat.context_switches = Some(1000 * t);
                (stat.procs_running, stat.procs_blocked) = (Some(3), Some(1));
            }
            if let Some(m) = h.meminfo.as_mut() {
                m.cached_bytes = Some(1 << 30);
                m.swap_total_bytes = Some(1 << 30);
                m.swap_free_bytes = Some(1 << 29);
            }
            h.loadavg = Some(LoadAvg { one: 1.0, five: 1.0, fifteen: 1.0, runnable: 1, scheduling_entities: 9 });
            let line = Some(PressureLine { avg10: 1.0, avg60: 1.0, avg300: 1.0, total_usec: 1000 * t });
            let p = Some(Pressure { some: line, full: line });
            (h.pressure_cpu, h.pressure_memory, h.pressure_io) = (p, p, p);
            h.disks = vec![DiskStat {
                name: "sda".into(),
                reads: t,
                read_sectors: 8 * t,
                read_ms: t,
                writes: t,
                write_sectors: 8 * t,
                write_ms: t,
                in_flight: 0,
                io_ms: 10 * t,
                weighted_io_ms: 10 * t,
            }];
            h.nets = vec![NetDev {
                name: "eth0".into(),
                rx_bytes: 100 * t,
                rx_packets: t,
                rx_errors: 0,
                rx_dropped: 0,
                tx_bytes: 100 * t,
                tx_packets: t,
                tx_errors: 0,
                tx_dropped: 0,
            }];
            s
        };
        let (a, b) = (rich(10), rich(11));
        let names: Vec<String> = sample_values(&b, Some(&a)).into_iter().map(|(n, _)| n).collect();
        for s in proctor_units::series::CATALOG.iter().filter(|s| s.stored && s.name.starts_with("host.")) {
            assert!(names.iter().any(|n| n == s.name), "a row lacks {}: {names:?}", s.name);
        }
    }

    const NS: u64 = 1_000_000_000;
    /// A day boundary, so 26 hours hold a whole day.
    const T0: u64 = 1_700_006_400;

    /// A sample at second `t` after T0 (one per minute): memory used grows 1 MiB an hour, the
    /// `web` group's one process uses 25 % of a CPU and has 100 MiB resident.
    fn sample(seq: u64, t: u64) -> Sample {
        let mut groups = SampleGroups { by: "rules".into(), ..SampleGroups::default() };
        groups.members.insert("web".into(), vec![42]);
        Sample {
            seq,
            unix_ns: (T0 + t) * NS,
            mono_ns: t * NS,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            host: HostSample {
                stat: Some(CpuStat {
                    total: CpuTicks { user: 25 * t, idle: 175 * t, ..CpuTicks::default() },
                    ..CpuStat::default()
                }),
                meminfo: Some(MemInfo {
                    total_bytes: Some(8 << 30),
                    available_bytes: Some((8 << 30) - (1 << 30) - (t / 3600) * (1 << 20)),
                    ..MemInfo::default()
                }),
                loadavg: Some(proctor_procfs::host::LoadAvg {
                    one: 1.5,
                    five: 1.0,
                    fifteen: 0.5,
                    runnable: 1,
                    scheduling_entities: 100,
                }),
                ..HostSample::default()
            },
            container: None,
            processes: vec![ProcessSample {
                pid: 42,
                ppid: 1,
                start_ticks: 7,
                comm: Arc::from("web"),
                state: 'S',
                utime_ticks: 25 * t,
                cutime_ticks: Some(0),
                cstime_ticks: Some(0),
                cminflt: Some(0),
                cmajflt: Some(0),
                num_threads: 4,
                resident_bytes: Some(100 << 20),
                ..ProcessSample::default()
            }],
            cost: SampleCost::default(),
            groups: Some(Arc::new(groups)),
            gpu: None,
            exited: Vec::new(),
        }
    }

    /// The history ring's series maker, as the agent's ring over these samples has it.
    fn history_maker() -> proctor_agent::history::PointMaker {
        proctor_agent::history::History::new(&proctor_agent::snapshot::Snapshot::derive(sample(0, 0), None), 10, 10)
            .maker()
            .clone()
    }

    /// A fresh store `NAME-PID` in the temporary directory holding 26 hours and a half of
    /// samples a minute apart.
    fn raw_store(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let (mut w, _) = Writer::open(&dir, StoreConfig::default()).expect("writer");
        for (seq, t) in (0..26 * 3600 + 1800).step_by(60).enumerate() {
            w.append(&sample(seq as u64, t)).expect("append");
        }
        dir
    }

    /// A store of 26 hours and a half of samples whose minute tier is written an hour a block
    /// by a writer each (as the roller writes it, without compacting), and whose raw segments
    /// before hour 20 are gone, so readers take those hours from the tier.
    fn store_with_hour_blocks(name: &str) -> PathBuf {
        let dir = raw_store(&format!("proctor-compact-{name}"));
        let minute_dir = stream_dir(&dir, MINUTE_TIER).expect("tier");
        let mut raw = Reader::open(&dir).expect("reader");
        for hour in 0..26 {
            let (mut w, _) = Writer::open(&minute_dir, RollupConfig::default().tier(false)).expect("writer");
            let start = T0 + hour * 3600;
            let block = roll_hour(&mut raw, start, &mut RollReport::default()).expect("roll").expect("rows");
            w.append_event(start * NS, &Event::Rollup(block)).expect("append");
        }
        for segment in raw.segments() {
            if segment.start_ns < (T0 + 20 * 3600) * NS {
                std::fs::remove_file(&segment.path).expect("rm");
            }
        }
        dir
    }

    /// What the readers of the tier answer over `dir`: every row of the minute tier (each as
    /// read once), a report from hour 3.5 (the `web` group: the tier's rows, then raw samples
    /// after its end), and the history's points of the same range.
    /// A row as readers see it: start, samples, and each series' statistics by name.
    type Row = (u64, u32, Vec<(String, Stat)>);

    fn readings(dir: &Path) -> (Vec<Row>, String, String) {
        let mut tier = Reader::open(&dir.join(MINUTE_TIER)).expect("tier");
        let mut rows = Vec::new();
        let mut read_until_s = 0;
        for frame in tier.event_frames(0, u64::MAX).expect("frames") {
            let block = crate::range::read_tier_block(&mut tier, &frame, &mut read_until_s).expect("reads");
            for row in block.rows {
                let values = block.names.iter().zip(row.values).filter_map(|(n, v)| Some((n.clone(), v?))).collect();
                rows.push((row.start_unix_s, row.samples, values));
            }
        }
        let (from, to) = ((T0 + 3 * 3600 + 1800) * NS, (T0 + 26 * 3600 + 1800) * NS);
        let select = Some(GroupSelect::Named(vec!["web".into()]));
        let config = FoldConfig { budget: 0, max_points: 40, groups: select, max_span: None, ..FoldConfig::default() };
        let mut reader = Reader::open(dir).expect("reader");
        let (fold, tier) = fold_tiered(dir, &mut reader, from, to, config).expect("fold");
        let summary = format!("{:?} {:?}", tier.map(|t| t.rows), fold.summary);
        let maker = history_maker();
        let (points, _) = crate::store_history::read_points(
            dir,
            &maker,
            from / 1_000_000,
            to / 1_000_000,
            2048,
            &mut Default::default(),
        );
        (rows, summary, format!("{points:?}"))
    }

    fn minute_segments(dir: &Path) -> Vec<PathBuf> {
        proctor_store::segment::list_segments(&dir.join(MINUTE_TIER))
            .expect("list")
            .into_iter()
            .map(|s| s.path)
            .collect()
    }

    /// Compaction writes each whole six hours of the minute tier as one block of 360 rows, and
    /// every reader answers as before: the rows, a report over compacted and hour blocks, the
    /// history. A crash after the compacted block's rename but before the hour blocks went
    /// (both left) reads each minute once; the next compaction removes the leftovers.
    #[test]
    fn compaction_keeps_every_row_and_a_crash_midway_reads_each_minute_once() {
        let dir = store_with_hour_blocks("rows");
        let before = readings(&dir);
        assert_eq!(before.0.len(), 26 * 60);
        assert!(before.1.starts_with("Some(1350) "), "the report read the tier from hour 3.5 to 26");
        let hour_segments = minute_segments(&dir);
        assert_eq!(hour_segments.len(), 26);
        let saved = dir.join("saved");
        std::fs::create_dir_all(&saved).expect("dir");
        for path in &hour_segments {
            std::fs::copy(path, saved.join(path.file_name().expect("name"))).expect("copy");
        }
        let compact_all = || {
            let (mut w, _) = Writer::open(&dir.join(MINUTE_TIER), RollupConfig::default().tier(false)).expect("writer");
            let mut report = RollReport::default();
            compact(&mut w, COMPACT_HOURS * 3600, T0 + 26 * 3600, u64::MAX, &mut report).expect("compact");
            report
        };
        let report = compact_all();
        assert_eq!((report.compacted_windows, report.windows_left), (4, 0));
        // Four windows of six hours, then hours 24 and 25 (their window is not over).
        assert_eq!(minute_segments(&dir).len(), 4 + 2);
        let mut tier = Reader::open(&dir.join(MINUTE_TIER)).expect("tier");
        let frames = tier.event_frames(0, u64::MAX).expect("frames");
        let Some(Event::Rollup(first)) = tier.read_event(&frames[0]) else { panic!("a block") };
        assert_eq!((first.rows.len(), first.rows[0].start_unix_s), (360, T0));
        assert!(readings(&dir) == before, "the same rows, report and history after compaction");

        // The crash: the hour segments that were removed are back beside the compacted ones.
        for path in &hour_segments {
            if !path.exists() {
                std::fs::copy(saved.join(path.file_name().expect("name")), path).expect("copy");
            }
        }
        assert_eq!(minute_segments(&dir).len(), 26);
        assert!(readings(&dir) == before, "each minute once with both copies there");
        assert_eq!(compact_all().compacted_windows, 4);
        assert_eq!(minute_segments(&dir).len(), 6);
        assert!(readings(&dir) == before);
        // Compacted windows are left alone after that.
        assert_eq!(compact_all().compacted_windows, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A window with a segment set aside as damaged (`*.seg.corrupt`) is left as it is: the
    /// file is evidence, and compaction neither rewrites nor removes it.
    #[test]
    fn a_window_with_a_set_aside_segment_is_not_compacted() {
        let dir = store_with_hour_blocks("set-aside");
        let hour_segments = minute_segments(&dir);
        let mut corrupt = hour_segments[2].as_os_str().to_owned();
        corrupt.push(".corrupt");
        std::fs::rename(&hour_segments[2], &corrupt).expect("set aside");
        let (mut w, _) = Writer::open(&dir.join(MINUTE_TIER), RollupConfig::default().tier(false)).expect("writer");
        let mut report = RollReport::default();
        compact(&mut w, COMPACT_HOURS * 3600, T0 + 26 * 3600, u64::MAX, &mut report).expect("compact");
        assert_eq!((report.compacted_windows, report.windows_left), (3, 1));
        assert!(Path::new(&corrupt).exists());
        assert_eq!(
            minute_segments(&dir)[..5],
            hour_segments[..2].iter().chain(&hour_segments[3..6]).cloned().collect::<Vec<_>>()[..]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Retention drops compacted segments whole, oldest first, as it drops hour blocks: with 12
    /// hours kept before the newest segment's start (hour 25), a segment goes once the next one
    /// starts before hour 13, so hours 0 to 11 go.
    #[test]
    fn retention_drops_compacted_blocks_whole() {
        let dir = store_with_hour_blocks("retention");
        let (mut w, _) = Writer::open(&dir.join(MINUTE_TIER), RollupConfig::default().tier(false)).expect("writer");
        compact(&mut w, COMPACT_HOURS * 3600, T0 + 26 * 3600, u64::MAX, &mut RollReport::default()).expect("compact");
        drop(w);
        let config = RollupConfig { minute_age: Duration::from_secs(12 * 3600), ..RollupConfig::default() };
        let (_, opened) = Writer::open(&dir.join(MINUTE_TIER), config.tier(false)).expect("writer");
        assert_eq!(opened.removed_by_retention.len(), 2, "{opened:?}");
        let rows = readings(&dir).0;
        assert_eq!((rows.len(), rows[0].0), (14 * 60, T0 + 12 * 3600));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn finished_hours_roll_into_minutes_and_days_into_hours_and_reports_read_them() {
        let dir = raw_store("proctor-rollup-test");
        let config = RollupConfig::default();
        let first = roll(&dir, &config).expect("rolls");
        assert_eq!((first.minute_blocks, first.hours_left), (HOURS_PER_ROLL, 26 - HOURS_PER_ROLL), "{first:?}");
        let (mut minute_blocks, mut hour_blocks, mut last) = (first.minute_blocks, first.hour_blocks, first);
        while last.hours_left > 0 {
            last = roll(&dir, &config).expect("rolls");
            minute_blocks += last.minute_blocks;
            hour_blocks += last.hour_blocks;
        }
        // Hours 0 to 25 are over; hour 26 is not (its last sample is at 26:29). Day 0 is
        // finished in the minute tier, day 1 is not.
        assert_eq!((minute_blocks, hour_blocks), (26, 1));
        assert_eq!(last.minute_tier_end_unix_s, Some(T0 + 26 * 3600));
        let again = roll(&dir, &config).expect("rolls");
        assert_eq!((again.minute_blocks, again.hour_blocks), (0, 0), "nothing rolled twice");

        // The whole range from raw samples, then with the first 20 hours' raw segments gone
        // (as retention would drop them): the minute rows stand in for them.
        let select = Some(GroupSelect::Named(vec!["web".into()]));
        let fold_config = FoldConfig { budget: 0, max_points: 26, groups: select, ..FoldConfig::default() };
        let (from, to) = (T0 * NS, (T0 + 26 * 3600 + 1800) * NS);
        let mut reader = Reader::open(&dir).expect("reader");
        let raw =
            fold_range(&mut reader, from, to, FoldConfig { max_span: None, ..fold_config.clone() }).expect("fold");
        for segment in reader.segments() {
            if segment.start_ns < (T0 + 20 * 3600) * NS {
                std::fs::remove_file(&segment.path).expect("rm");
            }
        }
        let mut reader = Reader::open(&dir).expect("reader");
        let (tiered, tier) =
            fold_tiered(&dir, &mut reader, from, to, FoldConfig { max_span: None, ..fold_config }).expect("fold");
        let tier = tier.expect("the minute tier was read");
        assert_eq!(tier.tier, "1m");
        assert_eq!(tier.rows, 26 * 60);
        assert_eq!(tiered.summary.rollup_rows, 26 * 60);
        assert_eq!(tiered.summary.samples, raw.summary.samples, "every sample is behind a row or read raw");
        let head = |f: &crate::range::Fold, name: &str| {
            let h = f.summary.headline.iter().find(|h| h.name == name).expect(name);
            (h.mean, h.max)
        };
        let (raw_used, tier_used) = (head(&raw, "host.memory.used_bytes"), head(&tiered, "host.memory.used_bytes"));
        assert!((raw_used.0 - tier_used.0).abs() / raw_used.0 < 1e-3, "{raw_used:?} vs {tier_used:?}");
        assert!((raw_used.1 - tier_used.1).abs() / raw_used.1 < 1e-3, "{raw_used:?} vs {tier_used:?}");
        let (raw_cpu, tier_cpu) = (head(&raw, "host.cpu.user_percent"), head(&tiered, "host.cpu.user_percent"));
        assert!((raw_cpu.0 - tier_cpu.0).abs() < 0.01, "{raw_cpu:?} vs {tier_cpu:?}");
        let web = |f: &crate::range::Fold, name: &str| {
            let g = &f.summary.groups[0];
            g.headline.iter().find(|h| h.name == name).map(|h| (h.mean, h.max)).expect(name)
        };
        // Rows keep 4 significant digits: 100 MiB to within 0.1 MB.
        let (a, b) = (web(&raw, "rss"), web(&tiered, "rss"));
        assert!((a.0 - b.0).abs() / a.0 < 1e-3 && (a.1 - b.1).abs() / a.1 < 1e-3, "{a:?} vs {b:?}");
        let (a, b) = (web(&raw, "cpu"), web(&tiered, "cpu"));
        assert!((a.0 - b.0).abs() < 0.01 && (a.0 - 25.0).abs() < 0.01, "{a:?} vs {b:?}");

        // The history API's store part: the minute rows stand in before the raw samples, each
        // point a row's maximum of the ring's series that the tiers keep.
        let maker = history_maker();
        let raw_first_ms = reader.segments().iter().map(|s| s.start_ns / 1_000_000).min().expect("raw left");
        let used = maker.names().iter().position(|n| n == "host.memory.used_bytes").expect("memory series");
        let user = maker.names().iter().position(|n| n == "host.cpu.user_percent").expect("cpu series");
        let load = maker.names().iter().position(|n| n == "host.load.avg1").expect("load series");
        let history = |budget| {
            crate::store_history::read_points(
                &dir,
                &maker,
                from / 1_000_000,
                to / 1_000_000,
                budget,
                &mut Default::default(),
            )
        };
        let (points, report) = history(2048);
        let part = report.tier.clone().expect("a tier part");
        assert_eq!(part.tier, "1m");
        let old: Vec<_> = points.iter().filter(|p| p.time_ms < raw_first_ms).collect();
        assert_eq!(old.len(), part.points);
        assert_eq!(part.points as u64, part.rows, "a point per row within the budget");
        assert_eq!(part.rows, (raw_first_ms / 1000 - T0).div_ceil(60), "every minute before the raw samples: {part:?}");
        for p in &old {
            // A row is timed at its start: memory used grew 1 MiB an hour.
            let hour = (p.time_ms / 1000 - T0) / 3600;
            let want = ((1u64 << 30) + hour * (1 << 20)) as f64;
            assert!((p.values[used] - want).abs() / want < 1e-3, "{} at {}", p.values[used], p.time_ms);
            // The first minute has one sample and no rate.
            if p.time_ms / 1000 > T0 {
                assert!((p.values[user] - 12.5).abs() < 0.01, "{} at {}", p.values[user], p.time_ms);
            }
            // Load is a stored series of the catalog: the tiers keep it (a row's max here).
            assert_eq!(p.values[load], 1.5, "load at {}", p.time_ms);
        }
        assert!(points.iter().any(|p| p.time_ms >= raw_first_ms), "the raw part follows");
        // A small budget: the hour tier, its rows bucketed into at most the budget.
        let (points, report) = history(10);
        let part = report.tier.expect("a tier part");
        assert_eq!((part.tier, part.points), ("1h", 10), "{part:?}");
        assert_eq!(points.iter().filter(|p| p.time_ms < raw_first_ms).count(), 10);

        // The hour tier holds day 0 as 24 rows of 60 samples.
        let mut hours = Reader::open(&dir.join(HOUR_TIER)).expect("hour tier");
        let frames = hours.event_frames(0, u64::MAX).expect("frames");
        let Some(Event::Rollup(day)) = hours.read_event(&frames[0]) else { panic!("a rollup block") };
        assert_eq!((day.span_s, day.rows.len(), day.rows[0].samples), (3600, 24, 60));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
