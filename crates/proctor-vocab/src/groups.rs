//! The groups document: what `GET /api/v1/groups` and `proctor groups --format json` print,
//! from the groups the agent folded into a snapshot.

use proctor_agent::Snapshot;
use proctor_groups::GroupRow;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct GroupOut<'a> {
    #[serde(flatten)]
    pub row: &'a GroupRow,
    /// CPU seconds the group used while the agent watched it (members' own and their reaped
    /// children's), only growing: a Prometheus counter.
    pub cpu_seconds_counter: f64,
    /// Members that ended while the agent watched (with BPF process events, those that lived
    /// between two samples too), only growing.
    pub exited_total: u64,
}

#[derive(Debug, Serialize)]
pub struct GroupsOut<'a> {
    pub time_unix_ms: u64,
    /// Seconds the rates are over; `null` without a previous sample.
    pub interval_secs: Option<f64>,
    /// `rules`, `cgroup` or `user`.
    pub by: &'static str,
    /// Processes in the sample.
    pub processes: usize,
    /// Processes no rule took and no grouped parent carried (rules only).
    pub ungrouped: usize,
    /// Processes whose command line was not read yet: `exe` and `cmdline` rules cannot take
    /// them in this sample (their children follow them once they are).
    pub cmdline_unread: usize,
    /// Groups left out by the agent's cap (`--max-groups`), smallest CPU first.
    pub overflow: usize,
    /// CPU the agent spent folding groups for this sample.
    pub fold_cpu_seconds: f64,
    pub groups: Vec<GroupOut<'a>>,
}

/// The document of `s`'s groups; `None` when the agent keeps none. `top` > 0 keeps the first
/// `top` groups.
pub fn groups(s: &Snapshot, top: usize) -> Option<GroupsOut<'_>> {
    let g = s.groups.as_deref()?;
    let n = if top == 0 { g.groups.len() } else { top.min(g.groups.len()) };
    Some(GroupsOut {
        time_unix_ms: s.unix_ms(),
        interval_secs: s.interval_secs,
        by: g.by,
        processes: s.rows.len(),
        ungrouped: g.ungrouped,
        cmdline_unread: s.rows.iter().filter(|r| r.cmdline.is_none()).count(),
        overflow: g.overflow + (g.groups.len() - n),
        fold_cpu_seconds: g.cost_cpu_ns as f64 / 1e9,
        groups: g.groups[..n]
            .iter()
            .map(|(row, c)| GroupOut {
                row,
                cpu_seconds_counter: *c,
                exited_total: g.exited_total.get(&row.name).copied().unwrap_or(0),
            })
            .collect(),
    })
}
