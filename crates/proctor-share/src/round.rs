//! One round: every member read once, and what the family shares.

use proctor_procfs::smaps::Counters;
use serde::Serialize;

use crate::family::Role;
use crate::{bytes, MIB};

/// What reading one member cost: CPU on the reader's thread, and how long the read call took,
/// which is how long the target's mmap lock was held (the kernel holds it for the whole walk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ReadCost {
    pub cpu_ns: u64,
    pub held_ns: u64,
}

/// One member's reading in a round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberRead {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    pub comm: String,
    pub role: Role,
    /// `None` when the read failed (`error` says why) or, from a recording, the member had no
    /// reading yet.
    pub counters: Option<Counters>,
    /// Whether `Anonymous` was read: `smaps_rollup` has it; a recording's readings do not.
    pub anonymous_known: bool,
    pub error: Option<String>,
    /// `None` from a recording: the agent's worker paid for the read, and its cost is in the
    /// agent's own figures.
    pub cost: Option<ReadCost>,
}

/// Every member read once, `at_secs` after the first round began.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    pub at_secs: f64,
    /// Wall-clock time of the round, milliseconds since the epoch.
    pub unix_ms: u64,
    pub members: Vec<MemberRead>,
}

/// What the family uses and would use, from one round's readings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub processes: usize,
    /// Members with a reading; the sums are over these.
    pub read: usize,
    /// What the family would use if nothing were shared: the sum of RSS.
    pub unshared_bytes: u64,
    /// What it uses: the sum of PSS (each shared page divided among its sharers).
    pub used_bytes: u64,
    pub uss_bytes: u64,
    pub swap_bytes: u64,
    pub saving_bytes: u64,
    /// The saving over the unshared total, 0–100.
    pub saving_percent: f64,
}

impl Summary {
    pub fn of(round: &Round) -> Summary {
        let mut s = Summary { processes: round.members.len(), ..Summary::default() };
        for c in round.members.iter().filter_map(|m| m.counters.as_ref()) {
            s.read += 1;
            s.unshared_bytes += c.rss_bytes;
            s.used_bytes += c.pss_bytes;
            s.uss_bytes += c.uss_bytes();
            s.swap_bytes += c.swap_bytes;
        }
        s.saving_bytes = s.unshared_bytes.saturating_sub(s.used_bytes);
        if s.unshared_bytes > 0 {
            s.saving_percent = s.saving_bytes as f64 * 100.0 / s.unshared_bytes as f64;
        }
        s
    }

    /// "5 processes use 1.31 GiB; unshared they would use 5.40 GiB: sharing saves 4.09 GiB,
    /// 76 %", with the coverage when a member could not be read.
    pub fn sentence(&self) -> String {
        let coverage = if self.read < self.processes {
            format!(" (read {} of {}: the sums are over those)", self.read, self.processes)
        } else {
            String::new()
        };
        format!(
            "{} processes use {}; unshared they would use {}: sharing saves {}, {:.0} %{coverage}",
            self.processes,
            bytes(self.used_bytes as f64),
            bytes(self.unshared_bytes as f64),
            bytes(self.saving_bytes as f64),
            self.saving_percent
        )
    }
}

/// What a round's reads cost, in total and at worst.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RoundCost {
    pub reads: usize,
    pub failed: usize,
    pub cpu_ns: u64,
    /// The longest any one target was held.
    pub longest_held_ns: u64,
    pub longest_held_pid: Option<u32>,
}

impl RoundCost {
    pub fn of(round: &Round) -> RoundCost {
        let mut c = RoundCost::default();
        for m in &round.members {
            if m.counters.is_some() {
                c.reads += 1;
            } else {
                c.failed += 1;
            }
            if let Some(cost) = m.cost {
                c.cpu_ns += cost.cpu_ns;
                if cost.held_ns >= c.longest_held_ns {
                    c.longest_held_ns = cost.held_ns;
                    c.longest_held_pid = Some(m.pid);
                }
            }
        }
        c
    }

    pub fn sentence(&self) -> String {
        let held = match self.longest_held_pid {
            Some(pid) => format!(", the longest hold {:.1} ms (pid {pid})", self.longest_held_ns as f64 / 1e6),
            None => String::new(),
        };
        let failed = if self.failed > 0 { format!(", {} failed", self.failed) } else { String::new() };
        format!(
            "{} smaps_rollup reads cost {:.1} ms of CPU{held}{failed}: each holds its target's mmap lock while it walks the target's pages",
            self.reads,
            self.cpu_ns as f64 / 1e6,
        )
    }
}

/// MiB, for tables.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn counters(rss_mib: u64, pss_mib: u64, private_dirty_mib: u64) -> Counters {
        let m = 1024 * 1024;
        let mut c = Counters {
            rss_bytes: rss_mib * m,
            pss_bytes: pss_mib * m,
            private_dirty_bytes: private_dirty_mib * m,
            shared_dirty_bytes: (rss_mib - private_dirty_mib) * m,
            ..Counters::default()
        };
        c.anonymous_bytes = c.rss_bytes;
        c
    }

    pub(crate) fn member(pid: u32, role: Role, c: Option<Counters>) -> MemberRead {
        MemberRead {
            pid,
            ppid: if role == Role::Master { 1 } else { 100 },
            start_ticks: u64::from(pid),
            comm: "gunicorn".into(),
            role,
            counters: c,
            anonymous_known: true,
            error: c.is_none().then(|| "gone".into()),
            cost: Some(ReadCost { cpu_ns: 1_000_000, held_ns: u64::from(pid) * 10_000 }),
        }
    }

    #[test]
    fn the_saving_is_the_sum_of_rss_less_the_sum_of_pss() {
        // A master and three workers sharing 200 MiB: each maps 210 MiB, PSS 200/4 + 10 each.
        let round = Round {
            at_secs: 0.0,
            unix_ms: 0,
            members: vec![
                member(100, Role::Master, Some(counters(210, 60, 10))),
                member(101, Role::Worker, Some(counters(210, 60, 10))),
                member(102, Role::Worker, Some(counters(210, 60, 10))),
                member(103, Role::Worker, None),
            ],
        };
        let s = Summary::of(&round);
        assert_eq!((s.processes, s.read), (4, 3));
        assert_eq!(s.unshared_bytes, 630 * 1024 * 1024);
        assert_eq!(s.saving_bytes, 450 * 1024 * 1024);
        assert!((s.saving_percent - 450.0 / 630.0 * 100.0).abs() < 1e-9);
        assert_eq!(
            s.sentence(),
            "4 processes use 180 MiB; unshared they would use 630 MiB: sharing saves 450 MiB, 71 % \
(read 3 of 4: the sums are over those)"
        );
        let cost = RoundCost::of(&round);
        assert_eq!((cost.reads, cost.failed, cost.longest_held_pid), (3, 1, Some(103)));
    }
}
