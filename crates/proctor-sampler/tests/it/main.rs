//! Integration tests of the sampler: fake /proc and cgroup trees for every cgroup layout, and
//! the real machine.

mod fake_tree;
mod real;
