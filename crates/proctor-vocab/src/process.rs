//! Process shapes: one process (`/api/v1/processes/PID`, the rows of `/api/v1/processes`, the
//! snapshot's top list, `proctor dump process`'s columns, the TUI's table) and a process tree
//! with its totals.

use std::sync::Arc;

use proctor_agent::Snapshot;
use proctor_model::{ProcessRow, Tree};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessOut {
    pub pid: u32,
    pub ppid: u32,
    /// `comm`: the kernel's 15-byte name, attacker-controlled.
    pub name: Arc<str>,
    /// `null` until the cmdline worker read it; empty for kernel threads.
    pub cmdline: Option<Arc<[String]>>,
    /// One letter, written as a one-letter string.
    pub state: char,
    pub uid: Option<u32>,
    /// Percent of one CPU (200 = two CPUs busy), as top shows it.
    pub cpu_percent: Option<f64>,
    /// Percent of the container's effective CPUs.
    pub cpu_percent_of_effective: Option<f64>,
    pub cpu_seconds_total: f64,
    pub start_time_unix_secs: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub vsize_bytes: u64,
    pub threads: u64,
    pub major_faults_per_sec: Option<f64>,
    pub read_bytes_per_sec: Option<f64>,
    pub write_bytes_per_sec: Option<f64>,
    /// Read and write together (with `--io`), as htop's IO_RATE.
    #[serde(default)]
    pub io_bytes_per_sec: Option<f64>,
    /// Network use (BPF, issue 36; `null` without it or before it was used): IP bytes each way
    /// per second (TCP and UDP, headers included), TCP retransmits and connects per second,
    /// established connections and their smoothed round-trip time (median and max), and the
    /// cumulative counters.
    #[serde(default)]
    pub net_rx_bytes_per_sec: Option<f64>,
    #[serde(default)]
    pub net_tx_bytes_per_sec: Option<f64>,
    #[serde(default)]
    pub net_retransmits_per_sec: Option<f64>,
    #[serde(default)]
    pub net_connects_per_sec: Option<f64>,
    #[serde(default)]
    pub net_connections: Option<u32>,
    #[serde(default)]
    pub net_rtt_seconds: Option<f64>,
    #[serde(default)]
    pub net_rtt_max_seconds: Option<f64>,
    #[serde(default)]
    pub net_rx_bytes_total: Option<u64>,
    #[serde(default)]
    pub net_tx_bytes_total: Option<u64>,
    #[serde(default)]
    pub net_retransmits_total: Option<u64>,
    /// From the budgeted `smaps_rollup` worker; see `pss_age_secs`.
    pub pss_bytes: Option<u64>,
    pub uss_bytes: Option<u64>,
    pub swap_pss_bytes: Option<u64>,
    /// How old the PSS/USS reading is; `null` when there is none yet.
    pub pss_age_secs: Option<f64>,
    /// Where the PSS/USS figures are not this process's own reading but its clone's (same
    /// parent and name, resident size and faults within 16 pages), that clone's pid, until it
    /// is read itself.
    #[serde(default)]
    pub pss_estimated_from: Option<u32>,
    /// The stall ledger: how long proctor's reads held this process's mmap lock (`smaps_rollup`,
    /// `cmdline`) since proctor first saw it, and the longest: traced holds where proctor traces
    /// the kernel's mmap_lock tracepoints, else wall times (upper bounds). `null` before the
    /// first read.
    #[serde(default)]
    pub stall_by_proctor_seconds_total: Option<f64>,
    #[serde(default)]
    pub stall_by_proctor_max_seconds: Option<f64>,
    /// The target's side of the ledger: how long its own threads waited for their mmap lock
    /// while a proctor read held it, from the kernel's mmap_lock tracepoints; `null` where
    /// proctor could not trace them (`proctor doctor` says why).
    #[serde(default)]
    pub stall_target_waited_seconds_total: Option<f64>,
    /// Why PSS is not read, when it is not: one read held the mmap lock past the cap, or the
    /// kernel refused the read.
    #[serde(default)]
    pub pss_note: Option<Arc<str>>,
    pub cgroup: Option<Arc<str>>,
    /// The busiest GPU engine's busy share over the interval (DRM fdinfo), or NVML's SM share,
    /// whichever is higher; `null` for a process that holds no GPU or before a second reading.
    #[serde(default)]
    pub gpu_percent: Option<f64>,
    /// GPU memory the process's clients hold (DRM, every region) plus NVML's used memory.
    #[serde(default)]
    pub gpu_memory_bytes: Option<u64>,
    /// Its threads besides the main one, only while they are read (`proctor top`'s `H`);
    /// left out when empty. Their memory is the process's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_rows: Vec<ThreadOut>,
}

