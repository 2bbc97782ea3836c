//! Reading a store forward, batch after batch: a cursor that stays at the frame after the last
//! one handed out, so that a batch costs the frames it reads, however many lie after them.
//! Remote write's backfill reads its backlog this way. It does not read backwards or a range
//! ([`Reader::frames`] and `proctor_stored::range` do), and never writes.
//!
//! The cursor is a segment and the frames of it walked but not yet handed out, at most
//! [`WALK_FRAMES`] at a time; a walk goes on where the last one stopped
//! ([`salvage_from`]), so a segment is walked once however often it grows. The directory is
//! listed again only when the frames run out in the newest segment listed (a writer may have
//! started a newer one). When the caller asks for what follows another time than the last one
//! handed out, or the segment read is gone (retention, a writer set it aside), the cursor is
//! placed by time: the segment covering that time (segment names are the time index) is
//! walked and its frames up to that time are passed over.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use proctor_model::Sample;

use crate::frame::{FrameDefect, HEADER_LEN};
use crate::reader::{Reader, StoredFrame};
use crate::segment::{salvage_from, FrameRef, Resume};

/// Most frame headers one walk reads ahead of the cursor: what the cursor holds is bounded
/// by this, not by the segment's length.
pub const WALK_FRAMES: usize = 256;

/// What a [`ForwardReader`] has done so far; a batch's cost is what it added to these.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ForwardStats {
    /// Frame headers walked: each frame is walked once while the cursor moves forward.
    pub headers_walked: u64,
    /// Frames decoded into samples.
    pub frames_decoded: u64,
    /// Listings of the store directory.
    pub listings: u64,
    /// Times the cursor was placed by time.
    pub seeks: u64,
}

/// Reads the samples of a store directory in store order, from a time on, a batch at a time.
pub struct ForwardReader {
    dir: PathBuf,
    /// The listing and the cached key of the chunk being read; `None` until the directory
    /// could be listed.
    reader: Option<Reader>,
    at: Option<Spot>,
    /// Frames at or before this time are passed over: the last sample handed out, or the time
    /// the cursor was placed after.
    after_ns: u64,
    stats: ForwardStats,
}

impl std::fmt::Debug for ForwardReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardReader").field("dir", &self.dir).field("stats", &self.stats).finish()
    }
}

/// Where the cursor is: a segment and the frames of it walked and not passed yet.
struct Spot {
    /// The segment's index in the reader's listing, and its path, by which it is found again in
    /// a new listing.
    segment: usize,
    path: PathBuf,
    /// Oldest first; `ordinal` is the first one's place in its segment.
    frames: VecDeque<FrameRef>,
    ordinal: u64,
    /// Where the next walk of the segment goes on (`None`: from its start).
    resume: Option<Resume>,
}

/// What the cursor has next.
enum Next {
    Frame(StoredFrame),
    /// Nothing more is stored yet.
    End,
    /// The segment read is gone: place the cursor again by time.
    Lost,
}

/// What a walk of the cursor's segment found.
enum Walked {
    More,
    Nothing,
    Gone,
}

impl ForwardReader {
    pub fn new(dir: &Path) -> ForwardReader {
        ForwardReader { dir: dir.to_owned(), reader: None, at: None, after_ns: 0, stats: ForwardStats::default() }
    }

    pub fn stats(&self) -> ForwardStats {
        self.stats
    }

