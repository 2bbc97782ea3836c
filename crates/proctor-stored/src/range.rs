//! Reading a stored range back, one way for every surface: `proctor report`, `/api/v1/report`
//! and the part of `/api/v1/history` older than the ring all choose their frames with [`pick`]
//! under one frame budget, and the two reports fold them with [`fold_range`].
//!
//! Decoding is the cost (a 600-process sample is ~0.6 ms to decode whole), so a read decodes at
//! most `budget` frames. When the range holds no more frames than that, every frame is read.
//! Past it, the budget is spread by frames, not by wall time — a day with 430 stored samples
//! reads all 430 rather than the few that happen to fall on a time grid: the frames of each
//! segment are cut into cells of `stride` consecutive frames (aligned to the segment's first
//! frame, so a moving window picks the same frames again), and each cell gives its key frame if
//! it has one (a key decodes alone) or else its first frame. Process CPU between two read
//! frames telescopes to the counters' difference, exact for processes that lived through both;
//! one that lived only between two read frames is missed, and RSS peaks and means are over the
//! read frames. Every answer says how many frames were in the range, how many were read and
//! the stride.
//!
//! What it does not do: write or repair the store, read `/proc`, or choose a budget for a
//! surface (each passes its own; [`DEFAULT_FRAMES`] is the one they share unless asked).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proctor_model::RollupBlock;
use proctor_report::{GroupSelect, RangeBuilder, RangeConfig, RangeSummary};
use proctor_store::frame::FrameKind;
use proctor_store::{Reader, StoreError, StoredFrame};

/// Frames a range read decodes unless the caller asks for another budget: 16 minutes at 1 s
/// are read whole, an hour one frame in 4, a day one in 120 (all key frames). A day with ~570
/// processes folds in about half a second (docs/performance.md).
pub const DEFAULT_FRAMES: usize = 1000;

/// The longest range an HTTP request folds; an older `from` is clamped (and said).
pub const MAX_SPAN: Duration = Duration::from_secs(8 * 24 * 3600);

/// The longest range an HTTP report folds through the rollup tiers (the hour tier's two
/// years, and a day): raw frames stay under the frame budget, and rows are cheap.
pub const MAX_TIERED_SPAN: Duration = Duration::from_secs(731 * 24 * 3600);

/// The frames a budget reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub frames: Vec<StoredFrame>,
    /// Frames per cell: 1 when every frame is read.
    pub stride: u64,
}

/// Every frame of `frames` (time order) when there are at most `budget` (0: no limit); else one
/// per cell of `stride` consecutive frames of a segment, with the smallest stride on
/// [`stride_ladder`] whose cells fit the budget.
pub fn pick(frames: &[StoredFrame], budget: usize) -> Picked {
    if budget == 0 || frames.len() <= budget {
        return Picked { frames: frames.to_vec(), stride: 1 };
    }
    let runs = segment_runs(frames);
    // The most cells a stride can give: each run of a segment's frames spans its cells.
    let cells = |stride: u64| -> usize {
        runs.iter().map(|&(first, last)| (last / stride - first / stride + 1) as usize).sum()
    };
    let stride = stride_ladder().find(|&stride| cells(stride) <= budget).unwrap_or(u64::MAX);
    Picked { frames: one_per_cell(frames, stride), stride }
}

/// The strides a read may use: the divisors of 60 (a chunk is 60 frames: one key frame, then
/// deltas), then 60 times each of them, then 3600 times, and so on. A stride from a short
/// ladder stays the same while a window moves (a stride fitted to each request would flip
/// between neighbours and pick other frames each time), and one that is a multiple of 60 lands
/// on key frames. Neighbours differ by at most 2×, so at least half the budget is used.
pub fn stride_ladder() -> impl Iterator<Item = u64> {
    const STEPS: [u64; 11] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
    (0u32..8).flat_map(|power| STEPS.iter().map(move |step| step.saturating_mul(60u64.saturating_pow(power))))
}