/// One thread of a process: its own name (`/proc/PID/task/TID/comm`), state and CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadOut {
    pub tid: u32,
    pub name: Arc<str>,
    pub state: char,
    pub cpu_percent: Option<f64>,
    pub cpu_seconds_total: f64,
}

/// What a process field needs besides the agent's row, which keeps CPU time in clock ticks:
/// the snapshot's tick rate and boot time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowCtx {
    pub ticks_per_sec: f64,
    pub boot_unix_secs: Option<u64>,
}

impl RowCtx {
    pub fn of(s: &proctor_agent::Snapshot) -> RowCtx {
        RowCtx { ticks_per_sec: s.sample.clock_ticks_per_sec.max(1) as f64, boot_unix_secs: s.host.boot_time_unix_secs }
    }
}

/// What a process in the public shape adds to its group (`proctor_groups::sum`): what that
/// shape has; reaped children, user/system split, minor faults and fds are not in it.
pub fn share(p: &ProcessOut) -> proctor_groups::Share {
    proctor_groups::Share {
        threads: p.threads,
        cpu_percent: p.cpu_percent.unwrap_or(0.0),
        cpu_seconds_total: p.cpu_seconds_total,
        rss_bytes: p.rss_bytes.unwrap_or(0),
        pss_uss_bytes: p.pss_bytes.map(|pss| (pss, p.uss_bytes.unwrap_or(0))),
        swap_bytes: p.swap_bytes.unwrap_or(0),
        major_faults_per_sec: p.major_faults_per_sec.unwrap_or(0.0),
        read_bytes_per_sec: p.read_bytes_per_sec,
        write_bytes_per_sec: p.write_bytes_per_sec,
        net: p.net_rx_bytes_per_sec.map(|rx| {
            (
                rx,
                p.net_tx_bytes_per_sec.unwrap_or(0.0),
                p.net_retransmits_per_sec.unwrap_or(0.0),
                p.net_connects_per_sec.unwrap_or(0.0),
                u64::from(p.net_connections.unwrap_or(0)),
            )
        }),
        start_unix_secs: p.start_time_unix_secs,
        ..proctor_groups::Share::default()
    }
}

