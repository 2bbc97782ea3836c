//! ARCHITECTURE.md's invariants that a test can hold, read from the sources themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A source file's code without comments and without its `#[cfg(test)]` part (tests may use
/// any module; a doc link is not a dependency).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The modules of one crate (`cmd::probe` for `src/cmd/probe.rs`) and, for each, the modules of
/// the same crate it names (`crate::x::…`, or `super::x` from a nested one).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] || parts.is_empty() {
            continue;
        }
        modules.insert(parts.join("::"), f.clone());
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = code(file);
        let mut uses = BTreeSet::new();
        let parent = module.rsplit_once("::").map(|(p, _)| p.to_string());
        for (prefix, base) in [("crate::", None), ("super::", parent.as_deref())] {
            for (at, _) in text.match_indices(prefix) {
                let path: String = text[at + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                // The longest prefix of the path that is a module of this crate.
                let found = (1..=segments.len()).rev().find_map(|k| {
                    let tail = segments[..k].join("::");
                    let candidate = match (prefix, base) {
                        ("super::", Some(b)) => format!("{b}::{tail}"),
                        ("super::", None) => return None,
                        _ => tail,
                    };
                    names.contains(&candidate).then_some(candidate)
                });
                if let Some(m) = found.filter(|m| m != module && !module.starts_with(&format!("{m}::"))) {
                    uses.insert(m);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A circle of modules in `graph`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            return Some(path[at..].to_vec());
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let mut crates = 0;
    for entry in std::fs::read_dir(crates_dir()).expect("crates/").flatten() {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let graph = module_graph(&src);
        if let Some(c) = circle(&graph) {
            panic!("{}: the modules {} use each other in a circle", entry.file_name().to_string_lossy(), c.join(" → "));
        }
    }
    assert!(crates >= 20, "found {crates} crates");
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("cmd")).expect("mkdir");
    std::fs::write(src.join("a.rs"), "use crate::b::Thing;\n// crate::c is only a comment\n").expect("write");
    std::fs::write(src.join("b.rs"), "fn f() { crate::cmd::probe::go() }\n").expect("write");
    std::fs::write(src.join("c.rs"), "use crate::a;\n").expect("write");
    std::fs::write(src.join("cmd/probe.rs"), "use super::super::x;\nfn g() { crate::a::h() }\n").expect("write");
    let graph = module_graph(src);
    assert_eq!(circle(&graph), Some(vec!["a".into(), "b".into(), "cmd::probe".into()]));
    std::fs::write(src.join("cmd/probe.rs"), "fn g() {}\n").expect("write");
    assert_eq!(circle(&module_graph(src)), None);
}

/// The calls that open a connection to somewhere else (a listening socket, `bind`, is not one).
const OPENERS: [&str; 5] =
    ["TcpStream::connect", "UdpSocket::connect", ".connect(", ".send_to(", "UnixStream::connect"];

/// The files that hold `OPENERS` in code (tests and comments aside), as `crate/src/path`.
fn openers_in_code() -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).expect("crates/").flatten() {
        let src = entry.path().join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let text = code(&f);
            if OPENERS.iter().any(|o| text.contains(o)) {
                let rel = f.strip_prefix(crates_dir()).expect("under crates/").to_string_lossy().into_owned();
                found.push(rel);
            }
        }
    }
    found.sort();
    found
}

/// Only the one outgoing client opens connections, and the statsd Graphite backend (a plain
/// TCP line protocol of its own); everything else that talks to another machine (alert
/// receivers, remote write, `top --connect`, `alerts status`/`silence`, the prober) goes through
/// `proctor-client`.
#[test]
fn only_the_client_and_graphite_open_connections() {
    let found = openers_in_code();
    assert_eq!(
        found,
        ["proctor-client/src/client.rs", "proctor-statsd/src/graphite.rs"],
        "files that open connections"
    );
}

/// No subcommand's module uses another's (`cmd/common.rs` is plumbing, not a command): what two
/// commands share lives beside them (`daemon`, `text`, `output`, …).
#[test]
fn no_command_imports_another() {
    let src = crates_dir().join("proctor-cli/src");
    let graph = module_graph(&src);
    let commands: Vec<&String> = graph.keys().filter(|m| m.starts_with("cmd::") && *m != "cmd::common").collect();
    assert!(commands.len() >= 15, "{commands:?}");
    for command in commands {
        let others: Vec<&String> =
            graph[command].iter().filter(|m| m.starts_with("cmd::") && *m != "cmd::common").collect();
        assert!(others.is_empty(), "{command} uses {others:?}");
    }
}
