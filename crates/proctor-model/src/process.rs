//! Process rows: one line per process with rates derived from the previous sample.

use std::sync::Arc;

use serde::Serialize;

use crate::gpu::{gpu_view, ProcessGpu};
use crate::{delta, rate, ProcessSample, Sample};

/// A PSS/USS value and how old it is: the budgeted worker refreshes them slowly on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryAge {
    pub pss_bytes: Option<u64>,
    pub uss_bytes: Option<u64>,
    pub swap_pss_bytes: Option<u64>,
    pub age_secs: f64,
    /// Read before the process's family last changed ([`crate::PssReading::stale`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// Not this process's own reading: that of its clone, this pid (same parent and name,
    /// resident size and faults within 16 pages; [`crate::ProcessSample::pss_estimate`]), until
    /// it is read itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_from: Option<u32>,
}

/// A process's PSS row: its own reading, unless that is missing or stale and a clone's stands
/// in for it ([`ProcessSample::pss_estimate`]).
fn memory_age(p: &ProcessSample, now_mono_ns: u64) -> Option<MemoryAge> {
    let (reading, stale, from) = match (&p.pss, &p.pss_estimate) {
        (_, Some(estimate)) if p.pss.is_none() || p.pss_stale => (&estimate.1, false, Some(estimate.0)),
        (Some(own), _) => (own, p.pss_stale, None),
        (None, _) => return None,
    };
    Some(MemoryAge {
        pss_bytes: reading.rollup.pss_bytes,
        uss_bytes: reading.rollup.uss_bytes(),
        swap_pss_bytes: reading.rollup.swap_pss_bytes,
        age_secs: now_mono_ns.saturating_sub(reading.read_mono_ns) as f64 / 1e9,
        stale,
        estimated_from: from,
    })
}

/// Inputs to row derivation that are not in the sample.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowContext {
    /// The watched container's effective CPUs, to express CPU use as a share of them.
    pub effective_cpus: Option<f64>,
}

/// `Default` is pid 0 with nothing known: for building one field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    pub comm: Arc<str>,
    /// `None` until the cmdline worker has read it; empty for kernel threads.
    pub cmdline: Option<Arc<[String]>>,
    pub state: char,
    pub uid: Option<u32>,
    /// CPU use in percent of one CPU (200 = two CPUs busy), as top shows it.
    pub cpu_percent: Option<f64>,
    /// CPU use in percent of the container's effective CPUs (100 = all of them).
    pub cpu_percent_of_effective: Option<f64>,
    pub cpu_ticks_total: u64,
    pub rss_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub vsize_bytes: u64,
    pub threads: u64,
    pub major_faults_per_sec: Option<f64>,
    pub minor_faults_per_sec: Option<f64>,
    /// CPU, in percent of one CPU over the interval, of this process's children that exited
    /// and were reaped since the previous sample and that no earlier sample counted (from the
    /// growth of its `cutime` + `cstime`, less the CPU those children had when last seen, as
    /// netdata's apps.plugin does), so short-lived children are not lost.
    pub reaped_cpu_percent: Option<f64>,
    /// `cpu_percent` split into user and system time, and `reaped_cpu_percent` likewise (from
    /// `cutime` and `cstime` apart).
    pub cpu_user_percent: Option<f64>,
    pub cpu_system_percent: Option<f64>,
    pub reaped_user_percent: Option<f64>,
    pub reaped_system_percent: Option<f64>,
    /// Minor and major faults per second of those same children (from `cminflt`/`cmajflt`,
    /// less what they had when last seen): a wrapper script's children fault and are gone
    /// before any sample sees them.
    pub reaped_minor_faults_per_sec: Option<f64>,
    pub reaped_major_faults_per_sec: Option<f64>,
    /// Open fds, when counted (groups on, Linux 6.2+, the process readable).
    pub open_fds: Option<u32>,
    pub read_bytes_per_sec: Option<f64>,
    pub write_bytes_per_sec: Option<f64>,
    pub pss: Option<MemoryAge>,
    /// The stall ledger: how long proctor's reads have held this process's mmap lock (an upper
    /// bound: each read's wall time).
    pub stall: Option<crate::Stall>,
    pub cgroup: Option<Arc<str>>,
    /// GPU use (DRM clients credited to it, NVML processes); `None` for a process that holds
    /// no GPU.
    pub gpu: Option<ProcessGpu>,
    /// Its threads besides the main one, when they were read (`proctor top`'s `H`); sorted by
    /// tid.
    pub thread_rows: Vec<ThreadRow>,
    /// Its network use over the interval (BPF, issue 36); `None` without the network programs,
    /// for a process that has not used the network, or with no previous sample. Boxed, as
    /// `net_total`: most rows have neither, and inline they were 272 of a row's 856 bytes.
    pub net: Option<Box<NetRates>>,
    /// Its network counters since they were first counted (the Prometheus counters).
    pub net_total: Option<Box<crate::ProcessNet>>,
}

