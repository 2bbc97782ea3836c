//! Alerts: rules over everything proctor measures, told to a log, webhooks, Slack, Alertmanager
//! or a command.
//!
//! - [`expr`] parses the expression language; [`catalog`] names the series it may use (the
//!   published vocabulary); [`eval`] compiles expressions against it and evaluates them over a
//!   snapshot, keeping the windows `rate`/`*_over` need.
//! - [`rules`] reads a rules file (Prometheus's layout, every mistake with line and column).
//! - [`state`] turns each evaluation into transitions (pending, firing, resolved) with `for`,
//!   `clear` hysteresis, `keep_firing_for`, flapping holds and silences; it is what persists.
//! - [`notify`] decides what is told (repeat interval, rate limit with coalescing) and renders
//!   bodies; [`deliver`] sends them, one thread and one bounded queue per receiver.
//! - [`engine`] runs it all beside an agent for `proctor serve`; [`backtest`] replays a
//!   recording through the same state machine for `proctor alerts test`.

pub mod backtest;
pub mod catalog;
pub mod deliver;
pub mod engine;
pub mod eval;
pub mod expr;
mod leaves;
pub mod notify;
pub mod rules;
pub mod slow;
pub mod state;
pub mod template;
