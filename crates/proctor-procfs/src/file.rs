//! File access: a root directory for every path, and kept-open files re-read with `pread`.
//!
//! Most of the cost of reading a small /proc file is the kernel's: path lookup on `open`,
//! formatting on `read`, teardown on `close`. Keeping the fd open and re-reading it with `pread`
//! at offset 0 skips two of the three syscalls (measured here: `stat` 0.84 µs with a kept fd vs
//! 1.84 µs with open+read+close). A kept fd on `/proc/PID/…` stays bound to the task it was
//! opened for: once that task exits, reads fail with ESRCH even if the pid is reused.
//!
//! Every read is bounded ([`MAX_READ_BYTES`] unless the caller gives another bound). Under `/`
//! a file is opened as it is: the kernel's `/proc` and `/sys` hold regular files, and the
//! sampler's per-process open stays one syscall. Under any other root (`--host-root`, a captured
//! tree) the files are ordinary ones a user may replace, so each is opened with `O_NONBLOCK`
//! and refused unless `fstat` says it is a regular file ([`crate::regular`]): one more syscall
//! per open there, none per re-read of a kept file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The most one read from a root takes, unless its caller says otherwise: far above any file
/// the kernel writes for proctor (a `/proc/stat` of thousands of CPUs, a mount table of
/// thousands of mounts are a few MiB), far below what would hurt. One byte more refuses the file.
pub const MAX_READ_BYTES: usize = 64 << 20;

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

    /// This process's pid as this root's `/proc` numbers it (its `self` link): under a host
    /// root, its pid in the host's pid namespace; `None` where the link does not say (a
    /// captured tree without it).
    pub fn self_pid(&self) -> Option<u32> {
        std::fs::read_link(self.path("/proc/self")).ok()?.to_str()?.parse().ok()
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

    /// Opens a file under this root for reading: under `/` a plain `open`; under any other
    /// root with `O_NONBLOCK` (a FIFO does not wait for a writer) and refused unless `fstat`
    /// says it is a regular file. The flag is left set there: it means nothing to a regular
    /// file's reads, and clearing it would cost two more syscalls per open.
    pub fn open(&self, absolute: impl AsRef<Path>) -> Result<File, Error> {
        self.open_path(&self.path(absolute))
    }

    fn open_path(&self, path: &Path) -> Result<File, Error> {
        if self.kind == RootKind::Real {
            return File::open(path).map_err(|e| Error::io(path.to_owned(), e));
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| Error::io(path.to_owned(), e))?;
        crate::regular::check(&file, path).map_err(|e| Error::refused(path.to_owned(), &e))?;
        Ok(file)
    }

    /// Opens a file under this root to keep and re-read (see [`Root::open`]).
    pub fn open_kept(&self, absolute: impl AsRef<Path>) -> Result<ProcFile, Error> {
        let path = self.path(absolute);
        let file = self.open_path(&path)?;
        Ok(ProcFile { path, file, buf: Vec::new(), len: 0 })
    }

    /// Reads a whole file into `buf` (cleared first); one open, reads until EOF, one close. A
    /// file over [`MAX_READ_BYTES`] is an error.
    pub fn read_into(&self, absolute: impl AsRef<Path>, buf: &mut Vec<u8>) -> Result<(), Error> {
        self.read_into_at_most(absolute, buf, MAX_READ_BYTES)
    }

    /// [`Root::read_into`] with a bound of `most` bytes.
    pub fn read_into_at_most(&self, absolute: impl AsRef<Path>, buf: &mut Vec<u8>, most: usize) -> Result<(), Error> {
        let path = self.path(absolute);
        let file = self.open_path(&path)?;
        match read_all_at(&file, buf, most) {
            Ok(()) => Ok(()),
            Err(ReadError::Io(e)) => Err(Error::io(path, e)),
            Err(ReadError::TooBig) => Err(Error::too_big(path, most)),
        }
    }

    /// Reads a whole file as a new byte vector.
    pub fn read(&self, absolute: impl AsRef<Path>) -> Result<Vec<u8>, Error> {
        let mut buf = Vec::new();
        self.read_into(absolute, &mut buf)?;
        Ok(buf)
    }
}

