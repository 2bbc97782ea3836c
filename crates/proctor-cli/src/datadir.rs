//! The data directory: where `serve` records by default, creating it, and what opening a store
//! found. Every command that writes or reads a data directory comes here, so the default is the
//! same for all of them.
//!
//! What this module does not do: open a store for reading, or keep one open (the commands own
//! their readers and writers).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use proctor_store::{OpenReport, ReadReport};

/// `$XDG_STATE_HOME/proctor`, else `$HOME/.local/state/proctor` (the XDG base directory rule:
/// a relative or empty `XDG_STATE_HOME` is ignored).
pub fn default_dir(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Result<PathBuf, String> {
    if let Some(state) = xdg_state_home.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(state.join("proctor"));
    }
    match home.map(PathBuf::from).filter(|p| p.is_absolute()) {
        Some(home) => Ok(home.join(".local/state/proctor")),
        None => {
            Err("no data directory: neither XDG_STATE_HOME nor HOME is set to an absolute path (give --data-dir)"
                .into())
        }
    }
}

/// The default data directory of this process's environment.
pub fn default_dir_here() -> Result<PathBuf, String> {
    default_dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

/// The default for every `--dir`/`--data-dir` flag: [`default_dir_here`], or an empty path when
/// neither variable is set (which [`given_or_default`] turns into a clear error).
pub fn default_for_flags() -> PathBuf {
    default_dir_here().unwrap_or_default()
}

/// `dir` unless it is the empty path [`default_for_flags`] stands in with when there is no
/// default.
pub fn given_or_default(dir: &Path) -> anyhow::Result<&Path> {
    if dir.as_os_str().is_empty() {
        anyhow::bail!("no data directory: neither XDG_STATE_HOME nor HOME is set to an absolute path (give --dir)");
    }
    Ok(dir)
}

/// `dir` for a command that reads a store (`replay`, `dump`, `report`): it must exist.
pub fn for_reading(dir: &Path) -> anyhow::Result<&Path> {
    let dir = given_or_default(dir)?;
    if !dir.exists() {
        anyhow::bail!(
            "no data directory at {}: nothing was recorded there (`proctor serve` and `proctor record` record into it), or give --dir",
            dir.display()
        );
    }
    Ok(dir)
}

/// Creates `dir` for `proctor record` if it is missing: the default directory with its parents
/// (as `proctor serve` does), a directory given on the command line only if its parent exists
/// (a typo in a parent should not quietly make a tree of directories). Mode 0700.
pub fn create_for_recording(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = given_or_default(dir)?;
    if dir.is_dir() {
        return Ok(());
    }
    if default_dir_here().is_ok_and(|default| default == dir) {
        return create_private(dir).map_err(anyhow::Error::msg);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "cannot create data directory {}: its parent {} does not exist",
            dir.display(),
            dir.parent().map_or_else(|| "-".into(), |p| p.display().to_string())
        ),
        Err(e) => anyhow::bail!("cannot create data directory {}: {e}", dir.display()),
    }
}

/// The default data directory, created (mode 0700) if missing.
pub fn default_dir_created() -> Result<PathBuf, (Option<PathBuf>, String)> {
    let dir = default_dir_here().map_err(|e| (None, e))?;
    create_private(&dir).map_err(|e| (Some(dir.clone()), e))?;
    Ok(dir)
}

/// Creates `dir` and any missing parents with mode 0700 (samples name every process and its
/// command line, which other users need not read). An existing directory is left as it is.
pub fn create_private(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))
}

/// What opening the store found and did, on stderr, each line prefixed with `who`.
pub fn report_open(who: &str, dir: &Path, report: &OpenReport) {
    for repair in &report.repaired {
        eprintln!(
            "{who}: repaired {}: {}; kept {} bytes, dropped {}",
            repair.path.display(),
            repair.reason,
            repair.kept_bytes,
            repair.dropped_bytes
        );
    }
    for aside in &report.set_aside {
        eprintln!("{who}: set aside {} as {}: {}", aside.path.display(), aside.moved_to.display(), aside.reason);
    }
    for (path, why) in &report.skipped {
        eprintln!("{who}: skipped {}: {why}", path.display());
    }
    if !report.removed_by_retention.is_empty() {
        eprintln!("{who}: retention removed {} old segments", report.removed_by_retention.len());
    }
    eprintln!(
        "{who}: recording into {} ({} segments, {} frames checked on open)",
        dir.display(),
        report.segments,
        report.frames_checked
    );
}

/// What reading a store could not read, on stderr, each line prefixed with `who`: every
/// skipped file, damaged stretch and bad frame (the store's own wording), then the loss in
/// samples. Nothing when everything was read.
pub fn report_read(who: &str, report: &ReadReport) {
    for line in report.problems() {
        eprintln!("{who}: {line}");
    }
    if let Some(summary) = report.summary() {
        eprintln!("{who}: {summary}");
    }
}

#[cfg(test)]
mod tests {
    use super::default_dir;
    use std::path::PathBuf;

    #[test]
    fn the_default_data_dir_follows_the_xdg_state_rule() {
        let check = |xdg: Option<&str>, home: Option<&str>, expected: Option<&str>| {
            let got = default_dir(xdg.map(Into::into), home.map(Into::into)).ok();
            assert_eq!(got, expected.map(PathBuf::from), "XDG_STATE_HOME={xdg:?} HOME={home:?}");
        };
        check(Some("/s"), Some("/h"), Some("/s/proctor"));
        check(None, Some("/h"), Some("/h/.local/state/proctor"));
        // The spec: a relative (or empty) XDG_STATE_HOME is invalid and ignored.
        check(Some("rel"), Some("/h"), Some("/h/.local/state/proctor"));
        check(Some(""), Some("/h"), Some("/h/.local/state/proctor"));
        check(None, None, None);
        check(None, Some(""), None);
    }
}
