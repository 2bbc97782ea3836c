//! How fast this host's memory is right now, for the benchmarks whose figures move with it
//! (the task scan at ~5,000 processes, the PSS reads' holds): `cargo run --release -p
//! proctor-sampler --example host_memory [--json]` prints
//!
//! - the latency of a dependent load (a random cyclic chase of 64-byte lines, each load's
//!   address the one before's value) over working sets of 1, 8 and 64 MiB, with huge pages
//!   asked for (`MADV_HUGEPAGE`, so address translation stays out of it where the host grants
//!   them): 8 MiB tells whether the last-level cache serves this machine, 64 MiB is memory;
//! - the wall time and CPU of one `smaps_rollup` read of a child holding 1 GiB in 4 KiB pages
//!   that it shares with this process (the impact workload's shape), median of five after one
//!   untimed read: the walk touches every page's descriptor, so it costs about one load from
//!   wherever those 16 MiB of descriptors are.
//!
//! On a virtual machine the caches are shared with other guests: here the same read took
//! 14-25 ms in one hour and 8-9 ms in the next. Every figure of a run is taken where it is
//! printed.

use std::time::Instant;

use proctor_procfs::system::thread_cpu_ns;

const LINE: usize = 64;

/// A fresh private anonymous read-write mapping of `len` bytes, with `advice` (`madvise`).
fn map(len: usize, advice: libc::c_int) -> *mut libc::c_void {
    // SAFETY: a new anonymous mapping touches no existing memory; the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(base != libc::MAP_FAILED, "mmap of {len} bytes failed");
    // SAFETY: the mapping just made.
    unsafe { libc::madvise(base, len, advice) };
    base
}

/// Nanoseconds a load over a random cycle through `mib` MiB of lines.
fn chase_ns(mib: usize) -> f64 {
    let lines = (mib << 20) / LINE;
    let words = LINE / 8;
    let len = lines * LINE;
    // Advice only: where the host grants no huge pages the chase pays for translation too.
    let base = map(len, libc::MADV_HUGEPAGE);
    // SAFETY: `len` bytes of u64s, zeroed by the kernel, ours alone.
    let slots = unsafe { std::slice::from_raw_parts_mut(base.cast::<u64>(), lines * words) };
    // A random cyclic order of the lines (xorshift: no dependency for a shuffle).
    let mut order: Vec<usize> = (0..lines).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..lines).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    for (k, &line) in order.iter().enumerate() {
        slots[line * words] = (order[(k + 1) % lines] * words) as u64;
    }
    let mut at = order[0] * words;
    // Once round the cycle untimed, then long enough to measure.
    for _ in 0..lines {
        at = slots[at] as usize;
    }
    let steps = 4_000_000usize.max(lines);
    let started = Instant::now();
    for _ in 0..steps {
        at = slots[at] as usize;
    }
    let ns = started.elapsed().as_nanos() as f64 / steps as f64;
    std::hint::black_box(at);
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(base, len) };
    ns
}

/// The share of the region's pages (after the first) whose frame follows the page before's, from
/// this process's `pagemap` (frame numbers need CAP_SYS_ADMIN: `None` without): how much of the
/// page descriptors the walk touches lie one after the other in memory, where the hardware's
/// prefetcher streams them, rather than scattered, one miss each.
fn contiguous(base: usize, pages: usize) -> Option<f64> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open("/proc/self/pagemap").ok()?;
    let page = proctor_procfs::system::page_size() as usize;
    let mut entries = vec![0u8; pages * 8];
    file.read_exact_at(&mut entries, (base / page * 8) as u64).ok()?;
    let frames: Vec<u64> =
        entries.chunks_exact(8).map(|e| u64::from_ne_bytes(e.try_into().expect("8")) & ((1 << 55) - 1)).collect();
    if frames.iter().all(|&f| f == 0) {
        return None;
    }
    let next = frames.windows(2).filter(|w| w[1] == w[0] + 1).count();
    Some(next as f64 / (pages - 1) as f64)
}

/// Median wall and CPU milliseconds of a `smaps_rollup` read of a child sharing 1 GiB of 4 KiB
/// pages with this process, and how contiguous those pages are ([`contiguous`]).
fn rollup_ms() -> (f64, f64, Option<f64>) {
    let len = 1usize << 30;
    let base = map(len, libc::MADV_NOHUGEPAGE);
    let page = proctor_procfs::system::page_size() as usize;
    for at in (0..len).step_by(page) {
        // SAFETY: inside the mapping.
        unsafe { base.cast::<u8>().add(at).write_volatile(1) };
    }
    // SAFETY: the child only sleeps (async-signal-safe calls) until it is killed, by this
    // process below or, should this one end first, by the kernel (PR_SET_PDEATHSIG).
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: prctl with these arguments only sets the signal.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        loop {
            // SAFETY: pause() is async-signal-safe.
            unsafe { libc::pause() };
        }
    }
    let path = format!("/proc/{child}/smaps_rollup");
    let mut times = Vec::new();
    std::fs::read(&path).expect("read smaps_rollup");
    for _ in 0..5 {
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        std::fs::read(&path).expect("read smaps_rollup");
        times.push((wall.elapsed().as_nanos() as f64 / 1e6, (thread_cpu_ns() - cpu) as f64 / 1e6));
    }
    let share = contiguous(base as usize, len / page);
    // SAFETY: our own child, by its pid; reaped.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        libc::munmap(base, len);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(times.iter().map(|t| t.0).collect()), median(times.iter().map(|t| t.1).collect()), share)
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let chases: Vec<(usize, f64)> = [1, 8, 64].into_iter().map(|mib| (mib, chase_ns(mib))).collect();
    let (wall, cpu, share) = rollup_ms();
    let share_json = share.map_or("null".to_string(), |s| format!("{s:.4}"));
    let share_text = share.map_or("frames unreadable".to_string(), |s| {
        format!("{:.1} % of its pages follow the one before in memory", s * 100.0)
    });
    if json {
        let loads: Vec<String> = chases.iter().map(|(mib, ns)| format!("\"{mib}\":{ns:.1}")).collect();
        println!(
            "{{\"load_ns_by_mib\":{{{}}},\"rollup_1gib_ms\":{wall:.2},\"rollup_1gib_cpu_ms\":{cpu:.2},\"rollup_contiguous\":{share_json}}}",
            loads.join(",")
        );
    } else {
        let loads: Vec<String> = chases.iter().map(|(mib, ns)| format!("{ns:.0} ns at {mib} MiB")).collect();
        println!(
            "host memory: a dependent load {}; smaps_rollup of 1 GiB in 4 KiB pages {wall:.1} ms ({cpu:.1} ms CPU; {share_text})",
            loads.join(", ")
        );
    }
}
