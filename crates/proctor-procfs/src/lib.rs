//! Readers for `/proc`, `/sys` and cgroup files: bytes in, raw typed structs out.
//!
//! Every parser is a pure function over a byte slice and is tested on bytes. Readers
//! ([`ProcFile`], [`Root`]) do the file access, with a configurable root directory so tests run
//! on fake trees. This crate deliberately computes no rates, reads no clock and starts no
//! threads: values are the kernel's cumulative counters, in the kernel's units, with the unit in
//! each field's name. A field the kernel does not have is `None`, not an error.

pub mod cgroup;
pub mod drm;
mod error;
mod file;
pub mod host;
pub mod pagemap;
mod parse;
pub mod power;
pub mod process;
pub mod regular;
pub mod smaps;
pub mod system;

pub use error::{Error, ErrorKind};
pub use file::{ProcFile, Root, MAX_READ_BYTES};
pub use parse::cpu_list;