/// (first, last) ordinal of each segment's frames in `frames`.
fn segment_runs(frames: &[StoredFrame]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(usize, u64, u64)> = Vec::new();
    for f in frames {
        match runs.last_mut() {
            Some((segment, first, last)) if *segment == f.segment => {
                *first = (*first).min(f.ordinal);
                *last = (*last).max(f.ordinal);
            }
            _ => runs.push((f.segment, f.ordinal, f.ordinal)),
        }
    }
    runs.into_iter().map(|(_, first, last)| (first, last)).collect()
}

fn one_per_cell(frames: &[StoredFrame], stride: u64) -> Vec<StoredFrame> {
    let cell = |f: &StoredFrame| (f.segment, f.ordinal / stride);
    let mut picked = Vec::new();
    let mut rest = frames;
    while let Some(first) = rest.first() {
        let len = rest.iter().position(|f| cell(f) != cell(first)).unwrap_or(rest.len());
        picked.push(*rest[..len].iter().find(|f| f.frame.header.kind == FrameKind::Key).unwrap_or(first));
        rest = &rest[len..];
    }
    picked
}

/// What a range read found besides the samples. Problems land here; none is an error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadStats {
    /// The range read (after clamping), Unix ns, both ends included.
    pub from_ns: u64,
    pub to_ns: u64,
    /// `from` was older than the span allowed and was moved up.
    pub clamped: bool,
    pub frames_in_range: usize,
    /// Frames decoded into samples (a frame that could not be read is not counted).
    pub frames_read: usize,
    pub frame_budget: usize,
    /// Frames per cell: 1 when every frame in the range was read.
    pub stride: u64,
    /// Samples the store holds but could not give: frames that failed their CRC or did not
    /// decode, and frames lost to damage (as far as their headers show), each counted once.
    pub bad_frames: usize,
    /// Files with damage, and files named like segments that were skipped unread.
    pub damaged_segments: usize,
    /// What was lost, in a line, then the first few problems with their file (the store's own
    /// wording, as `dump` and `replay` print it).
    pub problems: Vec<String>,
    pub elapsed_ms: f64,
}

impl ReadStats {
    /// `[from_ns, to_ns]`, with `from_ns` moved up to `max_span` before `to_ns` when given.
    pub fn new(from_ns: u64, to_ns: u64, max_span: Option<Duration>, budget: usize) -> ReadStats {
        let floor = max_span.map_or(0, |span| to_ns.saturating_sub(u64::try_from(span.as_nanos()).unwrap_or(u64::MAX)));
        ReadStats {
            from_ns: from_ns.max(floor),
            to_ns,
            clamped: from_ns < floor,
            frame_budget: budget,
            stride: 1,
            ..ReadStats::default()
        }
    }

    /// Takes the reader's problems in. The reader notes each bad frame, damaged stretch and
    /// skipped file once however often it met them (a frame read twice, a segment walked for
    /// each range), so nothing here is counted twice.
    pub fn note_reader(&mut self, reader: &Reader) {
        let report = reader.report();
        self.bad_frames = usize::try_from(report.samples_lost()).unwrap_or(usize::MAX);
        let damaged: BTreeSet<&PathBuf> = report.damaged_segments.iter().map(|d| &d.path).collect();
        self.damaged_segments = damaged.len() + report.skipped.len();
        self.problems.extend(report.summary());
        let lines = report.problems();
        let shown = lines.len().min(MAX_PROBLEMS);
        self.problems.extend(lines[..shown].iter().cloned());
        if lines.len() > shown {
            self.problems.push(format!("and {} more problems", lines.len() - shown));
        }
    }
}

/// Problem lines an answer carries; the counts say the rest.
pub const MAX_PROBLEMS: usize = 8;

