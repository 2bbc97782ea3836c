//! PSS of a big process in short holds: `/proc/PID/pagemap` and `/proc/kpagecount`
//! ([`proctor_procfs::pagemap`]).
//!
//! `smaps_rollup` holds the target's mmap lock for a whole mapping's walk: 8–13 ms for a 1 GiB
//! mapping here, long enough that a target mapping memory at a fixed rate feels it in its
//! slowest operations. This reader asks `pagemap` for one page table's worth of entries per
//! `pread` (the kernel takes and drops the lock once per such walk: 2 MiB of address space,
//! ~15–70 µs here), then looks up how many page tables map each frame in `kpagecount` (but an
//! anonymous page that `pagemap` marks as this process's alone, which counts 1), and what each
//! page of a file is in `kpageflags`, which hold no process's lock. It costs about four times
//! the CPU of `smaps_rollup` where pages are shared, about the same where they are the
//! target's own (`pagemap_cost`: 42 against 11 ms, and 9–14 against 9–14 ms, at 1 GiB), and needs
//! `CAP_SYS_ADMIN` (without it the frame numbers read 0), so the PSS worker uses it for big
//! targets only and falls back to `smaps_rollup` where it is closed.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use proctor_procfs::pagemap::{
    frame_number, map_ranges, not_counted, page, Page, Tally, ENTRY_BYTES, EXCLUSIVE, KPF_ANON,
};
use proctor_procfs::process::SmapsRollup;
use proctor_procfs::system::{page_size, thread_cpu_ns};
use proctor_procfs::{Error, Root};

/// The lock holds of one reading: each `maps` read and each `pagemap` walk, timed from this
/// side (wall time: an upper bound on each hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holds {
    pub count: u32,
    pub total_ns: u64,
    pub longest_ns: u64,
}

impl Holds {
    fn add(&mut self, started: Instant) {
        let ns = crate::worker::held_ns(started.elapsed());
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.longest_ns = self.longest_ns.max(ns);
    }
}

/// Frames are looked up in runs: a gap of up to this many frames is read through rather than
/// split into another `pread`. Each frame read costs the kernel its count or flags (a snapshot
/// of its page, ~40 ns here) and a copy out, needed or not. A child sharing 1 GiB with 8
/// siblings cost 71–95 ms a walk at 64, 46–66 ms at 4, 52–69 ms at 1 (only frames side by side
/// in one read); an impact workload's child 91–100, 65–68 and 61–67 ms (`pagemap_cost` with
/// the gap as a variable, medians of 8 walks, two runs).
const GAP_FRAMES: u64 = 4;
/// The most frames one `kpagecount` read covers (64 KiB of counts).
const RUN_FRAMES: u64 = 8192;
/// Frames are counted this many at a time (8 MiB of frame numbers: 4 GiB resident), so a
/// target of any size costs the reader a bounded buffer.
const BATCH_FRAMES: usize = 1 << 20;
/// The most address space a read walks: each 2 MiB costs a `pread` whether or not anything
/// is mapped there, so a process that reserves terabytes (a sanitizer's shadow, a runtime's
/// heap reservation) would cost seconds; past this it is read through `smaps_rollup`, which
/// skips empty page tables.
pub const MAX_SPAN_BYTES: u64 = 64 << 30;
/// Buffers of at most this many frames (64 KiB each) are kept between readings; a big
/// target's are handed back after its reading, so the worker does not keep memory sized to
/// the biggest process it ever read (a 1 GiB target's frames alone are 2 MiB).
const KEEP_FRAMES: usize = 8192;
/// Likewise for the text of `maps` (a runtime with thousands of mappings has megabytes).
const KEEP_MAPS_BYTES: usize = 64 << 10;