/// A process's network use over one interval ([`ProcessRow::net`]): IP bytes and packets (TCP
/// and UDP together; headers included), payload, connection churn and health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct NetRates {
    pub rx_bytes_per_sec: f64,
    pub tx_bytes_per_sec: f64,
    pub rx_packets_per_sec: f64,
    pub tx_packets_per_sec: f64,
    /// Payload per second: a datagram's as it left and as its socket took it in; TCP's as the
    /// peer acknowledged it and as it arrived in order (the connection's own counters).
    pub received_bytes_per_sec: f64,
    pub sent_bytes_per_sec: f64,
    pub retransmits_per_sec: f64,
    pub connects_per_sec: f64,
    pub accepts_per_sec: f64,
    pub resets_per_sec: f64,
    /// Established TCP connections now, and their smoothed round-trip times (µs).
    pub connections: u32,
    pub srtt_median_us: Option<u32>,
    pub srtt_max_us: Option<u32>,
}

/// The rates between two readings of one process's network counters (`before` `None`: it had
/// used no socket then, so everything counted is from the interval).
fn net_rates(now: &crate::ProcessNet, before: Option<&crate::ProcessNet>, secs: f64) -> NetRates {
    let zero = crate::ProcessNet::default();
    let b = before.unwrap_or(&zero);
    let per = |n: u64, o: u64| n.saturating_sub(o) as f64 / secs;
    NetRates {
        rx_bytes_per_sec: per(now.rx_bytes(), b.rx_bytes()),
        tx_bytes_per_sec: per(now.tx_bytes(), b.tx_bytes()),
        rx_packets_per_sec: per(now.rx_packets(), b.rx_packets()),
        tx_packets_per_sec: per(now.tx_packets(), b.tx_packets()),
        received_bytes_per_sec: per(
            now.tcp.received_bytes + now.udp.received_bytes,
            b.tcp.received_bytes + b.udp.received_bytes,
        ),
        sent_bytes_per_sec: per(now.tcp.sent_bytes + now.udp.sent_bytes, b.tcp.sent_bytes + b.udp.sent_bytes),
        retransmits_per_sec: per(now.retransmits, b.retransmits),
        connects_per_sec: per(now.connects, b.connects),
        accepts_per_sec: per(now.accepts, b.accepts),
        resets_per_sec: per(now.resets_sent + now.resets_received, b.resets_sent + b.resets_received),
        connections: now.connections,
        srtt_median_us: now.srtt_median_us,
        srtt_max_us: now.srtt_max_us,
    }
}

/// One thread of a process: its own name, state and CPU. Memory is the process's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ThreadRow {
    pub tid: u32,
    pub comm: Arc<str>,
    pub state: char,
    /// Percent of one CPU over the interval; `None` for a thread not in the previous sample.
    pub cpu_percent: Option<f64>,
    pub cpu_ticks_total: u64,
}