    /// Up to `max` samples stored after `after_ns` and at or before `to_ns`, in store order;
    /// frames at or before the last sample handed out are passed over, so times only grow.
    /// The cursor goes on from the last call when `after_ns` is the last sample it handed out
    /// (or the `after_ns` it was last asked for), and is placed again by time otherwise. Frames
    /// that cannot be read are passed over (the reader's report says why, once).
    pub fn read_after(&mut self, after_ns: u64, to_ns: u64, max: usize) -> Vec<Sample> {
        if self.at.is_none() || after_ns != self.after_ns {
            self.seek(after_ns);
        }
        let mut out = Vec::new();
        // A cursor whose segment keeps vanishing (a store emptied while read) stops for now.
        let mut seeks_left = 2;
        while out.len() < max {
            let frame = match self.next() {
                Next::Frame(frame) => frame,
                Next::End => break,
                Next::Lost if seeks_left > 0 => {
                    seeks_left -= 1;
                    self.seek(self.after_ns);
                    continue;
                }
                Next::Lost => {
                    self.at = None;
                    break;
                }
            };
            if frame.unix_ns() > to_ns {
                break;
            }
            if let Some(at) = self.at.as_mut() {
                at.frames.pop_front();
                at.ordinal += 1;
            }
            if frame.unix_ns() <= self.after_ns || !frame.frame.header.kind.is_sample() {
                continue;
            }
            let Some(reader) = self.reader.as_mut() else { break };
            self.stats.frames_decoded += 1;
            if let Some(sample) = reader.read(&frame) {
                self.after_ns = frame.unix_ns();
                out.push(sample);
            }
        }
        out
    }

    /// Places the cursor at the first frame after `after_ns`: in the segment that covers that
    /// time, the last one named at or before it (a segment holds the frames from its name's
    /// time up to the next one's).
    fn seek(&mut self, after_ns: u64) {
        self.stats.seeks += 1;
        self.after_ns = after_ns;
        self.at = None;
        if !self.list() {
            return;
        }
        let Some(reader) = self.reader.as_ref() else { return };
        let segments = reader.segments();
        if segments.is_empty() {
            return;
        }
        let i = segments.partition_point(|s| s.start_ns <= after_ns).saturating_sub(1);
        self.at = Some(Spot::new(i, segments[i].path.clone()));
    }

    /// Lists the directory (again); `false` when it cannot be.
    fn list(&mut self) -> bool {
        self.stats.listings += 1;
        match self.reader.as_mut() {
            Some(reader) => reader.relist(&self.dir).is_ok(),
            None => match Reader::open(&self.dir) {
                Ok(reader) => {
                    self.reader = Some(reader);
                    true
                }
                Err(_) => false,
            },
        }
    }

    /// The frame at the cursor, walking on in its segment, or to the next one, when needed.
    fn next(&mut self) -> Next {
        loop {
            let Some(at) = self.at.as_ref() else { return Next::End };
            if let Some(frame) = at.frames.front() {
                return Next::Frame(StoredFrame { segment: at.segment, ordinal: at.ordinal, frame: *frame });
            }
            match self.walk() {
                Walked::More => continue,
                Walked::Gone => return Next::Lost,
                Walked::Nothing => {}
            }
            // This segment is read to its end (as far as it is written).
            let (Some(reader), Some(at)) = (self.reader.as_ref(), self.at.as_ref()) else { return Next::End };
            if at.segment + 1 >= reader.segments().len() {
                // The newest segment listed: a writer may have started a newer one since.
                let path = at.path.clone();
                if !self.list() {
                    return Next::Lost;
                }
                let (Some(reader), Some(at)) = (self.reader.as_ref(), self.at.as_mut()) else { return Next::End };
                let Some(i) = reader.segments().iter().position(|s| s.path == path) else { return Next::Lost };
                at.segment = i;
                if i + 1 >= reader.segments().len() {
                    return Next::End;
                }
                // A newer one exists, so this one is sealed: frames may have been added to it
                // between the last walk and the rotation.
                match self.walk() {
                    Walked::More => continue,
                    Walked::Gone => return Next::Lost,
                    Walked::Nothing => {}
                }
            }
            let (Some(reader), Some(at)) = (self.reader.as_ref(), self.at.as_mut()) else { return Next::End };
            let i = at.segment + 1;
            *at = Spot::new(i, reader.segments()[i].path.clone());
        }
    }