/// An open `/proc/kpagecount` and the buffers of one reading, kept between readings.
#[derive(Debug)]
pub struct PageCounter {
    kpagecount: File,
    kpageflags: File,
    /// Anonymous frames (no flags read unless they count 0), and those that count 0.
    anon: Vec<u64>,
    uncounted: Vec<u64>,
    page_bytes: u64,
    /// Bytes of address space per walk: one page of page-table entries' worth of pages.
    walk_bytes: u64,
    entries: Vec<u8>,
    frames: Vec<u64>,
    counts: Vec<u8>,
    /// The counts of the file frames while their flags are read.
    flags: Vec<u64>,
    maps: Vec<u8>,
    /// [`BATCH_FRAMES`] (less in tests).
    batch: usize,
    /// A walk that spends more CPU than this stops and fails ([`PageCounter::limit_cpu`]).
    cpu_limit_ns: Option<u64>,
    /// The reading under way: (its limit, this thread's CPU time when it started).
    deadline: Option<(u64, u64)>,
    /// The resident bytes the last walk read from `pagemap`, and those whose frames it had
    /// counted, finished or not ([`PageCounter::met_bytes`]).
    walked_bytes: u64,
    counted_bytes: u64,
    /// Frames whose count the last walk looked up in `kpagecount`.
    counts_read: u64,
}

/// How many walks pass between two looks at the walk's CPU time (a system call each).
const WALKS_PER_CPU_CHECK: u32 = 16;

/// What a walk that passed its CPU limit ([`PageCounter::limit_cpu`]) fails with.
pub const OVER_CPU_LIMIT: &str = "the walk passed its CPU limit";

impl PageCounter {
    /// The reader, or why this process cannot read PSS this way (in words for `doctor`).
    pub fn open(root: &Root) -> Result<PageCounter, String> {
        if !root.is_real() {
            return Err("pagemap is read only from this system's own /proc".into());
        }
        let kpagecount = File::open("/proc/kpagecount").map_err(|e| format!("cannot open /proc/kpagecount: {e}"))?;
        let kpageflags = File::open("/proc/kpageflags").map_err(|e| format!("cannot open /proc/kpageflags: {e}"))?;
        let page_bytes = page_size();
        let counter = PageCounter {
            kpagecount,
            kpageflags,
            anon: Vec::new(),
            uncounted: Vec::new(),
            page_bytes,
            walk_bytes: page_bytes / ENTRY_BYTES * page_bytes,
            entries: Vec::new(),
            frames: Vec::new(),
            counts: Vec::new(),
            flags: Vec::new(),
            maps: Vec::new(),
            batch: BATCH_FRAMES,
            cpu_limit_ns: None,
            deadline: None,
            walked_bytes: 0,
            counted_bytes: 0,
            counts_read: 0,
        };
        // A page of our own, resident: its frame number is 0 unless we may see frame numbers.
        let probe = vec![1u8; 2 * page_bytes as usize];
        let addr = (probe.as_ptr() as u64).next_multiple_of(page_bytes);
        let pagemap = File::open("/proc/self/pagemap").map_err(|e| format!("cannot open /proc/self/pagemap: {e}"))?;
        let mut entry = [0u8; 8];
        pagemap
            .read_exact_at(&mut entry, addr / page_bytes * ENTRY_BYTES)
            .map_err(|e| format!("cannot read /proc/self/pagemap: {e}"))?;
        std::hint::black_box(&probe);
        match page(u64::from_le_bytes(entry)) {
            Page::Present(frame) | Page::Anon(frame) if frame_number(frame) == 0 => {
                Err("pagemap hides page frame numbers from this process (it needs CAP_SYS_ADMIN)".into())
            }
            Page::Present(frame) | Page::Anon(frame) => {
                counter
                    .kpagecount
                    .read_exact_at(&mut entry, frame_number(frame) * ENTRY_BYTES)
                    .map_err(|e| format!("cannot read /proc/kpagecount: {e}"))?;
                Ok(counter)
            }
            _ => Err("pagemap did not show a resident page of this process as resident".into()),
        }
    }

    /// Bounds each reading's CPU time (this thread's): a reading that passes `ns` stops and
    /// fails ([`OVER_CPU_LIMIT`], checked every [`WALKS_PER_CPU_CHECK`] walks or runs of frames
    /// counted), so that no one reading costs more than its caller's budget can pay. `None`:
    /// no bound.
    pub fn limit_cpu(&mut self, ns: Option<u64>) {
        self.cpu_limit_ns = ns;
    }

