//! `proctor replay` and `proctor dump` on a store that `proctor record` just wrote.

use std::path::Path;
use std::process::{Command, Output};

fn proctor(args: &[&str], dir: &Path) -> Output {
    super::proctor_command().args(args).arg("--dir").arg(dir).output().expect("run proctor")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

fn recorded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    ok(&proctor(&["record", "--interval", "50ms", "--count", "3"], dir.path()));
    dir
}

#[test]
fn replay_shows_the_snapshot_view_of_the_newest_sample_with_rates() {
    let dir = recorded();
    let text = ok(&proctor(&["replay", "--top", "3"], dir.path()));
    assert!(text.starts_with("sample     ") && text.contains("(seq 2), rates over the"), "{text}");
    assert!(text.contains("\ncpu        busy") && text.contains("COMMAND"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&proctor(&["replay", "--format", "json"], dir.path()))).expect("JSON");
    assert!(json["time_unix_ms"].as_u64().is_some());
    assert!(json["host"]["cpu"]["busy_percent"].as_f64().is_some(), "{json}");
    assert!(json["processes"]["top"].as_array().is_some_and(|p| !p.is_empty()));
}

#[test]
fn replay_of_a_range_prints_every_sample_and_before_the_store_is_an_error() {
    let dir = recorded();
    let lines = ok(&proctor(&["replay", "--from", "1 hour ago", "--format", "json"], dir.path()));
    let docs: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(docs.len(), 3);
    assert!(docs[0]["host"]["cpu"].is_null(), "the first sample of a run has no rates");
    assert!(docs[2]["host"]["cpu"]["busy_percent"].as_f64().is_some());
    let out = proctor(&["replay", "--at", "@1000"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no sample at or before 1970-01-01T00:16:40Z") && stderr.contains("holds samples from"),
        "{stderr}"
    );
}

#[test]
fn dump_selects_fields_filters_and_keeps_the_top_n() {
    let dir = recorded();
    let csv = ok(&proctor(
        &["dump", "process", "--fields", "time,pid,name,rss_bytes", "--top", "2", "--sort", "rss_bytes"],
        dir.path(),
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "time,pid,name,rss_bytes");
    assert_eq!(lines.len(), 1 + 3 * 2, "{csv}");
    // The recorder saw itself; other tests' proctor processes are told apart by the store path
    // in the command line (read by the cmdline worker, so not necessarily in the first sample).
    let needle = format!("cmdline~{}", dir.path().display());
    let json = ok(&proctor(
        &[
            "dump",
            "process",
            "--format",
            "json",
            "--fields",
            "pid,name,cmdline",
            "--filter",
            "name=proctor",
            "--filter",
            &needle,
        ],
        dir.path(),
    ));
    let rows: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert!(!rows.is_empty() && rows.len() <= 3, "{json}");
    assert!(rows.iter().all(|r| r["name"] == "proctor" && r["cmdline"][1] == "record"), "{json}");
    let host = ok(&proctor(
        &["dump", "host", "--format", "json", "--fields", "time,cpu.busy_percent,memory.used_bytes"],
        dir.path(),
    ));
    let rows: Vec<serde_json::Value> = host.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(rows.len(), 3);
    assert!(rows[0]["cpu.busy_percent"].is_null() && rows[2]["cpu.busy_percent"].as_f64().is_some(), "{host}");
    let out = proctor(&["dump", "process", "--fields", "pid,no_such_field"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no field \"no_such_field\""));
    // --top ranks by a number: a text field is refused, not sorted as zeros (issue 14 item 12).
    let out = proctor(&["dump", "process", "--top", "2", "--sort", "name"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sort name is not a number"), "{out:?}");
    // The load averages are three columns, one number each.
    let csv = ok(&proctor(&["dump", "host"], dir.path()));
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    assert!(header.windows(3).any(|w| w == ["load.avg1", "load.avg5", "load.avg15"]), "{header:?}");
    let at = header.iter().position(|h| *h == "load.avg1").expect("load.avg1");
    for row in csv.lines().skip(1) {
        assert!(row.split(',').nth(at).is_some_and(|v| v.parse::<f64>().is_ok()), "{row}");
    }
    // --fields list is exactly what dump can print: every listed field can be asked for.
    let listed = ok(&proctor(&["dump", "host", "--fields", "list"], dir.path()));
    let names: Vec<&str> = listed.lines().filter_map(|l| l.split('\t').next()).collect();
    assert!(names.len() > 40 && names.contains(&"memory.used_bytes"), "{listed}");
    ok(&proctor(&["dump", "host", "--fields", &names.join(",")], dir.path()));
}

/// A shell with two sleeping children, killed when dropped.
struct Family(std::process::Child);

impl Drop for Family {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn family() -> Family {
    let parent = Family(
        Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn sh"),
    );
    // Wait (bounded) until the shell has forked both children, so every sample has them.
    let pid = parent.0.id();
    let children = format!("/proc/{pid}/task/{pid}/children");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&children).map_or(0, |c| c.split_whitespace().count()) < 2 {
        assert!(std::time::Instant::now() < deadline, "sh did not fork its two children");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    parent
}

#[test]
fn replay_tree_shows_the_tree_view_of_stored_samples_with_rates_and_totals() {
    let parent = family();
    let pid = parent.0.id().to_string();
    let dir = recorded();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&proctor(&["replay", "--tree", "--pid", &pid, "--format", "json"], dir.path())))
            .expect("JSON");
    // The same document `proctor tree --format json` prints.
    let live: serde_json::Value = serde_json::from_slice(
        &super::proctor_command()
            .args(["tree", &pid, "--interval", "0", "--format", "json"])
            .output()
            .expect("tree")
            .stdout,
    )
    .expect("tree JSON");
    let keys = |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys(&v), keys(&live));
    assert_eq!(keys(&v["total"]), keys(&live["total"]));
    assert_eq!(v["root_pid"].as_u64().map(|p| p.to_string()), Some(pid.clone()));
    let rows = v["processes"].as_array().expect("processes");
    let shape: Vec<(u64, &str)> =
        rows.iter().map(|r| (r["depth"].as_u64().expect("depth"), r["name"].as_str().expect("name"))).collect();
    assert_eq!(shape, vec![(0, "sh"), (1, "sleep"), (1, "sleep")], "{v}");
    assert_eq!(v["total"]["processes"].as_u64(), Some(3));
    let rss: u64 = rows.iter().map(|r| r["rss_bytes"].as_u64().expect("rss")).sum();
    assert_eq!(v["total"]["rss_bytes"].as_u64(), Some(rss));
    // Rates come from the stored sample before the newest one.
    assert!(rows.iter().all(|r| r["cpu_percent"].as_f64().is_some()), "{v}");
    assert!(v["total"]["cpu_percent"].as_f64().is_some());
    assert!(v["cgroup"].is_null() && v["pss_read"].is_null());

    // A range: one document per sample, the first without rates (no sample before it).
    let lines =
        ok(&proctor(&["replay", "--tree", "--pid", &pid, "--from", "1 hour ago", "--format", "json"], dir.path()));
    let docs: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(docs.len(), 3);
    assert!(docs[0]["total"]["cpu_percent"].is_null() && docs[2]["total"]["cpu_percent"].as_f64().is_some());
    assert!(docs.iter().all(|d| d["total"]["processes"] == 3));

    let text = ok(&proctor(&["replay", "--tree", "--pid", &pid], dir.path()));
    assert!(text.starts_with("sample     ") && text.contains("rates over the"), "{text}");
    assert!(text.contains("COMMAND") && text.contains("\n  total ") && text.contains("3 processes"), "{text}");
    assert!(text.contains(" 1  sh -c") && text.contains(" 1    sleep 60"), "children indented under the shell: {text}");

    // A root that is in no stored sample is an error, not an empty view.
    let out = proctor(&["replay", "--tree", "--pid", "4000000000"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process with pid 4000000000 in the sample at"));
    let out = proctor(&["replay", "--tree", "--pid", "4000000000", "--from", "1 hour ago"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pid 4000000000 is in 0 of 3 samples read"));
    // --pid belongs to the tree view.
    assert_eq!(proctor(&["replay", "--pid", "1"], dir.path()).status.code(), Some(2));
}

/// Three `proctor record` runs of 3 samples: three segments, in time order.
fn three_segments() -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..3 {
        ok(&proctor(&["record", "--interval", "20ms", "--count", "3"], dir.path()));
    }
    let mut segments: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segments.sort();
    assert_eq!(segments.len(), 3);
    (dir, segments)
}

/// `proctor` run as `nobody` (when root) on `dir`, made readable to it: `--dir` appended.
fn unprivileged_on(args: &[&str], dir: &Path) -> Output {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = dir.to_str().expect("utf-8");
    super::unprivileged(&[args, &["--dir", dir]].concat())
}

/// Regression (issue 15 items 7 and 10): a segment `dump` and `replay` may not open made them
/// fail with no rows, with "data directory <the segment>: Permission denied (os error 13):
/// Permission denied (os error 13)". Now it is skipped, the rest is dumped, and stderr says
/// which file, why (the cause once), and about how many samples that was.
#[test]
fn an_unreadable_segment_is_skipped_and_said_and_the_rest_is_dumped() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, segments) = three_segments();
    for segment in &segments {
        std::fs::set_permissions(segment, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    std::fs::set_permissions(&segments[1], std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let out = unprivileged_on(&["dump", "host", "--fields", "time"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1 + 6, "{stderr}");
    let skipped =
        format!("proctor dump: skipped {}: cannot open: Permission denied (os error 13); its ", segments[1].display());
    assert!(stderr.contains(&skipped), "{stderr}");
    assert_eq!(stderr.matches("os error 13").count(), 1, "{stderr}");
    assert!(!stderr.contains("data directory"), "{stderr}");
    // About 3: a size over the mean frame size of what was read (a key frame is larger).
    let estimate = stderr.split("proctor dump: about ").nth(1).and_then(|s| s.split(' ').next()?.parse::<u64>().ok());
    assert!(estimate.is_some_and(|n| (1..=6).contains(&n)), "{stderr}");
    assert!(stderr.contains("in 1 skipped file"), "{stderr}");
    let out = unprivileged_on(&["replay", "--from", "1 hour ago", "--format", "json"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 6, "{stderr}");
    assert!(stderr.contains("proctor replay: skipped "), "{stderr}");

    // A data directory that cannot be listed is still an error, said once.
    let sealed = dir.path().join("sealed");
    std::fs::create_dir(&sealed).expect("mkdir");
    std::fs::set_permissions(&sealed, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let out = super::unprivileged(&["dump", "host", "--dir", sealed.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot dump: cannot list {}: Permission denied (os error 13)", sealed.display())),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error 13").count(), 1, "{stderr}");
}

/// Regression (issue 15 item 7): a directory named like a segment made `dump` and `replay`
/// fail; a segment with an overwritten magic (its samples) was dropped with exit 0 and no word.
/// Now the directory is skipped and said, and every sample of the damaged segment is dumped,
/// the damage said.
#[test]
fn a_directory_named_like_a_segment_and_a_bad_magic_are_said_and_read_around() {
    let (dir, segments) = three_segments();
    let mut bytes = std::fs::read(&segments[0]).expect("read");
    bytes[..8].copy_from_slice(b"garbage!");
    std::fs::write(&segments[0], &bytes).expect("write");
    let directory = dir.path().join("01800000000000000000.seg");
    std::fs::create_dir(&directory).expect("mkdir");
    let out = proctor(&["dump", "host", "--fields", "time"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1 + 9, "{stderr}");
    assert!(stderr.contains(&format!("proctor dump: skipped {}: a directory, not a segment file", directory.display())));
    assert!(
        stderr.contains(&format!(
            "proctor dump: {}: bad segment magic at offset 0: skipped 8 bytes (no sample lost)",
            segments[0].display()
        )),
        "{stderr}"
    );
    let out = proctor(&["replay"], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