    /// Walks on in the cursor's segment, up to [`WALK_FRAMES`] frames.
    fn walk(&mut self) -> Walked {
        let (Some(reader), Some(at)) = (self.reader.as_mut(), self.at.as_mut()) else { return Walked::Nothing };
        let (walked, resume) = match salvage_from(&at.path, at.resume, WALK_FRAMES) {
            Ok(walked) => walked,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Walked::Gone,
            Err(e) => {
                // Left behind, as `Reader::frames` leaves it, once said.
                reader.report_mut().note_skipped(&at.path, e.cause(), None);
                return Walked::Nothing;
            }
        };
        at.resume = resume;
        let live = reader.is_live(at.segment);
        let set_aside = reader.segments().get(at.segment).is_some_and(|s| s.set_aside);
        let report = reader.report_mut();
        for damage in walked.damage {
            // A torn frame at the end of the live segment is a write in flight.
            if !(live && damage.to_end && damage.defect == FrameDefect::Torn) {
                report.note_damage(&at.path, damage);
            }
        }
        if set_aside && !walked.frames.is_empty() {
            report.note_set_aside_read(&at.path);
        }
        report.frames_walked += walked.frames.len() as u64;
        report.bytes_walked +=
            walked.frames.iter().map(|f| HEADER_LEN as u64 + u64::from(f.header.payload_len)).sum::<u64>();
        self.stats.headers_walked += walked.frames.len() as u64;
        if walked.frames.is_empty() {
            return Walked::Nothing;
        }
        at.frames.extend(walked.frames);
        Walked::More
    }
}

impl Spot {
    fn new(segment: usize, path: PathBuf) -> Spot {
        Spot { segment, path, frames: VecDeque::new(), ordinal: 0, resume: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StoreConfig, Writer};

    const SECOND: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * SECOND;

    fn sample(seq: u64) -> Sample {
        Sample { seq, unix_ns: T0 + seq * SECOND, mono_ns: SECOND + seq * SECOND, ..Sample::default() }
    }

    fn seqs(samples: Vec<Sample>) -> Vec<u64> {
        samples.into_iter().map(|s| s.seq).collect()
    }

    /// A frame half written when the cursor passed (a write in flight at the end of the live
    /// segment) is read once it is whole, and not said to be damage; the walk does not start
    /// the segment over.
    #[test]
    fn a_frame_in_flight_is_read_once_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut writer, _) = Writer::open(dir.path(), StoreConfig::default()).expect("open");
        for seq in 0..10 {
            writer.append(&sample(seq)).expect("append");
        }
        let path = writer.active_segment().expect("a segment").to_owned();
        let whole = std::fs::read(&path).expect("read");
        let last = crate::segment::walk(&path, crate::segment::Check::Full).expect("walk").frames[9].offset;
        // The last frame, cut in the middle of its payload.
        let torn = last as usize + HEADER_LEN + 3;
        std::fs::write(&path, &whole[..torn]).expect("tear");
        let mut forward = ForwardReader::new(dir.path());
        assert_eq!(seqs(forward.read_after(0, u64::MAX, 100)), (0..9).collect::<Vec<_>>());
        assert_eq!(seqs(forward.read_after(T0 + 8 * SECOND, u64::MAX, 100)), Vec::<u64>::new());
        // The rest of the write lands.
        std::fs::write(&path, &whole).expect("finish");
        assert_eq!(seqs(forward.read_after(T0 + 8 * SECOND, u64::MAX, 100)), vec![9]);
        writer.append(&sample(10)).expect("append");
        assert_eq!(seqs(forward.read_after(T0 + 9 * SECOND, u64::MAX, 100)), vec![10]);
        let stats = forward.stats();
        assert_eq!((stats.headers_walked, stats.frames_decoded, stats.seeks), (11, 11, 1), "{stats:?}");
        let report = forward.reader.as_ref().expect("listed").report();
        assert!(report.is_empty(), "{report:?}");
    }
}