/// Why a bounded read failed.
enum ReadError {
    Io(io::Error),
    /// The file has more than the bound: one byte past it was read.
    TooBig,
}

/// Reads from offset 0 to EOF with `pread`, growing `buf` as needed and reusing its capacity,
/// up to one byte past `most` (then [`ReadError::TooBig`]; `buf` never grows past that byte).
fn read_all_at(file: &File, buf: &mut Vec<u8>, most: usize) -> Result<(), ReadError> {
    let limit = most.saturating_add(1);
    buf.clear();
    if buf.capacity() < 512 {
        buf.reserve(512.min(limit));
    }
    loop {
        let filled = buf.len();
        if filled >= limit {
            return Err(ReadError::TooBig);
        }
        let room = buf.capacity().min(limit);
        if room == filled {
            // Doubling, but not past the byte that says the file is over the bound.
            buf.reserve_exact(buf.capacity().min(limit - filled));
            continue;
        }
        buf.resize(room, 0);
        let n = match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(filled);
                continue;
            }
            Err(e) => {
                buf.truncate(filled);
                return Err(ReadError::Io(e));
            }
        };
        buf.truncate(filled + n);
        // Only a read of nothing is the end: a file the kernel writes a record at a time
        // (`maps`, `smaps`, `mountinfo`, `diskstats`) answers a read with one page of records
        // at most, short of a bigger buffer while more follow. One more `pread` per file.
        if n == 0 {
            return Ok(());
        }
    }
}

