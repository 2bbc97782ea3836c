//! Process groups: process-exporter's rules (`rules`: the YAML people already have, every
//! mistake with its line and column), automatic groups by cgroup and by user, and the fold of
//! a sample's process rows into per-group rows (`group`). Pure: no I/O, no clock.
//!
//! Not yet here (issue 17): the CPU of children that exited since the last sample (needs the
//! parent's `cutime`/`cstime` in the sample), minor-fault and io rates, open fds, started and
//! exited counts, and everything that keeps groups over time (the store's rollup tier, `dump
//! group`, `/api/v1/groups`, `/metrics`, the dashboard).

pub mod group;
pub mod limits;
pub mod rules;
pub mod yaml;

pub use group::{
    add_ended_net, add_exited, add_stored_exited, cgroup_name, churn, fold, sum, Assigner, By, Churn, GroupRow,
    GroupsView, Share,
};
pub use rules::{Diagnostic, Proc, Rules};
