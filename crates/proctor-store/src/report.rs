//! What a [`Reader`](crate::Reader) could not read, kept rather than raised, and the one way it
//! is said: every command and answer that reads a store prints or returns these lines, so a
//! skipped file or a damaged stretch is never dropped without a word.
//!
//! Loss is counted in samples where the store knows them (a bad frame is one sample; damage
//! counts the frame headers it held) and estimated where it cannot (a file that cannot be read
//! at all is its size over the mean frame size of what was read).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::frame::FrameDefect;
use crate::segment::Damage;

/// A file named like a segment that was not read at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: PathBuf,
    /// Why, without the path: "a FIFO, not a segment file", "cannot open: Permission denied (os
    /// error 13)".
    pub reason: String,
    /// Its size, when it is a regular file: what was not read.
    pub bytes: Option<u64>,
}

/// A damaged stretch of a segment that was read around.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSegment {
    pub path: PathBuf,
    pub damage: Damage,
}

/// Problems met while reading, kept rather than raised; each noted once however often the
/// reader met it (a segment is walked again for every range asked for, a frame may be read
/// twice).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Files named like segments that were not read: not regular files, or files that could not
    /// be opened or walked.
    pub skipped: Vec<SkippedFile>,
    /// Stretches of segments that hold no intact frame (damage, a segment cut short), and the
    /// frames they cost. A torn frame at the end of the newest segment is a write in flight (or
    /// one a crash cut short, which the next writer repairs and reports), not listed here.
    pub damaged_segments: Vec<DamagedSegment>,
    /// Frames skipped because their CRC failed or they did not decode, with why.
    pub bad_frames: Vec<(PathBuf, u64, String)>,
    /// Set-aside segments (`*.seg.corrupt`) whose intact frames were read.
    pub set_aside_read: Vec<PathBuf>,
    /// Frames walked in segments that could be read, and their bytes: what a skipped file's
    /// size is measured against.
    pub frames_walked: u64,
    pub bytes_walked: u64,
    /// What was noted, by kind, file and offset: each once.
    noted: HashSet<(Noted, PathBuf, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Noted {
    Skipped,
    Damage,
    BadFrame,
    SetAsideRead,
}

impl ReadReport {
    pub(crate) fn note_skipped(&mut self, path: &Path, reason: String, bytes: Option<u64>) {
        if self.noted.insert((Noted::Skipped, path.to_owned(), 0)) {
            self.skipped.push(SkippedFile { path: path.to_owned(), reason, bytes });
        }
    }

    pub(crate) fn note_damage(&mut self, path: &Path, damage: Damage) {
        if self.noted.insert((Noted::Damage, path.to_owned(), damage.offset)) {
            self.damaged_segments.push(DamagedSegment { path: path.to_owned(), damage });
        }
    }

    pub(crate) fn note_bad_frame(&mut self, path: &Path, offset: u64, why: String) {
        if self.noted.insert((Noted::BadFrame, path.to_owned(), offset)) {
            self.bad_frames.push((path.to_owned(), offset, why));
        }
    }

    pub(crate) fn note_set_aside_read(&mut self, path: &Path) {
        if self.noted.insert((Noted::SetAsideRead, path.to_owned(), 0)) {
            self.set_aside_read.push(path.to_owned());
        }
    }

    /// Whether anything was lost or set aside: nothing to say otherwise.
    pub fn is_empty(&self) -> bool {
        self.skipped.is_empty()
            && self.damaged_segments.is_empty()
            && self.bad_frames.is_empty()
            && self.set_aside_read.is_empty()
    }

    /// Samples known to be lost: each bad frame, and the frames damage took.
    pub fn samples_lost(&self) -> u64 {
        self.bad_frames.len() as u64 + self.damaged_segments.iter().map(|d| d.damage.frames_lost).sum::<u64>()
    }

    /// About how many samples `bytes` of segment hold, at the mean frame size of what was read.
    fn samples_in(&self, bytes: u64) -> Option<u64> {
        (self.frames_walked > 0 && self.bytes_walked > 0)
            .then(|| (bytes as f64 * self.frames_walked as f64 / self.bytes_walked as f64).round() as u64)
    }

    /// About how many samples the skipped files hold (regular files only), and how many of them
    /// there are; `None` when no file was skipped or nothing was read to measure against.
    pub fn samples_skipped(&self) -> Option<(u64, usize)> {
        let files: Vec<u64> = self.skipped.iter().filter_map(|s| s.bytes).collect();
        if files.is_empty() {
            return None;
        }
        Some((self.samples_in(files.iter().sum())?, files.len()))
    }

    /// One line per problem, for people: stderr, and the `problems` of JSON answers.
    pub fn problems(&self) -> Vec<String> {
        let samples = |n: u64| if n == 1 { "1 sample".to_string() } else { format!("{n} samples") };
        let mut lines = Vec::new();
        for s in &self.skipped {
            let what = match s.bytes.map(|b| (b, self.samples_in(b))) {
                Some((bytes, Some(n))) => format!("; its {bytes} bytes (about {}) are not read", samples(n)),
                Some((bytes, None)) => format!("; its {bytes} bytes are not read"),
                None => String::new(),
            };
            lines.push(format!("skipped {}: {}{what}", s.path.display(), s.reason));
        }
        for DamagedSegment { path, damage: d } in &self.damaged_segments {
            let defect = match d.defect {
                FrameDefect::Torn => "a frame cut short",
                FrameDefect::Corrupt(why) => why,
            };
            let lost = match d.frames_lost {
                0 => "no sample lost".to_string(),
                n => format!("{} lost", samples(n)),
            };
            lines.push(if d.to_end {
                format!(
                    "{}: {defect} at offset {}: the last {} bytes hold no whole frame ({lost})",
                    path.display(),
                    d.offset,
                    d.bytes
                )
            } else {
                format!(
                    "{}: {defect} at offset {}: skipped {} bytes ({lost}) and read on after them",
                    path.display(),
                    d.offset,
                    d.bytes
                )
            });
        }
        for (path, offset, why) in &self.bad_frames {
            lines.push(format!("skipped the frame at {}:{offset}: {why}", path.display()));
        }
        for path in &self.set_aside_read {
            lines.push(format!("{} was set aside as damaged; its intact frames were read", path.display()));
        }
        lines
    }

    /// The loss in one line ("61 samples could not be read; about 60 samples are in 1 skipped
    /// file"), or `None` when nothing was lost.
    pub fn summary(&self) -> Option<String> {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut parts = Vec::new();
        let lost = self.samples_lost();
        if lost > 0 {
            parts.push(format!("{lost} sample{} could not be read", plural(lost as usize)));
        }
        let measured = self.samples_skipped();
        if let Some((n, files)) = measured {
            let (samples, are) = if n == 1 { ("sample", "is") } else { ("samples", "are") };
            parts.push(format!("about {n} {samples} {are} in {files} skipped file{}", plural(files)));
        }
        let files = self.skipped.iter().filter(|s| s.bytes.is_some()).count();
        let unmeasured = files - measured.map_or(0, |(_, files)| files);
        if unmeasured > 0 {
            parts.push(format!("{unmeasured} skipped file{} hold an unknown number of samples", plural(unmeasured)));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}
