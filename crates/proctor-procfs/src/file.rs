//! File access: a root directory for every path, and kept-open files re-read with `pread`.
//!
//! Most of the cost of reading a small /proc file is the kernel's: path lookup on `open`,
//! formatting on `read`, teardown on `close`. Keeping the fd open and re-reading it with `pread`
//! at offset 0 skips two of the three syscalls (measured here: `stat` 0.84 µs with a kept fd vs
//! 1.84 µs with open+read+close). A kept fd on `/proc/PID/…` stays bound to the task it was
//! opened for: once that task exits, reads fail with ESRCH even if the pid is reused.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The directory that stands for `/`: `/` itself, a host's `/` mounted elsewhere
/// (`--host-root /host` in a container), or a captured tree in tests.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
    kind: RootKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootKind {
    /// `/`: this system as this process sees it.
    Real,
    /// A live host's `/` mounted at `dir`: its `/proc` and `/sys` are live, but "self" paths
    /// under it name this process only where it shares the host's pid namespace, and its
    /// `/proc/self/mountinfo` is this process's mount namespace, not the host's.
    Host,
    /// Files captured from a system (tests): nothing under it is live.
    Captured,
}

impl Default for Root {
    fn default() -> Self {
        Self { dir: PathBuf::from("/"), kind: RootKind::Real }
    }
}

impl Root {
    /// A captured tree (or `/`, which is the real system whichever constructor names it).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let kind = if dir == Path::new("/") { RootKind::Real } else { RootKind::Captured };
        Self { dir, kind }
    }

    /// A live host's `/` mounted at `dir` (node_exporter's `--path.rootfs`).
    pub fn host(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let kind = if dir == Path::new("/") { RootKind::Real } else { RootKind::Host };
        Self { dir, kind }
    }

    /// The live system: `/`, or a host's `/` mounted elsewhere (syscalls and kept fds apply).
    pub fn is_real(&self) -> bool {
        self.kind != RootKind::Captured
    }

    /// A host's `/` mounted elsewhere.
    pub fn is_host(&self) -> bool {
        self.kind == RootKind::Host
    }

    /// The directory that stands for `/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the cgroup mounts are listed, as an absolute system path. A host root reads its
    /// init's mount table, whose mount points are the host's paths (this process's own table,
    /// in a container, names the container's mounts); `/` and captured trees read `self`'s.
    pub fn mountinfo(&self) -> &'static str {
        if self.is_host() {
            "/proc/1/mountinfo"
        } else {
            "/proc/self/mountinfo"
        }
    }

    /// Where the host's network counters are: `/proc/net` is the reader's network namespace,
    /// so a host root reads its init's (`/proc/1/net/dev`).
    pub fn net_dev(&self) -> &'static str {
        if self.is_host() {
            "/proc/1/net/dev"
        } else {
            "/proc/net/dev"
        }
    }

    /// Maps an absolute system path (`/proc/stat`) into this root.
    pub fn path(&self, absolute: impl AsRef<Path>) -> PathBuf {
        let absolute = absolute.as_ref();
        let relative = absolute.strip_prefix("/").unwrap_or(absolute);
        self.dir.join(relative)
    }

    /// Reads a whole file into `buf` (cleared first); one open, reads until EOF, one close.
    pub fn read_into(&self, absolute: impl AsRef<Path>, buf: &mut Vec<u8>) -> Result<(), Error> {
        let path = self.path(absolute);
        let file = File::open(&path).map_err(|e| Error::io(path.clone(), e))?;
        read_all_at(&file, buf).map_err(|e| Error::io(path, e))
    }

    /// Reads a whole file as a new byte vector.
    pub fn read(&self, absolute: impl AsRef<Path>) -> Result<Vec<u8>, Error> {
        let mut buf = Vec::new();
        self.read_into(absolute, &mut buf)?;
        Ok(buf)
    }
}

/// Reads from offset 0 to EOF with `pread`, growing `buf` as needed and reusing its capacity.
fn read_all_at(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    if buf.capacity() < 512 {
        buf.reserve(512);
    }
    loop {
        let filled = buf.len();
        let spare = buf.capacity() - filled;
        if spare == 0 {
            buf.reserve(buf.capacity());
            continue;
        }
        buf.resize(buf.capacity(), 0);
        let n = match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(filled);
                continue;
            }
            Err(e) => {
                buf.truncate(filled);
                return Err(e);
            }
        };
        buf.truncate(filled + n);
        // /proc files are generated in one go for small sizes; a short read that did not fill
        // the buffer is the end. Only a full buffer needs another round to find EOF.
        if n == 0 || filled + n < buf.capacity() {
            return Ok(());
        }
    }
}

