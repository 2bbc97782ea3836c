//! The stored wing, above the live agent: everything that reads the store back or rolls it up.
//! [`range`] is the one way a stored range is read (one frame budget; the tiers for spans the
//! raw samples no longer hold); [`store_history`] derives history points from stored samples
//! exactly as the live ring does (the agent's `PointMaker`), or from rollup rows;
//! [`history_query`] joins that with the ring's part of a query; [`rollup`] rolls finished
//! hours into minute rows and days into hour rows, by hand or on a `Roller` thread.
//!
//! What it does not do: sample, or keep the live ring (`proctor-agent`).

pub mod history_query;
pub mod range;
pub mod rollup;
pub mod store_history;
