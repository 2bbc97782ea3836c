//! Embeds every file under `web/static/` into the binary, so `cargo build` needs no Node and
//! the agent serves its dashboard with no files beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, base, out);
        } else if let Ok(rel) = path.strip_prefix(base) {
            println!("cargo:rerun-if-changed={}", path.display());
            out.push((rel.to_string_lossy().replace('\\', "/"), path.clone()));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let web = manifest.join("../../web/static");
    let mut files = Vec::new();
    walk(&web, &web, &mut files);
    let mut code = String::from(
        "/// (path under web/static, contents), sorted by path.\npub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, path) in &files {
        let abs = path.canonicalize().expect("an embedded file can be resolved");
        let _ = writeln!(code, "    ({rel:?}, include_bytes!({:?})),", abs.display().to_string());
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("assets.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
