//! One module per subcommand; each exposes `Args` (clap derive) and `run(Args)`.

pub mod alerts;
pub mod bench;
pub mod common;
pub mod doctor;
pub mod dump;
pub mod groups;
pub mod impact;
pub mod probe;
pub mod record;
pub mod replay;
pub mod report;
pub mod rollup;
pub mod serve;
pub mod share;
pub mod snapshot;
pub mod statsd;
pub mod strace;
pub mod top;
pub mod tree;