/// Derives one row per process in `cur`. A process is matched in `prev` by pid *and* start
/// time, so a reused pid gets no rate rather than a wrong one.
pub fn process_rows(cur: &Sample, prev: Option<&Sample>, ctx: RowContext) -> Vec<ProcessRow> {
    let secs = prev.and_then(|p| cur.mono_ns.checked_sub(p.mono_ns)).map(|ns| ns as f64 / 1e9).filter(|s| *s > 0.0);
    let ticks = cur.clock_ticks_per_sec.max(1) as f64;
    // What each process's children that exited since `prev` had used when last seen (their
    // own CPU and their reaped children's): that part of the parent's `cutime`/`cstime` growth
    // was counted already.
    // Per parent: (CPU ticks, minor faults, major faults, user ticks, system ticks) of its
    // exited children.
    let mut seen_exited: std::collections::HashMap<u32, (u64, u64, u64, u64, u64)> = std::collections::HashMap::new();
    if let Some(prev) = prev {
        for gone in &prev.processes {
            let still = cur.process(gone.pid).is_some_and(|c| c.start_ticks == gone.start_ticks);
            if !still {
                let seen = seen_exited.entry(gone.ppid).or_default();
                seen.0 += gone.utime_ticks
                    + gone.stime_ticks
                    + gone.cutime_ticks.unwrap_or(0)
                    + gone.cstime_ticks.unwrap_or(0);
                seen.1 += gone.minflt + gone.cminflt.unwrap_or(0);
                seen.2 += gone.majflt + gone.cmajflt.unwrap_or(0);
                seen.3 += gone.utime_ticks + gone.cutime_ticks.unwrap_or(0);
                seen.4 += gone.stime_ticks + gone.cstime_ticks.unwrap_or(0);
            }
        }
    }
    let mut gpu = gpu_view(cur, prev).0;
    cur.processes
        .iter()
        .map(|p| {
            let before = prev.and_then(|prev| prev.process(p.pid)).filter(|b| b.start_ticks == p.start_ticks);
            let mut r = row(cur, p, before, secs, ticks, ctx);
            r.gpu = gpu.remove(&p.pid);
            let seen = seen_exited.get(&p.pid).copied().unwrap_or_default();
            // Growth of a children's counter since `before`, less what exited children had
            // when last seen, per second.
            let unseen = |counter: fn(&ProcessSample) -> Option<u64>, seen: u64| {
                let (b, secs) = before.zip(secs)?;
                let grew = delta(counter(p)?, counter(b)?)?;
                Some(grew.saturating_sub(seen) as f64 / secs)
            };
            r.reaped_cpu_percent =
                unseen(|s| Some(s.cutime_ticks? + s.cstime_ticks?), seen.0).map(|per_sec| 100.0 * per_sec / ticks);
            r.reaped_user_percent = unseen(|s| s.cutime_ticks, seen.3).map(|per_sec| 100.0 * per_sec / ticks);
            r.reaped_system_percent = unseen(|s| s.cstime_ticks, seen.4).map(|per_sec| 100.0 * per_sec / ticks);
            r.reaped_minor_faults_per_sec = unseen(|s| s.cminflt, seen.1);
            r.reaped_major_faults_per_sec = unseen(|s| s.cmajflt, seen.2);
            r
        })
        .collect()
}