/// The agent's row back from the public shape, for the engines that read rows (alert rules
/// over a remote agent's or a recording's frames: `top --slow`). `ctx` gives the ticks and boot
/// time to count CPU and start time in; what the shape does not carry (reaped children, minor
/// faults, fds, the user/system split) is unknown. Every field of the table reads the same from
/// it as from `p`, to the tick (a test holds it).
pub fn row_of(p: &ProcessOut, ctx: &RowCtx) -> ProcessRow {
    let ticks = |secs: f64| (secs * ctx.ticks_per_sec).round().max(0.0) as u64;
    let pss =
        (p.pss_bytes.is_some() || p.uss_bytes.is_some() || p.swap_pss_bytes.is_some() || p.pss_age_secs.is_some())
            .then(|| proctor_model::MemoryAge {
                pss_bytes: p.pss_bytes,
                uss_bytes: p.uss_bytes,
                swap_pss_bytes: p.swap_pss_bytes,
                age_secs: p.pss_age_secs.unwrap_or(0.0),
                // The shape does not carry it: the tree's sum says it (`pss_stale`).
                stale: false,
                estimated_from: p.pss_estimated_from,
            });
    let gpu = (p.gpu_percent.is_some() || p.gpu_memory_bytes.is_some()).then(|| proctor_model::gpu::ProcessGpu {
        busy_percent: p.gpu_percent,
        memory_bytes: p.gpu_memory_bytes,
        engines: Vec::new(),
    });
    ProcessRow {
        pid: p.pid,
        ppid: p.ppid,
        start_ticks: p.start_time_unix_secs.zip(ctx.boot_unix_secs).map_or(0, |(s, b)| ticks(s - b as f64)),
        comm: Arc::clone(&p.name),
        cmdline: p.cmdline.clone(),
        state: p.state,
        uid: p.uid,
        cpu_percent: p.cpu_percent,
        cpu_percent_of_effective: p.cpu_percent_of_effective,
        cpu_ticks_total: ticks(p.cpu_seconds_total),
        rss_bytes: p.rss_bytes,
        anon_bytes: p.anon_bytes,
        file_bytes: p.file_bytes,
        shmem_bytes: p.shmem_bytes,
        swap_bytes: p.swap_bytes,
        vsize_bytes: p.vsize_bytes,
        threads: p.threads,
        major_faults_per_sec: p.major_faults_per_sec,
        read_bytes_per_sec: p.read_bytes_per_sec,
        write_bytes_per_sec: p.write_bytes_per_sec,
        pss,
        stall: p.stall_by_proctor_seconds_total.map(|total| proctor_model::Stall {
            reads: 0,
            total_ns: (total * 1e9).round() as u64,
            max_ns: p.stall_by_proctor_max_seconds.map_or(0, |m| (m * 1e9).round() as u64),
            capped: p.pss_note.as_deref() == Some(PSS_CAPPED),
            refused: p.pss_note.as_deref() == Some(PSS_REFUSED),
            put_off: p.pss_note.as_deref() == Some(PSS_PUT_OFF),
            waited_ns: p.stall_target_waited_seconds_total.map(|w| (w * 1e9).round() as u64),
        }),
        cgroup: p.cgroup.clone(),
        gpu,
        net: p.net_rx_bytes_per_sec.map(|rx| {
            Box::new(proctor_model::NetRates {
                rx_bytes_per_sec: rx,
                tx_bytes_per_sec: p.net_tx_bytes_per_sec.unwrap_or(0.0),
                retransmits_per_sec: p.net_retransmits_per_sec.unwrap_or(0.0),
                connects_per_sec: p.net_connects_per_sec.unwrap_or(0.0),
                connections: p.net_connections.unwrap_or(0),
                srtt_median_us: us(p.net_rtt_seconds),
                srtt_max_us: us(p.net_rtt_max_seconds),
                ..proctor_model::NetRates::default()
            })
        }),
        net_total: p.net_rx_bytes_total.map(|rx| {
            Box::new(proctor_model::ProcessNet {
                tcp: proctor_model::NetCounters {
                    rx_bytes: rx,
                    tx_bytes: p.net_tx_bytes_total.unwrap_or(0),
                    ..proctor_model::NetCounters::default()
                },
                retransmits: p.net_retransmits_total.unwrap_or(0),
                connections: p.net_connections.unwrap_or(0),
                srtt_median_us: us(p.net_rtt_seconds),
                srtt_max_us: us(p.net_rtt_max_seconds),
                ..proctor_model::ProcessNet::default()
            })
        }),
        // Not in the public shape: reaped children, minor faults, the user/system split, fds.
        ..ProcessRow::default()
    }
}

/// Seconds back to whole microseconds (a round trip time as the kernel keeps it).
fn us(secs: Option<f64>) -> Option<u32> {
    secs.map(|s| (s * 1e6).round().clamp(0.0, f64::from(u32::MAX)) as u32)
}

/// `pss_note` of a process whose PSS is no longer read.
pub const PSS_CAPPED: &str =
    "not read again: one read held its mmap lock longer than proctor lets one read hold it (stall_by_proctor_max_seconds)";

/// `pss_note` of a process whose `smaps_rollup` the kernel refused proctor.
pub const PSS_REFUSED: &str = "not read: the kernel refused proctor its smaps_rollup (no permission: another user namespace, or the ptrace access check); tried again when its memory changes";