/// How the fold lays out what it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldConfig {
    /// Frames decoded at most (0: every frame).
    pub budget: usize,
    /// Buckets per host series (plots); the whole-range headline is kept either way.
    pub max_points: usize,
    /// Keep each read sample's host values (for correlating latencies with them).
    pub keep_points: bool,
    /// Clamp `from` to this span before `to`.
    pub max_span: Option<Duration>,
    /// Fold the groups stored with the samples into series for these groups.
    pub groups: Option<GroupSelect>,
}

impl Default for FoldConfig {
    fn default() -> Self {
        FoldConfig { budget: DEFAULT_FRAMES, max_points: 1, keep_points: false, max_span: Some(MAX_SPAN), groups: None }
    }
}

/// A folded range: the summary (every process kept, cut by the caller) and what the read did.
#[derive(Debug, Clone)]
pub struct Fold {
    pub summary: RangeSummary,
    pub stats: ReadStats,
}

/// Folds `[from_ns, to_ns]` of `reader`'s store: [`pick`]s frames under `config.budget`,
/// decodes them lean (processes' `stat` fields and command lines; no status, io, PSS or
/// cost) and folds them with `proctor-report`'s [`RangeBuilder`]. Only listing the store's
/// frames can fail; a frame that cannot be read is skipped and counted.
pub fn fold_range(reader: &mut Reader, from_ns: u64, to_ns: u64, config: FoldConfig) -> Result<Fold, StoreError> {
    let started = Instant::now();
    let mut stats = ReadStats::new(from_ns, to_ns, config.max_span, config.budget);
    let frames = reader.frames(stats.from_ns, stats.to_ns)?;
    stats.frames_in_range = frames.len();
    let picked = pick(&frames, config.budget);
    drop(frames);
    stats.stride = picked.stride;
    // Buckets span the samples that exist in the range, not the range asked for: a 13 s
    // recording under the default hour gets its points spread over its 13 s, not 600 buckets
    // of 6 s of which two hold data.
    let (data_from, data_to) = match (picked.frames.first(), picked.frames.last()) {
        (Some(first), Some(last)) => (first.unix_ns().max(stats.from_ns), last.unix_ns().min(stats.to_ns)),
        _ => (stats.from_ns, stats.to_ns),
    };
    let mut builder = builder_for(&config, data_from, data_to);
    fold_frames(reader, &picked.frames, &config, &mut builder, &mut stats);
    stats.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(Fold { summary: builder.finish(), stats })
}

/// A builder over the data's span `[data_from, data_to]` with the fold's points and groups.
/// Decodes `frames` (lean, or whole where groups are asked for) into `builder`, counting what
/// was read and what the reader skipped.
fn fold_frames(
    reader: &mut Reader,
    frames: &[StoredFrame],
    config: &FoldConfig,
    builder: &mut RangeBuilder,
    stats: &mut ReadStats,
) {
    // Groups' swap and PSS live in the parts a lean decode skips.
    let full = config.groups.is_some();
    for frame in frames {
        if let Some(sample) = if full { reader.read(frame) } else { reader.read_lean(frame) } {
            stats.frames_read += 1;
            builder.push(sample);
        }
    }
    stats.note_reader(reader);
}

fn builder_for(config: &FoldConfig, data_from: u64, data_to: u64) -> RangeBuilder {
    let range = RangeConfig {
        from_ns: data_from,
        to_ns: data_to.max(data_from),
        max_points: config.max_points.max(1),
        top: usize::MAX,
        keep_points: config.keep_points,
        ..RangeConfig::default()
    };
    let builder = RangeBuilder::new(range);
    match config.groups.clone() {
        Some(select) => builder.with_groups(select),
        None => builder,
    }
}

/// The rollup tier a fold read for the part of its range older than the raw samples.
#[derive(Debug, Clone, PartialEq)]
pub struct TierRead {
    /// `1m` or `1h`.
    pub tier: &'static str,
    pub blocks: usize,
    pub rows: u64,
    /// Blocks that could not be read (skipped, counted).
    pub bad_blocks: usize,
    /// The span the rows covered, Unix seconds.
    pub first_unix_s: Option<u64>,
    pub end_unix_s: Option<u64>,
}

