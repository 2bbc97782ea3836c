//! `/proc/PID/maps`, `/proc/PID/pagemap` and `/proc/kpagecount`: PSS without `smaps_rollup`.
//!
//! `smaps_rollup` walks every page of the target under one hold of its mmap lock (per
//! mapping: a 1 GiB mapping is one hold of ~10 ms here). `pagemap` gives the same pages' frame
//! numbers, and the kernel takes the lock once per 2 MiB of address space it walks
//! ([`WALK_BYTES`], 512 entries), so no hold is longer than one such walk. How many page
//! tables map each frame is in `/proc/kpagecount`, which takes no process's lock. A page's PSS
//! is its size over that count, and the whole page where the count is under 2, as
//! `smaps_rollup` computes it: a page of a large folio mapped only in part can count 0 (the
//! kernel gives the folio's average, rounded). `/proc/kpageflags` sorts each page (anonymous,
//! file, shared memory; dirty) and names the frames `smaps_rollup` leaves out (the shared zero
//! page, frames without a page: [`not_counted`]). Frame numbers are shown only to a reader with
//! `CAP_SYS_ADMIN`; without it they read 0 and this path is closed.
//!
//! This module only parses and sums; the sampler does the reads and times each hold.

use serde::Serialize;

use crate::parse::{find_byte, lines};

/// The address space the kernel walks per hold of the mmap lock while it answers a
/// `pagemap` read: one page-middle-directory's worth (2 MiB with 4 KiB pages).
pub const WALK_BYTES: u64 = 2 << 20;

/// Bytes per `pagemap` or `kpagecount` entry.
pub const ENTRY_BYTES: u64 = 8;

/// `kpageflags` bits: no page at this frame, and the (huge) zero page.
const KPF_NOPAGE: u64 = 1 << 20;
const KPF_ZERO_PAGE: u64 = 1 << 24;

/// Whether a frame with these `kpageflags` is one `smaps_rollup` does not count in `Rss`.
pub fn not_counted(flags: u64) -> bool {
    flags & (KPF_NOPAGE | KPF_ZERO_PAGE) != 0
}

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const FILE_OR_SHARED: u64 = 1 << 61;
const MAPPED_EXCLUSIVELY: u64 = 1 << 56;
const PFN_MASK: u64 = (1 << 55) - 1;

/// The address ranges of a `/proc/PID/maps` text, in order (`start-end` of each line). Lines
/// that do not start with two hex numbers are skipped and counted.
pub fn map_ranges(bytes: &[u8]) -> (Vec<(u64, u64)>, u32) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in lines(bytes) {
        let range = find_byte(line, b' ').map_or(line, |space| &line[..space]);
        let parsed = find_byte(range, b'-').and_then(|dash| Some((hex(&range[..dash])?, hex(&range[dash + 1..])?)));
        match parsed {
            Some((start, end)) if start < end => out.push((start, end)),
            _ => bad += 1,
        }
    }
    (out, bad)
}

fn hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| Some(n << 4 | u64::from((d as char).to_digit(16)?)))
}

/// One `pagemap` entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// Resident, in this page frame (0: the frame numbers are hidden from this reader), with
    /// [`EXCLUSIVE`] set where only this process maps it: a page of a file or of shared memory.
    Present(u64),
    /// Resident, an anonymous page (or the zero page, which `kpageflags` names), the same way.
    Anon(u64),
    Swapped,
    Absent,
}

/// The mark on a frame number that only this process maps the page: the kernel's own test for
/// `smaps_rollup`'s private pages (a large folio mapped by one process only, whatever its
/// pages' average count), kept in the frame number's top bit, which no frame number reaches.
pub const EXCLUSIVE: u64 = 1 << 63;

/// A frame number without its [`EXCLUSIVE`] mark.
pub fn frame_number(frame: u64) -> u64 {
    frame & PFN_MASK
}

pub fn page(entry: u64) -> Page {
    let frame = entry & PFN_MASK | if entry & MAPPED_EXCLUSIVELY != 0 { EXCLUSIVE } else { 0 };
    if entry & PRESENT != 0 && entry & FILE_OR_SHARED != 0 {
        Page::Present(frame)
    } else if entry & PRESENT != 0 {
        Page::Anon(frame)
    } else if entry & SWAPPED != 0 {
        Page::Swapped
    } else {
        Page::Absent
    }
}

/// `kpageflags` bits that sort a page as `smaps_rollup` does: anonymous, shared memory (swap
/// backed but not anonymous), dirty.
const KPF_DIRTY: u64 = 1 << 4;
/// Also what [`Tally::add`] takes for a page `pagemap` calls anonymous, whose flags are not
/// read unless its count is 0.
pub const KPF_ANON: u64 = 1 << 12;
const KPF_SWAPBACKED: u64 = 1 << 14;

/// One process's pages, summed as `smaps_rollup` sums them.
///
/// PSS, RSS, private and shared are the kernel's own rule. Dirty is the page's flag or an
/// anonymous page: `smaps_rollup` also asks the page table's dirty bit, which `pagemap` does not
/// give, and an anonymous page is dirty there unless it came back from swap unwritten.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub rss_bytes: u64,
    pub shared_clean_bytes: u64,
    pub shared_dirty_bytes: u64,
    pub private_clean_bytes: u64,
    pub private_dirty_bytes: u64,
    pub swap_bytes: u64,
    /// PSS in all and by kind, in 1/4096ths of a byte, as the kernel keeps it before it prints
    /// kB ([`Tally::pss_bytes`]).
    pss: [u128; 4],
}

