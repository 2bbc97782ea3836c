//! Opening inputs: files, `-ff` directories, stdin, gzip. The only file-system code here.
//!
//! It decides nothing about content beyond the gzip magic number; parsing is elsewhere.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

/// Read buffer size: big enough that almost every line is parsed in place, small enough
/// to stay far inside the memory budget.
pub const BUFFER_BYTES: usize = 1 << 20;

/// One log to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// `None` is standard input.
    pub path: Option<PathBuf>,
    /// For `-ff` output (`trace.1234`): the pid of lines that carry none.
    pub pid: Option<u32>,
}

impl Input {
    pub fn name(&self) -> String {
        self.path.as_ref().map_or_else(|| "-".to_string(), |path| path.display().to_string())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot open {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot list directory {path}")]
    ReadDir { path: PathBuf, source: io::Error },
    #[error("directory {path} has no files")]
    EmptyDir { path: PathBuf },
}

/// Expands the command line: `-` is stdin, a directory is every regular file in it (sorted
/// by name, as `strace -ff -o DIR/trace` leaves them), anything else a file.
pub fn expand(arguments: &[PathBuf]) -> Result<Vec<Input>, InputError> {
    let mut inputs = Vec::new();
    for argument in arguments {
        if argument.as_os_str() == "-" {
            inputs.push(Input { path: None, pid: None });
        } else if argument.is_dir() {
            let listing =
                std::fs::read_dir(argument).map_err(|source| InputError::ReadDir { path: argument.clone(), source })?;
            let mut files: Vec<PathBuf> =
                listing.filter_map(Result::ok).map(|entry| entry.path()).filter(|path| path.is_file()).collect();
            if files.is_empty() {
                return Err(InputError::EmptyDir { path: argument.clone() });
            }
            files.sort();
            inputs.extend(files.into_iter().map(|path| Input { pid: pid_suffix(&path), path: Some(path) }));
        } else {
            inputs.push(Input { pid: pid_suffix(argument), path: Some(argument.clone()) });
        }
    }
    Ok(inputs)
}

/// `trace.1234` or `trace.1234.gz` → 1234: the name `strace -ff -o trace` gives each pid.
pub fn pid_suffix(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let name = name.strip_suffix(".gz").unwrap_or(name);
    let (_, suffix) = name.rsplit_once('.')?;
    if suffix.is_empty() || !suffix.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    suffix.parse().ok()
}

/// Reports how many raw bytes have been read so far (for a progress indicator).
pub type Progress = Box<dyn FnMut(u64)>;

struct Counting<R> {
    inner: R,
    read: u64,
    progress: Option<Progress>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.read += count as u64;
        if let Some(progress) = self.progress.as_mut() {
            progress(self.read);
        }
        Ok(count)
    }
}

/// Opens an input for reading, decompressing gzip (detected by its magic bytes, not the
/// name). `progress` is called with the raw bytes read after every read.
pub fn open(input: &Input, progress: Option<Progress>) -> Result<Box<dyn BufRead>, InputError> {
    let raw: Box<dyn Read> = match &input.path {
        None => Box::new(io::stdin().lock()),
        Some(path) => Box::new(File::open(path).map_err(|source| InputError::Open { path: path.clone(), source })?),
    };
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, Counting { inner: raw, read: 0, progress });
    let is_gzip = match reader.fill_buf() {
        Ok(head) => head.starts_with(&[0x1f, 0x8b]),
        // The error will come back on the first real read, with the analyzer's context.
        Err(_) => false,
    };
    if is_gzip {
        return Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, MultiGzDecoder::new(reader))));
    }
    Ok(Box::new(reader))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_suffixes() {
        assert_eq!(pid_suffix(Path::new("/tmp/x/trace.1234")), Some(1234));
        assert_eq!(pid_suffix(Path::new("trace.77.gz")), Some(77));
        assert_eq!(pid_suffix(Path::new("trace.log")), None);
        assert_eq!(pid_suffix(Path::new("trace")), None);
        assert_eq!(pid_suffix(Path::new("trace.99999999999")), None);
    }
}
