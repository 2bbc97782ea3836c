//! Files that must be regular files: opened without waiting, checked on the open file, read
//! within a bound. Every file proctor keeps in its data directory (the store's files, the alerts
//! state and event log, remote-write cursors) is opened here, and [`crate::Root`] applies the
//! same check to every file under a root other than `/` (`--host-root`, a captured tree).
//!
//! Those are ordinary files that anybody who can write there can replace. A FIFO made `open`
//! wait for a writer that never came (with the signal-handling thread waiting behind it), and
//! `/dev/zero` or a 4 GB file made a read grow its buffer until the allocation aborted. So a
//! file is opened with `O_NONBLOCK` (a FIFO's open returns at once, or fails with `ENXIO` for
//! writing), `fstat`ed on the open fd (a file swapped after a `stat` is caught too) and refused
//! unless it is a regular file; reads stop one byte past a bound the caller gives.
//!
//! Links are followed: a data directory's file may be a link to a regular file elsewhere (the
//! store has always taken a link to a segment as a segment), and a host's `/sys` is links. What
//! the link names must still be a regular file.
//!
//! What this module does not do: decide what a refused file costs (the caller counts it,
//! reports it or starts afresh), or read the kernel's own `/proc` under `/`, whose files are
//! regular and bounded by the kernel (the sampler's per-process opens stay one syscall).

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not opened or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A directory, FIFO, socket or device where a regular file should be.
    #[error("{} is {what}, not a regular file", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    /// Longer than the caller's bound; nothing past the bound was read.
    #[error("{} is over {}: more than proctor reads of it", path.display(), bytes_text(*most))]
    TooBig { path: PathBuf, most: u64 },
    /// `action` is what was tried: "cannot open", "cannot stat", "cannot read".
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl FileError {
    fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        FileError::Io { action, path: path.to_owned(), source }
    }

    /// The file is not there (a first start: no state, no cursor yet).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// What went wrong, without the path: "a FIFO, not a regular file", "cannot open: …".
    pub fn cause(&self) -> String {
        match self {
            FileError::NotRegular { what, .. } => format!("{what}, not a regular file"),
            FileError::TooBig { most, .. } => format!("over {}: more than proctor reads of it", bytes_text(*most)),
            FileError::Io { action, source, .. } => format!("{action}: {source}"),
        }
    }
}

/// "64 MiB", "4096 bytes".
pub(crate) fn bytes_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// "a directory", "a FIFO", … for messages.
pub fn file_kind(kind: &FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Refuses an open file that is not a regular file (one `fstat`).
pub fn check(file: &File, path: &Path) -> Result<(), FileError> {
    let meta = file.metadata().map_err(|e| FileError::io("cannot stat", path, e))?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(FileError::NotRegular { path: path.to_owned(), what: file_kind(&meta.file_type()) })
    }
}

/// Opens `path` with `options` without waiting, and only if it is a regular file.
///
/// A `stat` first, so that a device is never opened at all (opening one can do something:
/// a watchdog starts, a tape rewinds) and a FIFO opened to write is named as a FIFO rather than
/// failing with `ENXIO`; then `O_NONBLOCK | O_NOCTTY` on the open (a FIFO swapped in after the
/// `stat` opens at once, and a terminal never becomes ours) and [`check`] on the open fd. The
/// flag is cleared again: it means nothing to a regular file today, but the file's reads and
/// writes must not start meaning it.
pub fn open(path: &Path, options: &mut OpenOptions) -> Result<File, FileError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(FileError::NotRegular { path: path.to_owned(), what: file_kind(&meta.file_type()) })
        }
        _ => {}
    }
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FileError::io("cannot open", path, e))?;
    check(&file, path)?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on an fd this function owns; F_GETFL and F_SETFL take and return ints.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(FileError::io("cannot open", path, io::Error::last_os_error()));
    }
    Ok(file)
}

/// Writes `bytes` as `path`'s new content through `tmp` beside it, renamed in place: a crash
/// leaves the old content or the new, and a failed write (a full disk, a file size limit)
/// leaves `path` as it was and no `tmp` behind (a half-written one would be taken for the file
/// by a person, and stay). Only a regular file at `tmp` is removed: a FIFO or device there was
/// refused before it was opened and is left as it is.
pub fn replace(path: &Path, tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let written = open(tmp, OpenOptions::new().write(true).create(true).truncate(true))
        .map_err(io::Error::other)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_data()))
        .and_then(|()| std::fs::rename(tmp, path));
    if written.is_err() && std::fs::symlink_metadata(tmp).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::remove_file(tmp);
    }
    written
}