/// A file kept open and re-read from offset 0 on every sample, into a buffer it owns
/// ([`ProcFile::read`]) or one the caller lends ([`ProcFile::read_into`]). The own buffer is
/// allocated on the first `read` and zero-filled once, then only overwritten: re-initialising
/// it before every `pread` would cost more than parsing a small file. A table of many files
/// (one per process) lends one shared buffer instead, so the kernel copies every file into the
/// same few cache lines rather than into a cold kilobyte per file.
#[derive(Debug)]
pub struct ProcFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    len: usize,
}

impl ProcFile {
    pub fn open(path: PathBuf) -> Result<Self, Error> {
        match File::open(&path) {
            Ok(file) => Ok(Self { path, file, buf: Vec::new(), len: 0 }),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Re-reads the file with `pread` at offset 0 into its own buffer and returns its bytes.
    pub fn read(&mut self) -> Result<&[u8], Error> {
        if self.buf.is_empty() {
            self.buf.resize(1024, 0);
        }
        self.len = pread_whole(&self.file, &mut self.buf).map_err(|e| Error::io(self.path.clone(), e))?;
        Ok(&self.buf[..self.len])
    }

    /// Re-reads the file with `pread` at offset 0 into `buf`, which is grown (zero-filled) when
    /// the file does not fit, and returns the file's bytes. `buf`'s length is only ever raised,
    /// so a buffer shared by many files settles at the largest of them.
    pub fn read_into<'b>(&self, buf: &'b mut Vec<u8>) -> Result<&'b [u8], Error> {
        if buf.is_empty() {
            buf.resize(1024, 0);
        }
        let len = pread_whole(&self.file, buf).map_err(|e| Error::io(self.path.clone(), e))?;
        Ok(&buf[..len])
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `pread`s from offset 0 until a short read, doubling `buf` (zero-filled) while the file fills
/// it; returns the file's length.
fn pread_whole(file: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut filled = 0;
    loop {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(n) => {
                filled += n;
                // A short read is the end (see `read_all_at`); a full buffer may not be.
                if n == 0 || filled < buf.len() {
                    return Ok(filled);
                }
                let grown = buf.len() * 2;
                buf.resize(grown, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_root_reads_the_hosts_mounts_and_network_under_its_directory() {
        let host = Root::host("/host");
        assert!(host.is_real() && host.is_host());
        assert_eq!(host.path(host.mountinfo()), PathBuf::from("/host/proc/1/mountinfo"));
        assert_eq!(host.path(host.net_dev()), PathBuf::from("/host/proc/1/net/dev"));
        assert_eq!(host.path("/sys/fs/cgroup/memory/a"), PathBuf::from("/host/sys/fs/cgroup/memory/a"));
        let captured = Root::new("/tmp/tree");
        assert!(!captured.is_real() && !captured.is_host());
        assert_eq!(captured.mountinfo(), "/proc/self/mountinfo");
        assert_eq!(captured.net_dev(), "/proc/net/dev");
        // `/` is the real system whichever constructor names it.
        for root in [Root::host("/"), Root::new("/"), Root::default()] {
            assert!(root.is_real() && !root.is_host());
            assert_eq!(root.mountinfo(), "/proc/self/mountinfo");
        }
    }

    #[test]
    fn rereads_grow_and_shrink() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'a'; 5000]).expect("write");
        let mut f = ProcFile::open(path.clone()).expect("open");
        assert_eq!(f.read().expect("read").len(), 5000);
        std::fs::write(&path, b"short\n").expect("write");
        assert_eq!(f.read().expect("read"), b"short\n");
        let mut buf = Vec::new();
        Root::new(dir.path()).read_into("/f", &mut buf).expect("read");
        assert_eq!(buf, b"short\n");
        // A lent buffer grows to fit and then serves shorter files without shrinking.
        let mut shared = Vec::new();
        std::fs::write(&path, vec![b'b'; 3000]).expect("write");
        assert_eq!(f.read_into(&mut shared).expect("read"), &vec![b'b'; 3000][..]);
        let grown = shared.len();
        assert!(grown >= 3000);
        std::fs::write(&path, b"tiny\n").expect("write");
        assert_eq!(f.read_into(&mut shared).expect("read"), b"tiny\n");
        assert_eq!(shared.len(), grown);
    }
}