/// `pss_note` of a process whose read the PSS worker put off while the host was busy.
pub const PSS_PUT_OFF: &str = "put off: the host has more runnable tasks than CPUs, or the fewer CPUs proctor may run on are all busy, and its smaps_rollup would then likely hold its mmap lock longer than proctor lets one read hold it (a walk of its pages does not fit the budget); weighed again each second, and read within 10 s";

/// Why a process has no fresh PSS, from its stall ledger: capped, refused, put off, or none of
/// these.
pub fn pss_note(stall: Option<proctor_model::Stall>) -> Option<&'static str> {
    match stall? {
        s if s.capped => Some(PSS_CAPPED),
        s if s.refused => Some(PSS_REFUSED),
        s if s.put_off => Some(PSS_PUT_OFF),
        _ => None,
    }
}

pub fn process(s: &Snapshot, r: &ProcessRow) -> ProcessOut {
    let ticks = s.sample.clock_ticks_per_sec.max(1) as f64;
    let boot = s.host.boot_time_unix_secs;
    ProcessOut {
        pid: r.pid,
        ppid: r.ppid,
        name: Arc::clone(&r.comm),
        cmdline: r.cmdline.clone(),
        state: r.state,
        uid: r.uid,
        cpu_percent: r.cpu_percent,
        cpu_percent_of_effective: r.cpu_percent_of_effective,
        cpu_seconds_total: r.cpu_ticks_total as f64 / ticks,
        start_time_unix_secs: boot.map(|b| b as f64 + r.start_ticks as f64 / ticks),
        rss_bytes: r.rss_bytes,
        anon_bytes: r.anon_bytes,
        file_bytes: r.file_bytes,
        shmem_bytes: r.shmem_bytes,
        swap_bytes: r.swap_bytes,
        vsize_bytes: r.vsize_bytes,
        threads: r.threads,
        major_faults_per_sec: r.major_faults_per_sec,
        read_bytes_per_sec: r.read_bytes_per_sec,
        write_bytes_per_sec: r.write_bytes_per_sec,
        io_bytes_per_sec: io_rate(r),
        net_rx_bytes_per_sec: r.net.as_deref().map(|n| n.rx_bytes_per_sec),
        net_tx_bytes_per_sec: r.net.as_deref().map(|n| n.tx_bytes_per_sec),
        net_retransmits_per_sec: r.net.as_deref().map(|n| n.retransmits_per_sec),
        net_connects_per_sec: r.net.as_deref().map(|n| n.connects_per_sec),
        net_connections: r.net_total.as_deref().map(|n| n.connections),
        net_rtt_seconds: r.net_total.as_deref().and_then(|n| n.srtt_median_us).map(|us| f64::from(us) / 1e6),
        net_rtt_max_seconds: r.net_total.as_deref().and_then(|n| n.srtt_max_us).map(|us| f64::from(us) / 1e6),
        net_rx_bytes_total: r.net_total.as_deref().map(|n| n.rx_bytes()),
        net_tx_bytes_total: r.net_total.as_deref().map(|n| n.tx_bytes()),
        net_retransmits_total: r.net_total.as_deref().map(|n| n.retransmits),
        pss_bytes: r.pss.and_then(|p| p.pss_bytes),
        uss_bytes: r.pss.and_then(|p| p.uss_bytes),
        swap_pss_bytes: r.pss.and_then(|p| p.swap_pss_bytes),
        pss_age_secs: r.pss.map(|p| p.age_secs),
        pss_estimated_from: r.pss.and_then(|p| p.estimated_from),
        stall_by_proctor_seconds_total: r.stall.map(|s| s.total_ns as f64 / 1e9),
        stall_by_proctor_max_seconds: r.stall.map(|s| s.max_ns as f64 / 1e9),
        stall_target_waited_seconds_total: r.stall.and_then(|s| s.waited_ns).map(|w| w as f64 / 1e9),
        pss_note: pss_note(r.stall).map(Arc::from),
        cgroup: r.cgroup.clone(),
        gpu_percent: r.gpu.as_ref().and_then(|g| g.busy_percent),
        gpu_memory_bytes: r.gpu.as_ref().and_then(|g| g.memory_bytes),
        thread_rows: r
            .thread_rows
            .iter()
            .map(|t| ThreadOut {
                tid: t.tid,
                name: Arc::clone(&t.comm),
                state: t.state,
                cpu_percent: t.cpu_percent,
                cpu_seconds_total: t.cpu_ticks_total as f64 / ticks,
            })
            .collect(),
    }
}

