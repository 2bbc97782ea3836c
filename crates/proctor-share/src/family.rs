//! A family: the master PID and its descendants, optionally only those whose command line (or
//! name, while the command line is unread) matches a regex.

use std::collections::HashMap;

use regex::Regex;
use serde::Serialize;

/// One process of the table a family is picked from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    pub comm: String,
    /// Arguments joined by spaces; `None` when unread.
    pub cmdline: Option<String>,
}

/// Which members a family has.
#[derive(Debug, Clone)]
pub struct Spec {
    pub master: u32,
    /// Count the master itself (it shares with its workers: gunicorn's arbiter holds the
    /// preloaded app too).
    pub include_self: bool,
    /// Keep only members whose command line (or name) matches.
    pub matching: Option<Regex>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Master,
    Worker,
}

/// A member as picked: the process and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub proc: Proc,
    pub role: Role,
}

/// The family in `table`, master first, then workers by start time and pid. Empty when the
/// master is not in the table. The walk is bounded by the table's size (a pid loop in garbage
/// cannot make it spin).
pub fn members(table: &[Proc], spec: &Spec) -> Vec<Member> {
    let Some(master) = table.iter().find(|p| p.pid == spec.master) else {
        return Vec::new();
    };
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in table {
        if p.pid != p.ppid {
            children.entry(p.ppid).or_default().push(p);
        }
    }
    let mut workers = Vec::new();
    let mut stack = vec![master.pid];
    let mut visited = 0;
    while let Some(pid) = stack.pop() {
        visited += 1;
        if visited > table.len() {
            break;
        }
        for child in children.get(&pid).into_iter().flatten() {
            stack.push(child.pid);
            workers.push((*child).clone());
        }
    }
    let keep = |p: &Proc| spec.matching.as_ref().is_none_or(|re| re.is_match(p.cmdline.as_deref().unwrap_or(&p.comm)));
    workers.retain(|p| p.pid != master.pid && keep(p));
    workers.sort_by_key(|p| (p.start_ticks, p.pid));
    workers.dedup_by_key(|p| p.pid);
    let mut out = Vec::with_capacity(workers.len() + 1);
    if spec.include_self && keep(master) {
        out.push(Member { proc: master.clone(), role: Role::Master });
    }
    out.extend(workers.into_iter().map(|proc| Member { proc, role: Role::Worker }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn proc(pid: u32, ppid: u32, start: u64, cmd: &str) -> Proc {
        Proc {
            pid,
            ppid,
            start_ticks: start,
            comm: cmd.split(' ').next().unwrap_or("").into(),
            cmdline: Some(cmd.into()),
        }
    }

    fn table() -> Vec<Proc> {
        vec![
            proc(1, 0, 0, "init"),
            proc(100, 1, 10, "gunicorn: master [app]"),
            proc(103, 100, 13, "gunicorn: worker [app]"),
            proc(101, 100, 11, "gunicorn: worker [app]"),
            proc(102, 100, 12, "gunicorn: worker [app]"),
            proc(200, 101, 20, "sh -c date"),
            proc(300, 1, 30, "sshd"),
        ]
    }

    #[test]
    fn the_master_then_its_descendants_by_start() {
        let spec = Spec { master: 100, include_self: true, matching: None };
        let got: Vec<_> = members(&table(), &spec).iter().map(|m| (m.proc.pid, m.role)).collect();
        assert_eq!(
            got,
            vec![
                (100, Role::Master),
                (101, Role::Worker),
                (102, Role::Worker),
                (103, Role::Worker),
                (200, Role::Worker)
            ]
        );
        let without = Spec { include_self: false, ..spec };
        assert_eq!(members(&table(), &without).len(), 4);
    }

    #[test]
    fn a_regex_picks_a_family_out_of_a_bigger_tree() {
        let spec = Spec { master: 1, include_self: true, matching: Some(Regex::new("gunicorn").expect("regex")) };
        let got: Vec<_> = members(&table(), &spec).iter().map(|m| m.proc.pid).collect();
        assert_eq!(got, vec![100, 101, 102, 103], "init does not match, so it is not counted");
    }

    #[test]
    fn no_master_no_family_and_loops_end() {
        assert!(members(&table(), &Spec { master: 999, include_self: true, matching: None }).is_empty());
        let looped = vec![proc(5, 6, 0, "a"), proc(6, 5, 0, "b")];
        let got = members(&looped, &Spec { master: 5, include_self: true, matching: None });
        assert!(got.len() <= 3, "a ppid loop in garbage ends: {got:?}");
    }
}
