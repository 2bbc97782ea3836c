//! A token or password kept in a file: every `--token-file`, `--bearer-token-file` and remote
//! write's secrets are read here and nowhere else.

use std::io::Read;
use std::path::Path;

/// The most a secret file may hold: a path that names something endless (a device, a pipe) is
/// refused rather than read forever.
pub const MOST_BYTES: u64 = 64 << 10;

/// The file's one line, surrounding whitespace trimmed; `what` names the flag in the error.
pub fn read(path: &Path, what: &str) -> Result<String, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MOST_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    if text.len() as u64 > MOST_BYTES {
        return Err(format!("{what} {}: over {} KiB, not a token", path.display(), MOST_BYTES >> 10));
    }
    let text = text.trim();
    if text.is_empty() || text.chars().any(char::is_control) {
        return Err(format!(
            "{what} {}: the file holds no token on one line (empty, or a control character inside)",
            path.display()
        ));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_one_trimmed_line_and_an_endless_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("proctor-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("token");
        std::fs::write(&file, "  s3cret \n").expect("write");
        assert_eq!(read(&file, "--token-file"), Ok("s3cret".to_string()));
        std::fs::write(&file, "a\nb\n").expect("write");
        assert!(read(&file, "--token-file").is_err_and(|e| e.contains("no token on one line")));
        assert!(read(Path::new("/dev/zero"), "--token-file").is_err_and(|e| e.contains("over 64 KiB")));
        assert!(read(&dir.join("missing"), "--token-file").is_err_and(|e| e.starts_with("cannot read --token-file")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