/// Opens `path` for reading (see [`open`]).
pub fn open_for_reading(path: &Path) -> Result<File, FileError> {
    open(path, OpenOptions::new().read(true))
}

/// Reads a whole regular file of at most `most` bytes (see [`open`]); a longer one is refused
/// after reading one byte past the bound, so no more than that is ever held.
pub fn read(path: &Path, most: u64) -> Result<Vec<u8>, FileError> {
    let file = open_for_reading(path)?;
    let mut bytes = Vec::new();
    file.take(most.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| FileError::io("cannot read", path, e))?;
    if bytes.len() as u64 > most {
        return Err(FileError::TooBig { path: path.to_owned(), most });
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text (a config or rules file): bytes that are not UTF-8 are an error
/// naming the file.
pub fn read_text(path: &Path, most: u64) -> Result<String, FileError> {
    String::from_utf8(read(path, most)?)
        .map_err(|_| FileError::io("cannot read", path, io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    }

    /// `replace` puts the new content in place, and when it fails leaves the old content and no
    /// `.tmp` behind; a FIFO at the `.tmp` is refused and left alone.
    #[test]
    fn a_failed_replace_leaves_the_old_file_and_no_tmp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, tmp) = (dir.path().join("state.json"), dir.path().join("state.json.tmp"));
        replace(&path, &tmp, b"old").expect("written");
        replace(&path, &tmp, b"new").expect("replaced");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert!(!tmp.exists());
        // The rename fails (a directory with something in it stands at the path): no `.tmp`.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir(&blocked).expect("mkdir");
        std::fs::write(blocked.join("x"), b"x").expect("write");
        let blocked_tmp = dir.path().join("blocked.tmp");
        assert!(replace(&blocked, &blocked_tmp, b"new").is_err());
        assert!(!blocked_tmp.exists(), "a failed replace left its .tmp");
        assert!(blocked.is_dir());
        // A FIFO at the `.tmp`: refused without waiting, and not removed.
        mkfifo(&tmp);
        let err = replace(&path, &tmp, b"newer").expect_err("a FIFO");
        assert!(err.to_string().contains("a FIFO"), "{err}");
        assert!(std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.file_type().is_fifo()));
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
    }

    /// A FIFO, a link to `/dev/zero` and a directory are refused by name, for reading and for
    /// appending, without waiting for a writer; a regular file through a link is read.
    #[test]
    fn only_regular_files_are_opened_and_none_waits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("state.json");
        mkfifo(&fifo);
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        for (path, what) in [(&fifo, "a FIFO"), (&zero, "a character device"), (&dir.path().to_owned(), "a directory")]
        {
            let e = read(path, 1024).expect_err("refused");
            assert!(matches!(&e, FileError::NotRegular { what: w, .. } if *w == what), "{e}");
            assert_eq!(e.to_string(), format!("{} is {what}, not a regular file", path.display()));
            let e = open(path, OpenOptions::new().create(true).append(true)).expect_err("refused");
            assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
        }
        let real = dir.path().join("real");
        std::fs::write(&real, b"{}").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(read(&link, 2).expect("a regular file through a link"), b"{}");
        assert!(read(&dir.path().join("missing"), 2).expect_err("missing").is_not_found());
    }

    /// A file past the bound is refused after one byte more than the bound, however long it is.
    #[test]
    fn a_read_stops_one_byte_past_its_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big");
        let file = File::create(&path).expect("create");
        // Sparse: 4 GiB on the books, nothing on the disk.
        file.set_len(4 << 30).expect("set_len");
        let e = read(&path, 1 << 20).expect_err("too big");
        assert!(matches!(e, FileError::TooBig { most: 1048576, .. }), "{e}");
        assert!(e.to_string().ends_with("is over 1 MiB: more than proctor reads of it"), "{e}");
        std::fs::write(&path, b"12345").expect("write");
        assert_eq!(read(&path, 5).expect("exactly the bound"), b"12345");
        assert!(matches!(read(&path, 4), Err(FileError::TooBig { most: 4, .. })));
    }
}