/// Hours of minute rows in a compacted block of the minute tier ([`crate::rollup::compact`]
/// writes them, and says why six).
pub const COMPACT_HOURS: u64 = 6;

/// The rollup tiers: directory under the data directory, label, the longest span of a block
/// and a row's span in seconds (a minute tier's block is an hour of minute rows, or
/// [`COMPACT_HOURS`] once compacted; an hour tier's a day of hour rows).
pub const TIERS: [(&str, &str, u64, u64); 2] =
    [(proctor_store::MINUTE_TIER, "1m", COMPACT_HOURS * 3600, 60), (proctor_store::HOUR_TIER, "1h", 86_400, 3600)];

/// The block of a rollup tier at `frame`, without the rows that a block read before it in the
/// same pass held (`read_until_s`: where the rows read so far end, 0 to start). Every reader of
/// the tiers reads through it, in frame order: a crash in the middle of a compaction
/// ([`crate::rollup::compact`]) can leave a compacted block beside hour blocks holding some of
/// the same rows, and each row counts once. `None` when the frame does not read (the reader's
/// report says why).
pub fn read_tier_block(tier: &mut Reader, frame: &StoredFrame, read_until_s: &mut u64) -> Option<RollupBlock> {
    let Some(proctor_store::Event::Rollup(mut block)) = tier.read_event(frame) else { return None };
    if block.rows.first().is_some_and(|r| r.start_unix_s < *read_until_s) {
        block.rows.retain(|r| r.start_unix_s >= *read_until_s);
    }
    if let Some(end) = block.end_unix_s() {
        *read_until_s = (*read_until_s).max(end);
    }
    Some(block)
}

/// A tier's (block, row) spans in seconds, by label.
pub fn tier_spans(label: &str) -> (u64, u64) {
    TIERS.iter().find(|t| t.1 == label).map_or((3600, 60), |t| (t.2, t.3))
}

/// The reader of the tier labelled `label` (`1m` or `1h`) under `data`; `None` when there is
/// no such directory.
pub fn tier_reader(data: &std::path::Path, label: &str) -> Option<Result<Reader, StoreError>> {
    let (name, ..) = TIERS.iter().find(|t| t.1 == label)?;
    let dir = data.join(name);
    dir.is_dir().then(|| Reader::open(&dir))
}

/// The rollup tier to read for a range starting at `from_ns`: the finest whose oldest block
/// reaches back to it, else the one reaching furthest (`coarse`: the hour tier whenever it
/// reaches back as far as the minute tier would). `1m` or `1h`, and its reader; `None` when
/// neither tier holds a block.
pub fn open_tier(data: &std::path::Path, from_ns: u64, coarse: bool) -> Option<(&'static str, Reader)> {
    let mut tiers = Vec::new();
    for (_, label, ..) in TIERS {
        let Some(Ok(tier)) = tier_reader(data, label) else { continue };
        if let Some(first) = tier.segments().iter().find(|s| !s.set_aside).map(|s| s.start_ns) {
            tiers.push((label, tier, first));
        }
    }
    if coarse {
        if let Some(i) = tiers.iter().position(|(label, _, first)| *label == "1h" && *first <= from_ns) {
            let (label, tier, _) = tiers.swap_remove(i);
            return Some((label, tier));
        }
    }
    let chosen = match tiers.iter().position(|(_, _, first)| *first <= from_ns) {
        Some(i) => Some(tiers.swap_remove(i)),
        None => tiers.into_iter().min_by_key(|(_, _, first)| *first),
    };
    chosen.map(|(label, tier, _)| (label, tier))
}

