//! `proctor top`: a terminal view, live from an in-process agent, over a recording, or from a
//! remote `proctor serve`, with time travel between them.
//!
//! Layers: [`frame`] (what one screen shows, in the vocabulary's shapes, from any source),
//! [`view`] (sorting, filtering, tree folding, cgroups: pure), [`travel`] (the ring of recent
//! frames and the time cursor: pure), [`slow`] (pgtop's slow thresholds: pure), [`app`] (state
//! and keys: no I/O), [`draw`] (ratatui), [`source`] (the threads that feed the loop: agent,
//! remote, store worker, actions, slow log, input) and [`run`] (the loop and the terminal).
//! The loop never reads `/proc` or the store and never waits on the sampler.

pub mod app;
pub mod draw;
pub mod frame;
pub mod run;
pub mod slow;
pub mod source;
pub mod travel;
pub mod view;

#[cfg(test)]
pub(crate) mod test_support;

pub use run::{default_config_file, run, ReadsRule, Source, TopConfig, PSS_BUDGET};
