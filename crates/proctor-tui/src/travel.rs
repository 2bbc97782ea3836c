//! Time travel: which frame the screen shows. Live follows the newest frame; paused holds one;
//! stepping back walks the ring of recent frames this process kept, then (when there is a
//! store) asks the store worker for older ones. Pure: the ring, the cursor and what to ask.

use std::collections::VecDeque;

use crate::frame::SharedFrame;

/// What the screen is showing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// The newest frame, replaced as new ones come.
    Live,
    /// Held at the frame of this time (`Z` pause, or after stepping).
    At { time_unix_ms: u64 },
}

/// A move the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// One sample back (`-1`) or forward (`+1`), or several.
    Step(i64),
    /// By a span of time, back (negative) or forward.
    Span(i64),
    /// To a time (`g`).
    To(u64),
    /// Back to live.
    Live,
}

/// What answers a move: a frame in the ring, or a question for the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Frame(SharedFrameEq),
    /// Ask the store: the frame at or before this time.
    AtOrBefore(u64),
    /// Ask the store: the first frame after this time.
    After(u64),
    Live,
    /// Nothing in that direction.
    Nothing(&'static str),
}

/// A frame compared by identity (time), for tests.
#[derive(Debug, Clone)]
pub struct SharedFrameEq(pub SharedFrame);

impl PartialEq for SharedFrameEq {
    fn eq(&self, other: &Self) -> bool {
        self.0.time_unix_ms == other.0.time_unix_ms
    }
}
impl Eq for SharedFrameEq {}

/// The recent frames kept in memory, oldest first, bounded.
#[derive(Debug)]
pub struct Ring {
    frames: VecDeque<SharedFrame>,
    capacity: usize,
}

impl Ring {
    pub fn new(capacity: usize) -> Ring {
        Ring { frames: VecDeque::with_capacity(capacity.min(4096)), capacity }
    }