/// [`fold_range`] over the raw samples and, for the part of the range older than the oldest
/// raw sample, the finest rollup tier that reaches back to `from` (else the one reaching
/// furthest): a 90-day report reads 129,600 minute rows, not 7.8 million samples. Rows up to
/// the tier's end, then raw samples after it; the raw part is read under `config.budget`.
pub fn fold_tiered(
    data: &std::path::Path,
    reader: &mut Reader,
    from_ns: u64,
    to_ns: u64,
    config: FoldConfig,
) -> Result<(Fold, Option<TierRead>), StoreError> {
    const NS: u64 = 1_000_000_000;
    let raw_first = reader.segments().iter().find(|s| !s.set_aside).map_or(u64::MAX, |s| s.start_ns);
    // Within a minute of the raw tier's start is the raw tier's range.
    if from_ns.saturating_add(60 * NS) >= raw_first {
        return fold_range(reader, from_ns, to_ns, config).map(|f| (f, None));
    }
    let Some((label, mut tier)) = open_tier(data, from_ns, false) else {
        return fold_range(reader, from_ns, to_ns, config).map(|f| (f, None));
    };
    let started = Instant::now();
    let mut stats = ReadStats::new(from_ns, to_ns, config.max_span, config.budget);
    let (block_s, row_s) = tier_spans(label);
    let blocks = tier.event_frames(stats.from_ns.saturating_sub(block_s * NS), stats.to_ns)?;
    let mut read = TierRead { tier: label, blocks: 0, rows: 0, bad_blocks: 0, first_unix_s: None, end_unix_s: None };
    // Blocks are decoded one at a time (a 90-day read is 2,160 blocks of 60 rows of ~500
    // series: held at once, gigabytes); the first and last are decoded first for the bounds.
    let block_at = |tier: &mut Reader, frame: &StoredFrame| match tier.read_event(frame) {
        Some(proctor_store::Event::Rollup(block)) => Some(block),
        _ => None,
    };
    let from_s = stats.from_ns / NS;
    // The blocks before `from` (up to a block's longest span of hour blocks) and one more.
    read.first_unix_s = blocks
        .iter()
        .take(2 + (block_s / 3600) as usize)
        .filter_map(|f| block_at(&mut tier, f))
        .flat_map(|b| b.rows.into_iter().map(|r| r.start_unix_s + u64::from(r.span_s)))
        .find(|end| *end > from_s)
        .map(|end| end.saturating_sub(row_s).max(from_s));
    read.end_unix_s = blocks.iter().rev().take(2).find_map(|f| block_at(&mut tier, f)).and_then(|b| b.end_unix_s());
    let tier_end_ns = read.end_unix_s.map_or(stats.from_ns, |s| s.saturating_mul(NS).min(stats.to_ns));
    let frames = if tier_end_ns < stats.to_ns { reader.frames(tier_end_ns, stats.to_ns)? } else { Vec::new() };
    stats.frames_in_range = frames.len();
    let picked = pick(&frames, config.budget);
    drop(frames);
    stats.stride = picked.stride;
    let data_from = read.first_unix_s.map_or(stats.from_ns, |s| (s * NS).max(stats.from_ns));
    let data_to = picked.frames.last().map_or(tier_end_ns, |f| f.unix_ns().min(stats.to_ns));
    let mut builder = builder_for(&config, data_from, data_to);
    let until_s = tier_end_ns.div_ceil(NS);
    let mut read_until_s = 0;
    for frame in &blocks {
        let Some(block) = read_tier_block(&mut tier, frame, &mut read_until_s) else {
            read.bad_blocks += 1;
            continue;
        };
        read.blocks += 1;
        let before = builder.rollup_rows();
        builder.push_rollup_block(&block, from_s.saturating_sub(u64::from(block.span_s)), until_s);
        read.rows += builder.rollup_rows() - before;
    }
    fold_frames(reader, &picked.frames, &config, &mut builder, &mut stats);
    stats.bad_frames += read.bad_blocks;
    stats.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((Fold { summary: builder.finish(), stats }, Some(read)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proctor_store::frame::FrameHeader;
    use proctor_store::segment::FrameRef;

    /// Frames of one-second samples: `per_segment` frames in each of `segments` segments, a
    /// key frame every `chunk`.
    fn frames(segments: usize, per_segment: u64, chunk: u64) -> Vec<StoredFrame> {
        let mut out = Vec::new();
        for segment in 0..segments {
            for ordinal in 0..per_segment {
                let kind = if ordinal % chunk == 0 { FrameKind::Key } else { FrameKind::Delta };
                let unix_ns = (segment as u64 * per_segment + ordinal) * 1_000_000_000;
                let header = FrameHeader { unix_ns, kind, version: 2, payload_len: 1, crc: 0 };
                let key_offset = (ordinal - ordinal % chunk) * 100;
                out.push(StoredFrame {
                    segment,
                    ordinal,
                    frame: FrameRef { offset: ordinal * 100, header, key_offset },
                });
            }
        }
        out
    }

    #[test]
    fn every_frame_is_read_when_the_budget_allows() {
        let all = frames(2, 215, 60);
        let picked = pick(&all, 1000);
        assert_eq!((picked.frames.len(), picked.stride), (430, 1));
        assert_eq!(pick(&all, 0).frames.len(), 430, "0 is no limit");
    }

    #[test]
    fn a_budget_is_spread_by_frames_and_prefers_key_frames() {
        let all = frames(24, 3600, 60);
        let picked = pick(&all, 1000);
        // 86,400 frames need a stride of 87; the ladder's next step is 120.
        assert_eq!(picked.stride, 120);
        assert!(picked.frames.len() <= 1000 && picked.frames.len() > 500, "{}", picked.frames.len());
        // Spread evenly: consecutive picks are never more than two strides apart.
        for pair in picked.frames.windows(2) {
            let gap = pair[1].unix_ns() - pair[0].unix_ns();
            assert!(gap <= 2 * picked.stride * 1_000_000_000, "{gap}");
        }
        let keys = picked.frames.iter().filter(|f| f.frame.header.kind == FrameKind::Key).count();
        assert_eq!(keys, picked.frames.len(), "a stride of 120 frames lands on key frames every time");
    }

    #[test]
    fn a_moving_window_picks_the_same_frames_again() {
        let all = frames(3, 1000, 60);
        let a = pick(&all[100..2600], 100);
        let b = pick(&all[130..2630], 100);
        assert_eq!((a.stride, b.stride), (30, 30));
        let later: BTreeSet<u64> = b.frames.iter().map(StoredFrame::unix_ns).collect();
        let shared = a.frames.iter().filter(|f| later.contains(&f.unix_ns())).count();
        assert!(shared + 3 >= a.frames.len(), "{shared} of {} picked again", a.frames.len());
    }

    #[test]
    fn the_ladder_climbs_by_at_most_twice() {
        let steps: Vec<u64> = stride_ladder().take(24).collect();
        assert_eq!(&steps[..13], &[1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120]);
        for pair in steps.windows(2) {
            assert!(pair[1] > pair[0] && pair[1] <= 2 * pair[0], "{pair:?}");
        }
    }

    /// A store of `n` host samples of this machine, one second apart, ending at `end_ns`.
    pub(crate) fn short_store(dir: &std::path::Path, n: u64, end_ns: u64) {
        short_store_with(dir, n, end_ns, proctor_store::StoreConfig::default());
    }

    /// A store whose damaged delta costs that frame alone (record version 2; in version 3 it
    /// costs the rest of its chunk): for counting what one bad frame does.
    pub(crate) fn short_store_v2(dir: &std::path::Path, n: u64, end_ns: u64) {
        let config = proctor_store::StoreConfig {
            record_version: proctor_store::codec::RECORD_VERSION_2,
            ..proctor_store::StoreConfig::default()
        };
        short_store_with(dir, n, end_ns, config);
    }

    fn short_store_with(dir: &std::path::Path, n: u64, end_ns: u64, config: proctor_store::StoreConfig) {
        let (mut writer, _) = proctor_store::Writer::open(dir, config).expect("store");
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            processes: false,
            pss_budget: 0.0,
            ..proctor_sampler::SamplerConfig::default()
        });
        let base = sampler.sample();
        for i in 0..n {
            let mut sample = base.clone();
            sample.seq = i;
            sample.unix_ns = end_ns - (n - 1 - i) * 1_000_000_000;
            sample.mono_ns = base.mono_ns + i * 1_000_000_000;
            writer.append(&sample).expect("append");
        }
    }

    #[test]
    fn buckets_span_the_samples_in_the_range_not_the_range_asked_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let end = 1_700_000_000_000_000_000;
        short_store(dir.path(), 13, end);
        let mut reader = Reader::open(dir.path()).expect("reader");
        let config = FoldConfig { budget: 1000, max_points: 600, keep_points: false, max_span: None, groups: None };
        // The default hour of `proctor report`, around a 13 s recording.
        let fold = fold_range(&mut reader, end - 3600 * 1_000_000_000, end, config).expect("fold");
        assert_eq!(fold.stats.frames_read, 13);
        let (from, to) = (fold.summary.from_ns, fold.summary.to_ns);
        assert_eq!((from, to), (end - 12_000_000_000, end), "the buckets cover the recording");
        let memory =
            fold.summary.series.iter().find(|s| s.name == "host.memory.used_bytes").expect("host.memory.used_bytes");
        assert_eq!(memory.points.len(), 13, "one bucket per sample, not two buckets of six seconds");
        assert!(memory.points.iter().all(|p| p.end_ns - p.start_ns < 1_000_000_000));
    }

    /// Flips a byte in the payload of the `index`th frame of `dir`'s only segment: its CRC fails
    /// when it is read, while the header walk still lists it.
    pub(crate) fn damage_frame(dir: &std::path::Path, index: usize) {
        let segment = proctor_store::segment::list_segments(dir).expect("list")[0].path.clone();
        let walk = proctor_store::segment::walk(&segment, proctor_store::segment::Check::Headers).expect("walk");
        let mut bytes = std::fs::read(&segment).expect("read");
        bytes[walk.frames[index].offset as usize + 30] ^= 1;
        std::fs::write(&segment, &bytes).expect("write");
    }

    /// `note_reader` counts a bad frame once however often the reader met it: the history's
    /// store part said `bad_frames` 104 for a store with 52 (each was read twice).
    #[test]
    fn a_bad_frame_read_again_and_again_is_counted_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let end = 1_700_000_000_000_000_000;
        short_store_v2(dir.path(), 13, end);
        damage_frame(dir.path(), 5);
        let mut reader = Reader::open(dir.path()).expect("reader");
        let config = FoldConfig { budget: 1000, max_points: 10, keep_points: false, max_span: None, groups: None };
        let mut fold = fold_range(&mut reader, end - 20_000_000_000, end, config.clone()).expect("fold");
        for _ in 0..2 {
            fold = fold_range(&mut reader, end - 20_000_000_000, end, config.clone()).expect("fold again");
            let frames = reader.all_frames().expect("frames");
            let _ = (reader.read(&frames[5]), reader.read_lean(&frames[5]));
        }
        let mut stats = fold.stats.clone();
        stats.problems.clear();
        stats.note_reader(&reader);
        assert_eq!((fold.stats.frames_in_range, fold.stats.frames_read), (13, 12));
        assert_eq!((stats.bad_frames, stats.damaged_segments), (1, 0), "{stats:?}");
        assert_eq!(stats.problems.len(), 2, "a summary and one line: {:?}", stats.problems);
        assert_eq!(stats.problems[0], "1 sample could not be read");
        assert!(
            stats.problems[1].starts_with("skipped the frame at ") && stats.problems[1].ends_with(": crc mismatch")
        );
    }

    #[test]
    fn clamping_says_so() {
        let day = 86_400 * 1_000_000_000;
        let stats = ReadStats::new(0, 10 * day, Some(MAX_SPAN), 100);
        assert!(stats.clamped);
        assert_eq!(stats.from_ns, 2 * day);
        assert!(!ReadStats::new(0, 10 * day, None, 100).clamped);
    }
}