/// A process's bytes read and written per second together; `None` where its io was not read.
pub fn io_rate(r: &ProcessRow) -> Option<f64> {
    match (r.read_bytes_per_sec, r.write_bytes_per_sec) {
        (None, None) => None,
        (read, write) => Some(read.unwrap_or(0.0) + write.unwrap_or(0.0)),
    }
}

/// `/api/v1/processes/PID`: the process, and when it heads a preforked family, what the
/// family shares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessDetailOut {
    #[serde(flatten)]
    pub process: ProcessOut,
    /// `null` unless the process has at least [`FAMILY_MIN_WORKERS`] children of one name.
    pub sharing: Option<SharingOut>,
}

/// A family: a parent with at least this many children of the same name (gunicorn's, uwsgi's,
/// PHP-FPM's and Postgres's workers share their master's name).
pub const FAMILY_MIN_WORKERS: usize = 2;

/// What a family shares, from the PSS worker's latest readings: no read of its own. Sums are
/// over the members that have a reading, RSS included, so they compare like with like.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SharingOut {
    /// The workers' name and how many there are.
    pub worker_name: Arc<str>,
    pub workers: usize,
    /// The parent and its workers.
    pub members: usize,
    /// Members with a PSS reading: the sums are over these.
    pub members_read: usize,
    /// Of those, how many show a clone's reading standing in for their own (`pss_estimated_from`).
    #[serde(default)]
    pub members_estimated: usize,
    /// What they would use unshared: the sum of their RSS.
    pub rss_sum_bytes: u64,
    /// What they use: the sum of their PSS.
    pub pss_sum_bytes: u64,
    pub uss_sum_bytes: u64,
    pub saving_bytes: u64,
    pub saving_percent: Option<f64>,
    /// The oldest reading among the members read.
    pub oldest_reading_age_secs: Option<f64>,
}

/// The sharing summary of `pid`'s family in `s`, if it heads one.
pub fn sharing(s: &Snapshot, pid: u32) -> Option<SharingOut> {
    let parent = s.row(pid)?;
    let mut by_name: std::collections::HashMap<&str, Vec<&ProcessRow>> = std::collections::HashMap::new();
    for r in s.rows.iter().filter(|r| r.ppid == pid && r.pid != pid) {
        by_name.entry(&r.comm).or_default().push(r);
    }
    let (name, workers) = by_name
        .into_iter()
        .filter(|(_, rows)| rows.len() >= FAMILY_MIN_WORKERS)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(a.0)))?;
    let mut out = SharingOut {
        worker_name: Arc::from(name),
        workers: workers.len(),
        members: workers.len() + 1,
        members_read: 0,
        members_estimated: 0,
        rss_sum_bytes: 0,
        pss_sum_bytes: 0,
        uss_sum_bytes: 0,
        saving_bytes: 0,
        saving_percent: None,
        oldest_reading_age_secs: None,
    };
    for r in std::iter::once(parent).chain(workers) {
        let (Some(reading), Some(rss)) = (r.pss, r.rss_bytes) else { continue };
        let Some(pss) = reading.pss_bytes else { continue };
        out.members_read += 1;
        out.members_estimated += usize::from(reading.estimated_from.is_some());
        out.rss_sum_bytes += rss;
        out.pss_sum_bytes += pss;
        out.uss_sum_bytes += reading.uss_bytes.unwrap_or(0);
        let age = out.oldest_reading_age_secs.map_or(reading.age_secs, |a| a.max(reading.age_secs));
        out.oldest_reading_age_secs = Some(age);
    }
    out.saving_bytes = out.rss_sum_bytes.saturating_sub(out.pss_sum_bytes);
    if out.rss_sum_bytes > 0 {
        out.saving_percent = Some(out.saving_bytes as f64 * 100.0 / out.rss_sum_bytes as f64);
    }
    Some(out)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessListOut {
    pub time_unix_ms: u64,
    /// Processes in the snapshot.
    pub total: usize,
    /// Processes that passed the filter, before `offset`/`limit`.
    pub matched: usize,
    pub processes: Vec<ProcessOut>,
}