const ALL: usize = 0;
const ANON: usize = 1;
const FILE: usize = 2;
const SHMEM: usize = 3;

impl Tally {
    /// A resident page of `page_bytes` with `kpagecount`'s `count` and `kpageflags`' `flags`,
    /// private where `pagemap` says only this process maps it. Its PSS is its size over the
    /// count, or whole under 2, as `smaps_rollup` counts it (a page of a large folio mapped in
    /// part counts 0). Leave out the frames [`not_counted`] names.
    pub fn add(&mut self, page_bytes: u64, count: u64, flags: u64, exclusive: bool) {
        self.rss_bytes += page_bytes;
        let share = (u128::from(page_bytes) << 12) / u128::from(count.max(1));
        let kind = if flags & KPF_ANON != 0 {
            ANON
        } else if flags & KPF_SWAPBACKED != 0 {
            SHMEM
        } else {
            FILE
        };
        self.pss[ALL] += share;
        self.pss[kind] += share;
        let dirty = flags & (KPF_DIRTY | KPF_ANON) != 0;
        let slot = match (exclusive, dirty) {
            (true, true) => &mut self.private_dirty_bytes,
            (true, false) => &mut self.private_clean_bytes,
            (false, true) => &mut self.shared_dirty_bytes,
            (false, false) => &mut self.shared_clean_bytes,
        };
        *slot += page_bytes;
    }

    pub fn add_swapped(&mut self, page_bytes: u64) {
        self.swap_bytes += page_bytes;
    }

    /// PSS in all, anonymous, file-backed and shared memory, in bytes.
    pub fn pss_bytes(&self) -> [u64; 4] {
        self.pss.map(|p| (p >> 12) as u64)
    }

    pub fn uss_bytes(&self) -> u64 {
        self.private_clean_bytes + self.private_dirty_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_come_from_each_lines_first_word_and_garbage_is_counted() {
        let maps = b"55d0c0a00000-55d0c0a21000 r--p 00000000 08:01 1 /usr/bin/python3\n\
                     7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0 [stack]\n\
                     ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n\
                     nonsense\n\
                     2000-1000 r--p 0 0 0\n\
                     12345678901234567-12345678901234568 r--p 0 0 0\n";
        let (ranges, bad) = map_ranges(maps);
        assert_eq!(
            ranges,
            [
                (0x55d0_c0a0_0000, 0x55d0_c0a2_1000),
                (0x7ffd_1a2b_3000, 0x7ffd_1a2d_4000),
                (0xffff_ffff_ff60_0000, 0xffff_ffff_ff60_1000)
            ]
        );
        assert_eq!(bad, 3);
    }

    #[test]
    fn entries_decode_present_swapped_and_absent() {
        assert_eq!(page(PRESENT | 1 << 61 | 0x1234), Page::Present(0x1234));
        assert_eq!(page(PRESENT | 1 << 55 | 1 << 56 | 0x99), Page::Anon(EXCLUSIVE | 0x99));
        assert_eq!(frame_number(EXCLUSIVE | 0x99), 0x99);
        assert_eq!(page(PRESENT | 1 << 61), Page::Present(0));
        assert_eq!(page(SWAPPED | 0x77), Page::Swapped);
        assert_eq!(page(0), Page::Absent);
    }

    #[test]
    fn pss_divides_each_page_among_its_mappers_as_the_kernel_does() {
        let mut t = Tally::default();
        let (anon, file, dirty_file, shmem) = (KPF_ANON | KPF_SWAPBACKED, 0, KPF_DIRTY, KPF_SWAPBACKED);
        for (count, flags) in [(1, anon), (1, file), (2, anon), (3, dirty_file), (3, shmem), (0, file)] {
            t.add(4096, count, flags, count < 2);
        }
        t.add_swapped(4096);
        // 4096 · (1 + 1 + 1/2 + 1/3 + 1/3 + 1) = 17,066.67 in all: anonymous 1 + 1/2, file
        // 1 + 1/3 + 1 (the last a page of a large folio mapped in part: 0), shared memory 1/3.
        assert_eq!(t.pss_bytes(), [17_066, 6_144, 9_557, 1_365]);
        assert_eq!(t.rss_bytes, 6 * 4096);
        assert_eq!((t.private_clean_bytes, t.private_dirty_bytes), (2 * 4096, 4096));
        assert_eq!((t.shared_clean_bytes, t.shared_dirty_bytes), (4096, 2 * 4096));
        assert_eq!((t.uss_bytes(), t.swap_bytes), (3 * 4096, 4096));
    }

    #[test]
    fn the_zero_page_and_frames_without_a_page_are_not_counted() {
        assert!(not_counted(KPF_ZERO_PAGE) && not_counted(KPF_NOPAGE | 1 << 5));
        // Anonymous, uptodate, large (a partly mapped large folio): counted.
        assert!(!not_counted(1 << 12 | 1 << 3 | 1 << 22));
    }
}