    /// Reads `pid`'s PSS: its `maps`, then its `pagemap` one walk per `pread`, then the
    /// counts of its frames. Garbage lines in `maps` are skipped (a mapping that vanished
    /// meanwhile reads as absent pages). The holds are given with a failed read too.
    pub fn read(&mut self, root: &Root, pid: u32) -> (Result<SmapsRollup, Error>, Holds) {
        let mut holds = Holds::default();
        let result = self.read_holding(root, pid, &mut holds);
        self.release_large_buffers();
        (result, holds)
    }

    /// Frees the frame buffers a big target grew past [`KEEP_FRAMES`], and gives the freed
    /// pages back to the kernel: glibc keeps freed heap in its arenas, and a buffer that came
    /// from `mmap` raises its threshold so the next one comes from the heap.
    fn release_large_buffers(&mut self) {
        let mut released = false;
        for buffer in [&mut self.frames, &mut self.anon, &mut self.uncounted, &mut self.flags] {
            if buffer.capacity() > KEEP_FRAMES {
                *buffer = Vec::new();
                released = true;
            }
        }
        if self.maps.capacity() > KEEP_MAPS_BYTES {
            self.maps = Vec::new();
            released = true;
        }
        if released {
            proctor_procfs::system::trim_heap();
        }
    }

    /// The resident bytes (present pages) the last [`PageCounter::read`] got through before it
    /// ended: a walk stopped at its CPU limit spent its CPU on these, not on the target's
    /// whole size. A page is got through in two halves, read from `pagemap` and its frame
    /// counted (as each frame's count is read: counted only at a batch's end, a 1 GiB walk
    /// stopped while counting its one batch met half its size, and was predicted at twice the
    /// limit it stopped at, which ruled the next walk out), so one only read counts half (an
    /// estimate that errs long, as a walk's cost should: `kpagecount` is most of it here).
    /// Equal to the resident pages met when it finished.
    pub fn met_bytes(&self) -> u64 {
        (self.walked_bytes + self.counted_bytes) / 2
    }

    /// How many frames' counts the last [`PageCounter::read`] looked up in `kpagecount`: an
    /// anonymous page of the target's alone needs none.
    pub fn counts_read(&self) -> u64 {
        self.counts_read
    }

    fn read_holding(&mut self, root: &Root, pid: u32, holds: &mut Holds) -> Result<SmapsRollup, Error> {
        self.deadline = self.cpu_limit_ns.map(|limit| (limit, thread_cpu_ns()));
        (self.walked_bytes, self.counted_bytes, self.counts_read) = (0, 0, 0);
        let mut walks = 0u32;
        let started = Instant::now();
        root.read_into(format!("/proc/{pid}/maps"), &mut self.maps)?;
        holds.add(started);
        let (ranges, _) = map_ranges(&self.maps);
        let span: u64 = ranges.iter().map(|(start, end)| end - start).fold(0, u64::saturating_add);
        if span > MAX_SPAN_BYTES {
            let path = root.path(format!("/proc/{pid}/maps"));
            return Err(Error::parse(path, "over 64 GiB of address space mapped: too sparse to walk"));
        }
        let path = format!("/proc/{pid}/pagemap");
        let pagemap = root.open(&path)?;
        let per_walk = (self.walk_bytes / self.page_bytes * ENTRY_BYTES) as usize;
        self.entries.resize(per_walk, 0);
        self.frames.clear();
        self.anon.clear();
        let mut tally = Tally::default();
        for (start, end) in ranges {
            let mut addr = start;
            while addr < end {
                let stop = (addr / self.walk_bytes + 1).saturating_mul(self.walk_bytes).min(end);
                let want = ((stop - addr).div_ceil(self.page_bytes) * ENTRY_BYTES) as usize;
                let started = Instant::now();
                let got = pagemap
                    .read_at(&mut self.entries[..want.min(per_walk)], addr / self.page_bytes * ENTRY_BYTES)
                    .map_err(|e| Error::io(root.path(&path), e))?;
                holds.add(started);
                if got < ENTRY_BYTES as usize {
                    // Past the end of the user address space (`[vsyscall]`).
                    break;
                }
                for chunk in self.entries[..got].chunks_exact(ENTRY_BYTES as usize) {
                    let entry = u64::from_le_bytes(chunk.try_into().expect("chunks of eight bytes"));
                    match page(entry) {
                        Page::Present(frame) | Page::Anon(frame) if frame_number(frame) == 0 => {
                            return Err(Error::parse(root.path(&path), "page frame numbers hidden"))
                        }
                        Page::Present(frame) => {
                            self.frames.push(frame);
                            self.walked_bytes += self.page_bytes;
                        }
                        Page::Anon(frame) if frame & EXCLUSIVE != 0 => {
                            // Mapped by this process alone (what `pagemap` marks exclusive is
                            // what `kpagecount` would count 1): no count to look up.
                            tally.add(self.page_bytes, 1, KPF_ANON, true);
                            self.walked_bytes += self.page_bytes;
                            self.counted_bytes += self.page_bytes;
                        }
                        Page::Anon(frame) => {
                            self.anon.push(frame);
                            self.walked_bytes += self.page_bytes;
                        }
                        Page::Swapped => tally.add_swapped(self.page_bytes),
                        Page::Absent => {}
                    }
                }
                if self.frames.len() + self.anon.len() >= self.batch {
                    self.count_frames(&mut tally)?;
                }
                addr += (got as u64 / ENTRY_BYTES) * self.page_bytes;
                walks = walks.wrapping_add(1);
                if walks.is_multiple_of(WALKS_PER_CPU_CHECK) && past(self.deadline) {
                    return Err(Error::parse(root.path(&path), OVER_CPU_LIMIT));
                }
            }
        }
        self.count_frames(&mut tally)?;
        Ok(SmapsRollup::from_tally(&tally))
    }