#[derive(Debug, Serialize)]
pub struct TreeRowOut {
    pub depth: usize,
    #[serde(flatten)]
    pub process: ProcessOut,
}

/// A tree's sums: the model's own, printed as they are (one definition of the sums and of
/// their JSON).
pub use proctor_model::TreeTotal as TreeTotalOut;

#[derive(Debug, Serialize)]
pub struct TreeOut {
    pub time_unix_ms: u64,
    pub root_pid: u32,
    pub processes: Vec<TreeRowOut>,
    pub total: TreeTotalOut,
}

pub fn tree(s: &Snapshot, t: &Tree) -> TreeOut {
    TreeOut {
        time_unix_ms: s.unix_ms(),
        root_pid: t.root_pid,
        processes: t.rows.iter().map(|r| TreeRowOut { depth: r.depth, process: process(s, &r.row) }).collect(),
        total: t.total.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family's sharing summary sums every member with a figure, and says how many of those
    /// are a clone's reading standing in for the member's own.
    #[test]
    fn a_sharing_summary_says_how_many_readings_are_clones() {
        let mut s = crate::snapshot::tests::live();
        let me = std::process::id();
        s.rows.retain(|r| r.ppid != me);
        let top = s.rows.iter().map(|r| r.pid).max().expect("rows");
        let age = |pss, from| proctor_model::MemoryAge {
            pss_bytes: Some(pss),
            uss_bytes: Some(1),
            swap_pss_bytes: None,
            age_secs: 1.0,
            stale: false,
            estimated_from: from,
        };
        let worker = |pid, from| ProcessRow {
            pid,
            ppid: me,
            comm: Arc::from("worker"),
            rss_bytes: Some(300),
            pss: Some(age(100, from)),
            ..ProcessRow::default()
        };
        s.rows.extend([worker(top + 1, None), worker(top + 2, Some(top + 1)), worker(top + 3, Some(top + 1))]);
        let i = s.rows.iter().position(|r| r.pid == me).expect("own row");
        s.rows[i].pss = Some(age(50, None));
        let f = sharing(&s, me).expect("a family of three workers");
        assert_eq!((f.workers, f.members, f.members_read, f.members_estimated), (3, 4, 4, 2));
        assert_eq!(f.pss_sum_bytes, 350);
    }

    /// A row without PSS says why when proctor will not read it (capped) or the kernel refused
    /// it, says nothing otherwise, and the note survives the way back to a row (`top
    /// --connect`, rules over remote frames).
    #[test]
    fn a_row_says_why_it_has_no_pss() {
        let s = crate::snapshot::tests::live();
        let ctx = RowCtx::of(&s);
        let row = s.rows.iter().find(|r| r.pid == std::process::id()).expect("own row");
        let read = proctor_model::Stall { reads: 1, total_ns: 2_000, max_ns: 2_000, ..Default::default() };
        for (stall, note) in [
            (None, None),
            (Some(read), None),
            (Some(proctor_model::Stall { capped: true, ..read }), Some(PSS_CAPPED)),
            (Some(proctor_model::Stall { refused: true, ..read }), Some(PSS_REFUSED)),
            (Some(proctor_model::Stall { capped: true, refused: true, ..read }), Some(PSS_CAPPED)),
            (Some(proctor_model::Stall { put_off: true, ..read }), Some(PSS_PUT_OFF)),
            (Some(proctor_model::Stall { refused: true, put_off: true, ..read }), Some(PSS_REFUSED)),
        ] {
            let out = process(&s, &ProcessRow { pss: None, stall, ..row.clone() });
            assert_eq!(out.pss_note.as_deref(), note, "{stall:?}");
            let back = row_of(&out, &ctx);
            assert_eq!(process(&s, &back).pss_note.as_deref(), note, "back from {out:?}");
        }
    }
}