fn row(
    cur: &Sample,
    p: &ProcessSample,
    before: Option<&ProcessSample>,
    secs: Option<f64>,
    ticks: f64,
    ctx: RowContext,
) -> ProcessRow {
    let cpu_ticks_total = p.utime_ticks + p.stime_ticks;
    let cpu_percent = before.zip(secs).and_then(|(b, secs)| {
        let used = delta(cpu_ticks_total, b.utime_ticks + b.stime_ticks)? as f64 / ticks;
        Some(100.0 * used / secs)
    });
    let share = |now: u64, then: fn(&ProcessSample) -> u64| {
        let (b, secs) = before.zip(secs)?;
        Some(100.0 * delta(now, then(b))? as f64 / ticks / secs)
    };
    let status = p.status.as_ref();
    // From `status`, as of the last time the footprint moved (as fresh as `rss_bytes`).
    let anon_bytes = status.and_then(|s| s.rss_anon_bytes);
    let io_rate = |pick: fn(&proctor_procfs::process::Io) -> Option<u64>| {
        let (b, secs) = before.zip(secs)?;
        rate(pick(p.io.as_ref()?)?, pick(b.io.as_ref()?)?, secs)
    };
    ProcessRow {
        pid: p.pid,
        ppid: p.ppid,
        start_ticks: p.start_ticks,
        comm: p.comm.clone(),
        cmdline: p.cmdline.clone(),
        state: p.state,
        uid: status.and_then(|s| s.effective_uid),
        cpu_percent,
        cpu_percent_of_effective: cpu_percent.zip(ctx.effective_cpus.filter(|e| *e > 0.0)).map(|(pct, eff)| pct / eff),
        cpu_ticks_total,
        rss_bytes: p.resident_bytes,
        anon_bytes,
        file_bytes: status.and_then(|s| s.rss_file_bytes),
        shmem_bytes: status.and_then(|s| s.rss_shmem_bytes),
        swap_bytes: status.and_then(|s| s.vm_swap_bytes),
        vsize_bytes: p.vsize_bytes,
        threads: p.num_threads,
        major_faults_per_sec: before.zip(secs).and_then(|(b, secs)| rate(p.majflt, b.majflt, secs)),
        minor_faults_per_sec: before.zip(secs).and_then(|(b, secs)| rate(p.minflt, b.minflt, secs)),
        reaped_cpu_percent: None,
        cpu_user_percent: share(p.utime_ticks, |b| b.utime_ticks),
        cpu_system_percent: share(p.stime_ticks, |b| b.stime_ticks),
        reaped_user_percent: None,
        reaped_system_percent: None,
        reaped_minor_faults_per_sec: None,
        reaped_major_faults_per_sec: None,
        open_fds: p.open_fds,
        read_bytes_per_sec: io_rate(|io| io.read_bytes),
        write_bytes_per_sec: io_rate(|io| io.write_bytes),
        pss: memory_age(p, cur.mono_ns),
        stall: p.stall,
        cgroup: p.cgroup.clone(),
        gpu: None,
        net: p
            .net
            .as_deref()
            .zip(before.zip(secs))
            .map(|(n, (b, secs))| Box::new(net_rates(n, b.net.as_deref(), secs))),
        net_total: p.net.clone(),
        thread_rows: p
            .tasks
            .iter()
            .map(|t| {
                let total = t.utime_ticks + t.stime_ticks;
                // Matched by tid *and* start time, as processes are by pid.
                let was = before
                    .and_then(|b| b.tasks.binary_search_by_key(&t.tid, |o| o.tid).ok().map(|i| &b.tasks[i]))
                    .filter(|o| o.start_ticks == t.start_ticks);
                ThreadRow {
                    tid: t.tid,
                    comm: t.comm.clone(),
                    state: t.state,
                    cpu_percent: was.zip(secs).and_then(|(o, secs)| {
                        Some(100.0 * delta(total, o.utime_ticks + o.stime_ticks)? as f64 / ticks / secs)
                    }),
                    cpu_ticks_total: total,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskSample;

    fn p(pid: u32, ppid: u32, cpu: u64, children: u64) -> ProcessSample {
        ProcessSample {
            pid,
            ppid,
            start_ticks: u64::from(pid),
            comm: Arc::from("x"),
            state: 'S',
            utime_ticks: cpu,
            cutime_ticks: Some(children),
            cstime_ticks: Some(0),
            num_threads: 1,
            ..ProcessSample::default()
        }
    }

    fn sample(seq: u64, processes: Vec<ProcessSample>) -> Sample {
        Sample {
            seq,
            unix_ns: seq * 1_000_000_000,
            mono_ns: seq * 1_000_000_000,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            processes,
            ..Sample::default()
        }
    }

    #[test]
    fn a_threads_cpu_is_its_own_and_a_new_or_reused_tid_has_none() {
        let task = |tid: u32, start_ticks: u64, utime_ticks: u64| TaskSample {
            tid,
            start_ticks,
            comm: Arc::from(format!("t{tid}")),
            state: 'R',
            utime_ticks,
            stime_ticks: 1,
        };
        let mut server = p(10, 1, 50, 0);
        server.tasks = vec![task(11, 5, 10), task(12, 5, 0)];
        let prev = sample(1, vec![server.clone()]);
        // Over one second: thread 11 ran 50 ticks of 100; 12 was replaced by a new thread
        // under the same tid; 13 is new.
        server.tasks = vec![task(11, 5, 60), task(12, 9, 0), task(13, 9, 4)];
        let row = &process_rows(&sample(2, vec![server]), Some(&prev), RowContext::default())[0];
        let got: Vec<(u32, &str, Option<f64>, u64)> =
            row.thread_rows.iter().map(|t| (t.tid, &*t.comm, t.cpu_percent, t.cpu_ticks_total)).collect();
        assert_eq!(got, vec![(11, "t11", Some(50.0), 61), (12, "t12", None, 1), (13, "t13", None, 5)]);
    }

    #[test]
    fn faults_of_children_that_exited_between_samples_are_counted_once() {
        // The wrapper (10) had reaped children with 1,000 minor and 3 major faults; its child 11,
        // seen with 400 minor faults (and 100 of its own reaped children's), exited and was
        // reaped, as was an unseen one: the wrapper's counts grew by 1,900 and 8. 500 of the
        // minor ones were seen while 11 was alive, so 1,400 per second are new.
        let mut wrapper = p(10, 1, 5, 0);
        (wrapper.cminflt, wrapper.cmajflt) = (Some(1000), Some(3));
        let mut child = p(11, 10, 30, 0);
        (child.minflt, child.cminflt, child.cmajflt) = (400, Some(100), Some(0));
        let prev = sample(1, vec![wrapper.clone(), child]);
        (wrapper.cminflt, wrapper.cmajflt) = (Some(2900), Some(11));
        let cur = sample(2, vec![wrapper]);
        let row = &process_rows(&cur, Some(&prev), RowContext::default())[0];
        assert_eq!(row.reaped_minor_faults_per_sec, Some(1400.0));
        assert_eq!(row.reaped_major_faults_per_sec, Some(8.0));
        // A recording from before cminflt was read has no such rate.
        let mut old = prev.clone();
        old.processes[0].cminflt = None;
        assert_eq!(process_rows(&cur, Some(&old), RowContext::default())[0].reaped_minor_faults_per_sec, None);
    }

    #[test]
    fn cpu_splits_into_user_and_system_reaped_children_included() {
        // One second apart at 100 ticks/s: the wrapper's own user time grew 20 ticks and system
        // 10; its child 11, last seen at 30 user and 10 system, exited and was reaped, and the
        // wrapper's cutime/cstime grew to 50/20: 20 and 10 ticks of it are new.
        let mut wrapper = p(10, 1, 10, 0);
        wrapper.cstime_ticks = Some(0);
        let mut child = p(11, 10, 30, 0);
        child.stime_ticks = 10;
        let prev = sample(1, vec![wrapper.clone(), child]);
        (wrapper.utime_ticks, wrapper.stime_ticks, wrapper.cutime_ticks, wrapper.cstime_ticks) =
            (30, 10, Some(50), Some(20));
        let cur = sample(2, vec![wrapper]);
        let row = &process_rows(&cur, Some(&prev), RowContext::default())[0];
        assert_eq!((row.cpu_user_percent, row.cpu_system_percent), (Some(20.0), Some(10.0)));
        assert_eq!((row.reaped_user_percent, row.reaped_system_percent), (Some(20.0), Some(10.0)));
        assert_eq!((row.cpu_percent, row.reaped_cpu_percent), (Some(30.0), Some(30.0)), "the parts add up");
    }

    #[test]
    fn children_that_exited_between_samples_are_counted_once() {
        // A wrapper (10) with a child (11) seen at the first sample having used 30 ticks. By the
        // second sample, one second later, 11 has exited after 20 more ticks, and another child
        // that lived and died between the samples used 50: the wrapper's cutime grew by 100 =
        // 11's 50 in all plus the unseen 50. 30 of it was counted while 11 was alive.
        let prev = sample(1, vec![p(10, 1, 5, 0), p(11, 10, 30, 0)]);
        let cur = sample(2, vec![p(10, 1, 5, 100)]);
        let rows = process_rows(&cur, Some(&prev), RowContext::default());
        let wrapper = &rows[0];
        assert_eq!(wrapper.cpu_percent, Some(0.0));
        let reaped = wrapper.reaped_cpu_percent.expect("a rate");
        assert!((reaped - 70.0).abs() < 1e-9, "{reaped}");
        // Without a previous sample, or from a recording made before cutime was read: no rate.
        assert_eq!(process_rows(&cur, None, RowContext::default())[0].reaped_cpu_percent, None);
        let mut old = prev.clone();
        old.processes[0].cutime_ticks = None;
        assert_eq!(process_rows(&cur, Some(&old), RowContext::default())[0].reaped_cpu_percent, None);
    }
}