    /// Adds every frame read so far to `tally` with how many page tables map it and, for
    /// pages of files and shared memory (and anonymous ones that count 0: the zero page is left
    /// out), what `kpageflags` says of it; then forgets them.
    fn count_frames(&mut self, tally: &mut Tally) -> Result<(), Error> {
        let page_bytes = self.page_bytes;
        let deadline = self.deadline;
        // The sorts below are the one long stretch without a look at the clock (a second's
        // CPU for a million frames in a debug build): a walk already past its limit stops here.
        if past(deadline) {
            return Err(Error::parse("/proc/kpagecount".into(), OVER_CPU_LIMIT));
        }
        let mut uncounted = std::mem::take(&mut self.uncounted);
        uncounted.clear();
        self.anon.sort_unstable();
        lookup(&self.kpagecount, "/proc/kpagecount", &self.anon, &mut self.counts, deadline, |frame, count| {
            self.counted_bytes += page_bytes;
            self.counts_read += 1;
            if count == 0 {
                uncounted.push(frame);
            } else {
                tally.add(page_bytes, count, KPF_ANON, frame & EXCLUSIVE != 0);
            }
        })?;
        lookup(&self.kpageflags, "/proc/kpageflags", &uncounted, &mut self.counts, deadline, |frame, flags| {
            if !not_counted(flags) {
                tally.add(page_bytes, 0, flags | KPF_ANON, frame & EXCLUSIVE != 0);
            }
        })?;
        self.uncounted = uncounted;
        if past(deadline) {
            return Err(Error::parse("/proc/kpagecount".into(), OVER_CPU_LIMIT));
        }
        self.frames.sort_unstable();
        let mut counts = std::mem::take(&mut self.flags);
        // The counts of the file pages first, then their flags, run by run in the same order.
        counts.clear();
        lookup(&self.kpagecount, "/proc/kpagecount", &self.frames, &mut self.counts, deadline, |_, count| {
            self.counted_bytes += page_bytes;
            self.counts_read += 1;
            counts.push(count)
        })?;
        let mut k = 0;
        lookup(&self.kpageflags, "/proc/kpageflags", &self.frames, &mut self.counts, deadline, |frame, flags| {
            if !not_counted(flags) {
                tally.add(page_bytes, counts[k], flags, frame & EXCLUSIVE != 0);
            }
            k += 1;
        })?;
        self.flags = counts;
        self.frames.clear();
        self.anon.clear();
        Ok(())
    }
}