/// A short read of at most this many bytes is the end of a file: the kernel's record-at-a-time
/// files (seq_file) fill a page-sized buffer and stop early only where the next record does
/// not fit in what is left of it, so a stop this early needs a record over 2 KiB. The files kept
/// open and re-read every sample are one record (`stat`, `statm`, `status`, `io`, `/proc/stat`,
/// `meminfo`) or tables of short lines (`diskstats`, `net/dev`): they stay one `pread` while
/// they are this small, and a longer short read is read on until a read of nothing.
const SHORT_READ_ENDS: usize = 2048;

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
    /// Opens a file of the real `/` (proctor's own `/proc/self/…`); under a root, use
    /// [`Root::open_kept`], which checks what it opens.
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
        self.len = pread_whole(&self.file, &mut self.buf).map_err(|e| self.error(e))?;
        Ok(&self.buf[..self.len])
    }

    /// Re-reads the file with `pread` at offset 0 into `buf`, which is grown (zero-filled) when
    /// the file does not fit, and returns the file's bytes. `buf`'s length is only ever raised,
    /// so a buffer shared by many files settles at the largest of them.
    pub fn read_into<'b>(&self, buf: &'b mut Vec<u8>) -> Result<&'b [u8], Error> {
        if buf.is_empty() {
            buf.resize(1024, 0);
        }
        let len = pread_whole(&self.file, buf).map_err(|e| self.error(e))?;
        Ok(&buf[..len])
    }

    fn error(&self, e: ReadError) -> Error {
        match e {
            ReadError::Io(e) => Error::io(self.path.clone(), e),
            ReadError::TooBig => Error::too_big(self.path.clone(), MAX_READ_BYTES),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `pread`s from offset 0 until the end ([`SHORT_READ_ENDS`]), doubling `buf` (zero-filled)
/// while the file fills it; returns the file's length. A file longer than [`MAX_READ_BYTES`] is [`ReadError::TooBig`]
/// once one byte past it is read (`buf` grows to that byte at most). The check is arithmetic on
/// a length already at hand: a kept file's re-read stays one `pread`.
fn pread_whole(file: &File, buf: &mut Vec<u8>) -> Result<usize, ReadError> {
    const LIMIT: usize = MAX_READ_BYTES + 1;
    let mut filled = 0;
    loop {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(n) => {
                let asked = buf.len() - filled;
                filled += n;
                if n == 0 || (n < asked && n <= SHORT_READ_ENDS) {
                    return Ok(filled);
                }
                if filled >= LIMIT {
                    return Err(ReadError::TooBig);
                }
                if filled == buf.len() {
                    let grown = (buf.len() * 2).min(LIMIT);
                    buf.resize(grown, 0);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
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

    /// Under a root other than `/`, a FIFO is refused without waiting for a writer and a link
    /// to `/dev/zero` is refused unread, by every way of reading; a regular file through a
    /// link is read.
    #[test]
    fn a_root_reads_regular_files_only_and_never_waits() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc/7")).expect("mkdir");
        let fifo =
            std::ffi::CString::new(dir.path().join("proc/stat").into_os_string().into_encoded_bytes()).expect("path");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("proc/7/stat")).expect("symlink");
        std::fs::write(dir.path().join("proc/meminfo"), b"MemTotal: 1 kB\n").expect("write");
        std::os::unix::fs::symlink(dir.path().join("proc/meminfo"), dir.path().join("proc/7/statm")).expect("symlink");
        for root in [Root::new(dir.path()), Root::host(dir.path())] {
            for (file, what) in [("/proc/stat", "a FIFO"), ("/proc/7/stat", "a character device")] {
                let mut buf = Vec::new();
                let e = root.read_into(file, &mut buf).expect_err("refused");
                assert_eq!(
                    e.to_string(),
                    format!("cannot read {}: {what}, not a regular file", root.path(file).display())
                );
                assert_eq!(e.kind, crate::ErrorKind::Io);
                assert!(root.open_kept(file).is_err() && root.open(file).is_err());
            }
            assert_eq!(root.read("/proc/7/statm").expect("a regular file through a link"), b"MemTotal: 1 kB\n");
            assert_eq!(root.open_kept("/proc/7/statm").expect("kept").read().expect("read"), b"MemTotal: 1 kB\n");
        }
    }

    /// A file past the bound is an error once one byte past the bound is read, whether read
    /// whole or kept and re-read: a 4 GiB file never costs 4 GiB.
    #[test]
    fn reads_stop_one_byte_past_their_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big");
        // Sparse: 4 GiB on the books, nothing on the disk.
        File::create(&path).expect("create").set_len(4 << 30).expect("set_len");
        let root = Root::new(dir.path());
        let mut buf = Vec::new();
        let e = root.read_into_at_most("/big", &mut buf, 5000).expect_err("too big");
        assert_eq!(
            e.to_string(),
            format!("cannot read {}: over 5000 bytes: more than proctor reads of it", path.display())
        );
        assert!(buf.capacity() <= 5001 * 2, "{}", buf.capacity());
        let mut kept = root.open_kept("/big").expect("open");
        let e = kept.read().expect_err("too big");
        assert!(e.to_string().ends_with("over 64 MiB: more than proctor reads of it"), "{e}");
        assert!(kept.buf.len() == MAX_READ_BYTES + 1, "{}", kept.buf.len());
        std::fs::write(&path, vec![b'x'; 5000]).expect("write");
        root.read_into_at_most("/big", &mut buf, 5000).expect("exactly the bound");
        assert_eq!(buf.len(), 5000);
        assert_eq!(kept.read().expect("read").len(), 5000);
    }

    /// The kernel writes `smaps` a record (a mapping) at a time and answers each read with a
    /// page of records at most: a reader that took a short read for the end kept 12.7 of its
    /// 23.6 KB here. Read whole and kept, a sleeping child's `smaps` is all there, as a plain
    /// read to the end gives it.
    #[test]
    fn a_file_written_a_record_at_a_time_is_read_to_its_end() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let path = format!("/proc/{}/smaps", child.id());
        let root = Root::default();
        let (mut same, mut longest) = (false, 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !same && std::time::Instant::now() < deadline {
            // Until it has exec'd and mapped its libraries, and while its counters move, again.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let whole = std::fs::read(&path).expect("std read");
            longest = longest.max(whole.len());
            if whole.len() <= 8192 {
                continue;
            }
            let ours = root.read(&path).expect("read");
            let kept = root.open_kept(&path).expect("kept").read().expect("re-read").to_vec();
            same = ours == whole && kept == whole;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(longest > 8192, "smaps of sleep is {longest} bytes: too small to tell");
        assert!(same, "{path} read whole and kept differs from a read to the end");
    }
}
