//! Text printers more than one command uses: each command's own printing stays in its module;
//! what `replay` prints as `snapshot`, `tree` and `groups` do is here, so no command imports
//! another.

pub mod groups;
pub mod snapshot;
pub mod tree;
