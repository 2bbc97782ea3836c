//! Typed errors that carry the path they came from, and a small fixed set of reason codes so
//! callers can count failures without matching on strings.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a read failed, as a small fixed set that samplers count and report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The file or process is gone (ENOENT, ESRCH): usually a process that exited mid-read.
    Gone,
    /// Not permitted (EACCES, EPERM): running unprivileged, or another user's process.
    Permission,
    /// The bytes did not have the expected shape.
    Parse,
    /// Any other I/O error.
    Io,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 4] = [Self::Gone, Self::Permission, Self::Parse, Self::Io];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Permission => "permission",
            Self::Parse => "parse",
            Self::Io => "io",
        }
    }

    /// Classifies an I/O error by errno.
    pub fn of_io(err: &io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => Self::Gone,
            Some(libc::EACCES) | Some(libc::EPERM) => Self::Permission,
            _ => match err.kind() {
                io::ErrorKind::NotFound => Self::Gone,
                io::ErrorKind::PermissionDenied => Self::Permission,
                _ => Self::Io,
            },
        }
    }
}

/// A failed read or parse of one file.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    pub kind: ErrorKind,
    pub path: PathBuf,
    #[source]
    pub source: Option<io::Error>,
    pub detail: Option<&'static str>,
}

impl Error {
    pub fn io(path: PathBuf, source: io::Error) -> Self {
        Self { kind: ErrorKind::of_io(&source), path, source: Some(source), detail: None }
    }

    /// A file under a root that [`crate::regular`] refused (not a regular file): an I/O error
    /// whose message says what the file was.
    pub fn refused(path: PathBuf, why: &crate::regular::FileError) -> Self {
        Self { kind: ErrorKind::Io, path, source: Some(io::Error::other(why.cause())), detail: None }
    }

    /// A file longer than the read's bound of `most` bytes.
    pub fn too_big(path: PathBuf, most: usize) -> Self {
        let why = crate::regular::FileError::TooBig { path: PathBuf::new(), most: most as u64 };
        Self::refused(path, &why)
    }

    pub fn parse(path: PathBuf, detail: &'static str) -> Self {
        Self { kind: ErrorKind::Parse, path, source: None, detail: Some(detail) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.source, self.detail) {
            (Some(source), _) => write!(f, "cannot read {}: {source}", self.path.display()),
            (None, Some(detail)) => write!(f, "cannot parse {}: {detail}", self.path.display()),
            (None, None) => write!(f, "cannot read {}", self.path.display()),
        }
    }
}