/// Whether a reading's CPU time passed its limit ([`PageCounter::limit_cpu`]).
fn past(deadline: Option<(u64, u64)>) -> bool {
    deadline.is_some_and(|(limit, at)| thread_cpu_ns().saturating_sub(at) > limit)
}

/// Calls `each` with every frame of `frames` (sorted: the [`EXCLUSIVE`] ones after the others,
/// each ascending) and its entry in `file` (`kpagecount` or `kpageflags`), in order, reading
/// runs of nearby frames in one `pread` each.
fn lookup(
    file: &File,
    name: &str,
    frames: &[u64],
    buf: &mut Vec<u8>,
    deadline: Option<(u64, u64)>,
    mut each: impl FnMut(u64, u64),
) -> Result<(), Error> {
    let mut i = 0;
    let mut runs = 0u32;
    while i < frames.len() {
        runs = runs.wrapping_add(1);
        if runs.is_multiple_of(WALKS_PER_CPU_CHECK) && past(deadline) {
            return Err(Error::parse(name.into(), OVER_CPU_LIMIT));
        }
        let first = frame_number(frames[i]);
        let mut last = first;
        let mut j = i + 1;
        while let Some(&next) = frames.get(j) {
            let next = frame_number(next);
            if next < last || next - first >= RUN_FRAMES || next - last > GAP_FRAMES {
                break;
            }
            last = next;
            j += 1;
        }
        let len = ((last - first + 1) * ENTRY_BYTES) as usize;
        buf.resize(len, 0);
        file.read_exact_at(&mut buf[..len], first * ENTRY_BYTES).map_err(|e| Error::io(name.into(), e))?;
        for &frame in &frames[i..j] {
            let at = ((frame_number(frame) - first) * ENTRY_BYTES) as usize;
            each(frame, u64::from_le_bytes(buf[at..at + 8].try_into().expect("eight bytes")));
        }
        i = j;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by each test that maps or forks: they run as threads of one process, and a
    /// reservation or a freed buffer of one shows in another's reading of this process or of a
    /// child it forked (a child inherits everything mapped at the fork).
    static MAPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        MAPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The reader, or `None` with a SKIP line where frame numbers are hidden.
    fn counter_or_skip() -> Option<PageCounter> {
        let counter = PageCounter::open(&Root::default()).ok();
        if counter.is_none() {
            eprintln!("SKIP: pagemap frame numbers are not readable here (needs CAP_SYS_ADMIN)");
        }
        counter
    }

    /// Asserts that a figure of ours is within 1 % of `size` of `smaps_rollup`'s.
    fn near(size: f64, ours: Option<u64>, theirs: Option<u64>, what: &str) {
        let (ours, theirs) = (ours.expect("ours") as f64, theirs.expect("theirs") as f64);
        assert!((ours - theirs).abs() <= size * 0.01, "{what}: pagemap {ours} against smaps_rollup {theirs}");
    }

    /// An inaccessible reservation of this process's address space, never touched: no memory,
    /// only mappings to walk. Unmapped when dropped.
    struct Reservation(*mut libc::c_void, usize);

    impl Reservation {
        fn new(len: usize) -> Reservation {
            // SAFETY: a new private anonymous mapping, PROT_NONE, unmapped on drop.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            assert_ne!(at, libc::MAP_FAILED);
            Reservation(at, len)
        }
    }

    impl Drop for Reservation {
        fn drop(&mut self) {
            // SAFETY: the mapping `new` made, used by nothing else.
            unsafe { libc::munmap(self.0, self.1) };
        }
    }

    /// A forked child's memory both ways: the same pages, within what moved between the reads.
    /// It shares 64 MiB with this process, and 16 MiB it only read map the zero page, which
    /// `smaps_rollup` leaves out of Rss (counted, they would add 16 MiB).
    #[test]
    fn pagemap_and_smaps_rollup_agree_on_a_process_that_shares_with_a_child() {
        let _serial = serial();
        let Some(mut counter) = counter_or_skip() else { return };
        // 64 MiB touched, then a child forked that shares it and sleeps: every page counted twice.
        let mut memory = vec![0u8; 64 << 20];
        for i in (0..memory.len()).step_by(4096) {
            memory[i] = 1;
        }
        let zeros_len = 16usize << 20;
        // SAFETY: a new private anonymous mapping; only read below, unmapped at the end.
        let zeros = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                zeros_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(zeros, libc::MAP_FAILED);
        // SAFETY: madvise, a write and reads within the mapping just made. The write gives it
        // an anonymous page, so fork copies its page table (zero page entries too) to the child.
        unsafe {
            libc::madvise(zeros, zeros_len, libc::MADV_NOHUGEPAGE);
            zeros.cast::<u8>().write_volatile(1);
            for i in (4096..zeros_len).step_by(4096) {
                std::ptr::read_volatile(zeros.cast::<u8>().add(i));
            }
        }
        // SAFETY: the child calls only async-signal-safe functions (pause, _exit) until killed.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: as above.
            unsafe {
                libc::pause();
                libc::_exit(0)
            };
        }
        let root = Root::default();
        let smaps = root.read(format!("/proc/{child}/smaps_rollup")).expect("the child's smaps_rollup");
        let smaps = proctor_procfs::process::parse_smaps_rollup(&smaps).expect("a smaps_rollup");
        let (read, holds) = counter.read(&root, child as u32);
        // Its 16,384 frames of the shared 64 MiB alone grew the buffers past what is kept.
        let kept = [&counter.frames, &counter.anon, &counter.uncounted, &counter.flags].map(|b| b.capacity());
        // The same, counted a thousand frames at a time.
        counter.batch = 1000;
        let (batched, _) = counter.read(&root, child as u32);
        // SAFETY: the child is ours; killing and reaping it touches nothing else.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
        std::hint::black_box(&memory);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(zeros, zeros_len) };
        assert!(kept.iter().all(|&c| c <= KEEP_FRAMES), "buffers kept after a big read: {kept:?}");
        let read = read.expect("a pagemap reading");
        let batched = batched.expect("a pagemap reading in batches");
        // Within 1 % of the child's size: this process runs on between the two reads, and each
        // page it writes stops being shared with the child (the child's USS is a few pages).
        let size = smaps.rss_bytes.expect("rss") as f64;
        let near = |ours, theirs, what| near(size, ours, theirs, what);
        near(read.pss_bytes, smaps.pss_bytes, "Pss");
        near(read.rss_bytes, smaps.rss_bytes, "Rss");
        near(read.uss_bytes(), smaps.uss_bytes(), "USS");
        near(read.pss_anon_bytes, smaps.pss_anon_bytes, "Pss_Anon");
        near(batched.pss_bytes, read.pss_bytes, "Pss in batches");
        near(batched.rss_bytes, read.rss_bytes, "Rss in batches");
        let pss = read.pss_bytes.expect("pss") as f64;
        assert!(pss < read.rss_bytes.expect("rss") as f64 * 0.75, "the shared 64 MiB counts half: {read:?}");
        // At least 32 walks of 2 MiB for the 64 MiB alone, each its own hold.
        assert!(holds.count >= 33 && holds.longest_ns < holds.total_ns, "{holds:?}");
    }

    /// A forked child that wrote every page of 32 MiB it shares with this process has them to
    /// itself (copied on write): read without a count looked up for them, and the same PSS and
    /// USS as `smaps_rollup` gives.
    #[test]
    fn a_process_own_pages_need_no_count_and_agree_with_smaps_rollup() {
        let _serial = serial();
        let Some(mut counter) = counter_or_skip() else { return };
        let len = 32usize << 20;
        let mut memory = vec![1u8; len];
        // The child says on this pipe when it has written its pages.
        let mut ends = [0 as libc::c_int; 2];
        // SAFETY: `ends` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0, "pipe");
        // SAFETY: the child only writes to memory it owns (its copy) and calls async-signal-safe
        // functions (write, pause, _exit) until killed.
        let child = unsafe { libc::fork() };
        if child == 0 {
            for i in (0..len).step_by(4096) {
                // SAFETY: within the vector.
                unsafe { std::ptr::write_volatile(memory.as_mut_ptr().add(i), 2) };
            }
            // SAFETY: as above; one byte from the stack to the pipe's write end.
            unsafe {
                libc::write(ends[1], [1u8].as_ptr().cast(), 1);
                libc::pause();
                libc::_exit(0)
            };
        }
        /// Kills and reaps the child however the test ends.
        struct Forked(libc::pid_t);
        impl Drop for Forked {
            fn drop(&mut self) {
                // SAFETY: the child is ours; killing and reaping it touches nothing else.
                unsafe {
                    libc::kill(self.0, libc::SIGKILL);
                    libc::waitpid(self.0, std::ptr::null_mut(), 0);
                }
            }
        }
        let forked = Forked(child);
        let mut byte = [0u8; 1];
        // SAFETY: our write end is closed so that a child that died reads as the end; the read
        // is into `byte`.
        let said = unsafe {
            libc::close(ends[1]);
            let n = libc::read(ends[0], byte.as_mut_ptr().cast(), 1);
            libc::close(ends[0]);
            n
        };
        assert_eq!(said, 1, "the child did not say it wrote its pages");
        let root = Root::default();
        let bytes = root.read(format!("/proc/{child}/smaps_rollup")).expect("the child's smaps_rollup");
        let smaps = proctor_procfs::process::parse_smaps_rollup(&bytes).expect("a smaps_rollup");
        let (read, _) = counter.read(&root, child as u32);
        let counts_read = counter.counts_read();
        drop(forked);
        std::hint::black_box(&mut memory);
        let read = read.expect("a pagemap reading");
        let size = smaps.rss_bytes.expect("rss") as f64;
        let near = |ours, theirs, what| near(size, ours, theirs, what);
        near(read.pss_bytes, smaps.pss_bytes, "Pss");
        near(read.uss_bytes(), smaps.uss_bytes(), "USS");
        near(read.rss_bytes, smaps.rss_bytes, "Rss");
        // Its own pages were not looked up: the counts read are the rest of it.
        let own_pages = len as u64 / page_size();
        let resident_pages = read.rss_bytes.expect("rss") / page_size();
        assert!(counts_read + own_pages <= resident_pages, "{counts_read} counts read of {resident_pages} pages");
    }

    /// A walk past its CPU limit stops and fails; without one (or under a generous one) the
    /// same process reads whole.
    #[test]
    fn a_walk_stops_at_its_cpu_limit() {
        let _serial = serial();
        let Some(mut counter) = counter_or_skip() else { return };
        // 64 MiB of address space, 32 walks at least: a reservation, not memory (a loaded suite
        // run failed when the sharing test's child inherited 64 MiB this test then freed).
        let len = 64usize << 20;
        let reserved = Reservation::new(len);
        counter.limit_cpu(Some(1));
        let (stopped, _) = counter.read(&Root::default(), std::process::id());
        let stopped_met = counter.met_bytes();
        counter.limit_cpu(Some(60_000_000_000));
        let (generous, _) = counter.read(&Root::default(), std::process::id());
        let generous_met = counter.met_bytes();
        counter.limit_cpu(None);
        let (unbounded, _) = counter.read(&Root::default(), std::process::id());
        drop(reserved);
        let e = stopped.expect_err("stopped");
        assert!(e.to_string().contains(OVER_CPU_LIMIT), "{e}");
        let rss = generous.expect("generous").rss_bytes.expect("rss");
        assert!(rss > 0);
        // A whole walk met every resident page it counted; the stopped one only those before
        // it stopped (what its CPU paid for).
        assert_eq!(generous_met, rss, "a whole walk meets its Rss");
        assert!(stopped_met < generous_met, "stopped after {stopped_met} of {generous_met} bytes");
        assert!(unbounded.is_ok());
    }

    /// A process holding a 128 GiB reservation is refused, not walked 65,536 times.
    #[test]
    fn a_huge_reservation_is_refused() {
        let _serial = serial();
        let Some(mut counter) = counter_or_skip() else { return };
        let len = 128usize << 30;
        let reserved = Reservation::new(len);
        let (read, holds) = counter.read(&Root::default(), std::process::id());
        drop(reserved);
        let e = read.expect_err("refused");
        assert!(e.to_string().contains("too sparse to walk"), "{e}");
        assert_eq!(holds.count, 1, "only its maps were read: {holds:?}");
    }
}
