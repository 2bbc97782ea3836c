//! proctor's agent: the one sampling loop, and everything it keeps.
//!
//! [`Agent`] samples on its own thread on a drift-corrected schedule and publishes an immutable
//! [`Snapshot`] per cycle ([`snapshot`]); [`history`] keeps a bounded ring of points derived from
//! them; [`record`] hands every sample to a store writer on a thread of its own (bounded queue,
//! drops counted, never waited for); [`disk`] reads a filesystem's usage off the
//! sampling thread. Every surface — HTTP (`proctor-http`), the Python extension, `proctor
//! record`, `snapshot` and the TUI — sits on this crate and reads snapshots; none calls the
//! sampler on a schedule of its own.
//!
//! What it does not do: speak HTTP, name fields for the public (that is `proctor-vocab`),
//! decide where a store lives, or read one back (`proctor-stored`).

pub mod agent;
pub mod disk;
pub mod groups;
pub mod history;
pub mod record;
pub mod snapshot;

pub use agent::{Agent, AgentConfig, Shared};
pub use proctor_sampler::Reads;
pub use record::Recording;
pub use snapshot::{AgentSelf, HistorySize, RecordingStatus, Snapshot};
