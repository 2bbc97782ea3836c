//! The same rounds out of recorded samples: the agent's PSS worker stores each process's
//! `smaps_rollup` counters with the sample (refreshed when the process's fault or RSS counters
//! move, at most a minute old otherwise), so a recording already holds every member's private
//! dirty over time. Nothing is read from `/proc`.

use proctor_model::{ProcessSample, Sample};
use proctor_procfs::process::SmapsRollup;
use proctor_procfs::smaps::Counters;

use crate::family::{members, Proc, Spec};
use crate::round::{MemberRead, Round};

pub fn proc_of(p: &ProcessSample) -> Proc {
    Proc {
        pid: p.pid,
        ppid: p.ppid,
        start_ticks: p.start_ticks,
        comm: p.comm.to_string(),
        cmdline: p.cmdline.as_ref().map(|args| args.join(" ")),
    }
}

/// A stored reading as counters. `Anonymous` is not stored, so it reads 0 (and the member says
/// `anonymous_known: false`).
pub fn counters_of(r: &SmapsRollup) -> Counters {
    Counters {
        rss_bytes: r.rss_bytes.unwrap_or(0),
        pss_bytes: r.pss_bytes.unwrap_or(0),
        pss_anon_bytes: r.pss_anon_bytes.unwrap_or(0),
        pss_file_bytes: r.pss_file_bytes.unwrap_or(0),
        pss_shmem_bytes: r.pss_shmem_bytes.unwrap_or(0),
        shared_clean_bytes: r.shared_clean_bytes.unwrap_or(0),
        shared_dirty_bytes: r.shared_dirty_bytes.unwrap_or(0),
        private_clean_bytes: r.private_clean_bytes.unwrap_or(0),
        private_dirty_bytes: r.private_dirty_bytes.unwrap_or(0),
        swap_bytes: r.swap_bytes.unwrap_or(0),
        swap_pss_bytes: r.swap_pss_bytes.unwrap_or(0),
        anonymous_bytes: 0,
    }
}

/// Turns samples into rounds: a round whenever the family's members or one of their readings
/// changed. The master is the process with `spec.master`'s pid and the start time it had in the
/// first sample it appears in (a reused pid is another family).
#[derive(Debug, Default)]
pub struct Rounds {
    master_start: Option<u64>,
    first_unix_ns: Option<u64>,
    /// (pid, start, read time) of the last round's members.
    last_key: Vec<(u32, u64, Option<u64>)>,
    pub samples: usize,
    pub samples_with_family: usize,
    /// Member readings missing (the agent had not read the process yet).
    pub unread: usize,
}

impl Rounds {
    pub fn new() -> Self {
        Self::default()
    }

    /// The round this sample adds, if it changed anything.
    pub fn push(&mut self, sample: &Sample, spec: &Spec) -> Option<Round> {
        self.samples += 1;
        let master = sample.processes.iter().find(|p| p.pid == spec.master)?;
        if *self.master_start.get_or_insert(master.start_ticks) != master.start_ticks {
            return None;
        }
        let table: Vec<Proc> = sample.processes.iter().map(proc_of).collect();
        let family = members(&table, spec);
        if family.is_empty() {
            return None;
        }
        self.samples_with_family += 1;
        let first = *self.first_unix_ns.get_or_insert(sample.unix_ns);
        let by_pid =
            |pid: u32| sample.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &sample.processes[i]);
        let key: Vec<(u32, u64, Option<u64>)> = family
            .iter()
            .map(|m| {
                let read = by_pid(m.proc.pid).and_then(|p| p.pss.as_ref()).map(|r| r.read_mono_ns);
                (m.proc.pid, m.proc.start_ticks, read)
            })
            .collect();
        if key == self.last_key {
            return None;
        }
        self.last_key = key;
        let members = family
            .into_iter()
            .map(|m| {
                let reading = by_pid(m.proc.pid).and_then(|p| p.pss.as_ref());
                if reading.is_none() {
                    self.unread += 1;
                }
                MemberRead {
                    pid: m.proc.pid,
                    ppid: m.proc.ppid,
                    start_ticks: m.proc.start_ticks,
                    comm: m.proc.comm,
                    role: m.role,
                    counters: reading.map(|r| counters_of(&r.rollup)),
                    anonymous_known: false,
                    error: reading.is_none().then(|| "not read by the agent yet".to_string()),
                    cost: None,
                }
            })
            .collect();
        Some(Round {
            at_secs: sample.unix_ns.saturating_sub(first) as f64 / 1e9,
            unix_ms: sample.unix_ns / 1_000_000,
            members,
        })
    }
}