    /// Keeps `frame` as the newest (a frame no newer than the newest is not kept twice).
    pub fn push(&mut self, frame: SharedFrame) {
        if self.frames.back().is_some_and(|b| b.time_unix_ms >= frame.time_unix_ms) {
            return;
        }
        if self.capacity == 0 {
            return;
        }
        if self.frames.len() == self.capacity {
            self.frames.pop_front();
        }
        self.frames.push_back(frame);
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The frames held, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &SharedFrame> {
        self.frames.iter()
    }

    pub fn newest(&self) -> Option<&SharedFrame> {
        self.frames.back()
    }

    pub fn oldest(&self) -> Option<&SharedFrame> {
        self.frames.front()
    }

    fn at_or_before(&self, t: u64) -> Option<usize> {
        let n = self.frames.partition_point(|f| f.time_unix_ms <= t);
        n.checked_sub(1)
    }

    /// Where `mv` goes from `shown` (the frame on screen, at `cursor`). `store` says whether
    /// older (or, when not live, newer) frames may be asked of a store.
    pub fn answer(&self, shown_ms: Option<u64>, cursor: Cursor, mv: Move, store: bool) -> Answer {
        let here = match cursor {
            Cursor::Live => self.newest().map(|f| f.time_unix_ms).or(shown_ms),
            Cursor::At { time_unix_ms } => Some(time_unix_ms),
        };
        let Some(here) = here else { return Answer::Nothing("no frame yet") };
        match mv {
            Move::Live => Answer::Live,
            Move::Step(n) if n < 0 => match self.at_or_before(here) {
                Some(i) if i >= n.unsigned_abs() as usize => {
                    Answer::Frame(SharedFrameEq(self.frames[i - n.unsigned_abs() as usize].clone()))
                }
                _ if store => {
                    let before = self.oldest().map_or(here, |o| o.time_unix_ms.min(here));
                    match before.checked_sub(1) {
                        Some(t) => Answer::AtOrBefore(t),
                        None => Answer::Nothing("this is the oldest frame"),
                    }
                }
                _ => Answer::Nothing("no older frame kept (--dir or --data-dir steps into a recording)"),
            },
            Move::Step(n) => {
                if cursor == Cursor::Live {
                    return Answer::Nothing("already live");
                }
                // Older than the ring: the store has what lies between.
                if store && self.oldest().is_none_or(|o| here < o.time_unix_ms) {
                    return Answer::After(here);
                }
                let j = self.frames.partition_point(|f| f.time_unix_ms <= here) + (n.unsigned_abs() as usize - 1);
                // The newest kept frame is live: reaching it goes live.
                if j + 1 < self.frames.len() {
                    Answer::Frame(SharedFrameEq(self.frames[j].clone()))
                } else {
                    Answer::Live
                }
            }
            Move::Span(ms) => {
                let target =
                    if ms < 0 { here.saturating_sub(ms.unsigned_abs()) } else { here.saturating_add(ms as u64) };
                self.to(target, store)
            }
            Move::To(t) => self.to(t, store),
        }
    }

    /// The frame at or before `target`: from the ring when it holds one (the ring's frames are
    /// consecutive samples, so nothing lies between them), else from the store.
    fn to(&self, target: u64, store: bool) -> Answer {
        match self.at_or_before(target) {
            Some(i) if i + 1 == self.frames.len() => Answer::Live,
            Some(i) => Answer::Frame(SharedFrameEq(self.frames[i].clone())),
            None if store => Answer::AtOrBefore(target),
            None if self.is_empty() => Answer::Nothing("no frame yet"),
            None => Answer::Nothing("nothing that old is kept (--dir or --data-dir travels into a recording)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::frame_at;

    fn ring(times: &[u64]) -> Ring {
        let mut r = Ring::new(3);
        for &t in times {
            r.push(frame_at(t));
        }
        r
    }

    fn time(a: &Answer) -> u64 {
        match a {
            Answer::Frame(f) => f.0.time_unix_ms,
            other => panic!("not a frame: {other:?}"),
        }
    }

    #[test]
    fn the_ring_is_bounded_and_keeps_the_newest() {
        let r = ring(&[1000, 2000, 3000, 4000, 4000]);
        assert_eq!(r.len(), 3);
        assert_eq!(r.oldest().map(|f| f.time_unix_ms), Some(2000));
        assert_eq!(r.newest().map(|f| f.time_unix_ms), Some(4000));
    }

    #[test]
    fn stepping_back_and_forward_walks_the_ring_then_returns_to_live() {
        let r = ring(&[1000, 2000, 3000]);
        let a = r.answer(Some(3000), Cursor::Live, Move::Step(-1), false);
        assert_eq!(time(&a), 2000);
        let a = r.answer(Some(2000), Cursor::At { time_unix_ms: 2000 }, Move::Step(-1), false);
        assert_eq!(time(&a), 1000);
        let a = r.answer(Some(1000), Cursor::At { time_unix_ms: 1000 }, Move::Step(-1), false);
        assert!(matches!(a, Answer::Nothing(_)), "{a:?}");
        let a = r.answer(Some(1000), Cursor::At { time_unix_ms: 1000 }, Move::Step(1), false);
        assert_eq!(time(&a), 2000);
        let a = r.answer(Some(2000), Cursor::At { time_unix_ms: 2000 }, Move::Step(1), false);
        assert_eq!(a, Answer::Live, "the newest kept frame is live");
        assert!(matches!(r.answer(None, Cursor::Live, Move::Step(1), false), Answer::Nothing(_)));
    }

    #[test]
    fn beyond_the_ring_the_store_is_asked() {
        let r = ring(&[10_000, 11_000, 12_000]);
        let a = r.answer(Some(10_000), Cursor::At { time_unix_ms: 10_000 }, Move::Step(-1), true);
        assert_eq!(a, Answer::AtOrBefore(9_999));
        let a = r.answer(Some(12_000), Cursor::Live, Move::Span(-6_000), true);
        assert_eq!(a, Answer::AtOrBefore(6_000));
        let a = r.answer(Some(12_000), Cursor::Live, Move::To(11_500), true);
        assert_eq!(time(&a), 11_000);
        // A stored frame older than the ring: forward asks the store for the next one.
        let a = r.answer(Some(5_000), Cursor::At { time_unix_ms: 5_000 }, Move::Step(1), true);
        assert_eq!(a, Answer::After(5_000));
        let empty = Ring::new(0);
        let a = empty.answer(Some(5_000), Cursor::At { time_unix_ms: 5_000 }, Move::Step(1), true);
        assert_eq!(a, Answer::After(5_000));
    }
}
