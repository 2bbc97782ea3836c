//! `proctor groups` against real processes: a process-exporter rules file names a wrapper
//! script's group, its children follow it, a child with a rule of its own leaves it; `--check`
//! points at each mistake.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{json, proctor};

/// A script run in a process group of its own; dropping it ends the whole group (the script
/// and every child it started, which would otherwise outlive the test), by the group's id,
/// which is the pid this test started.
struct Family(std::process::Child);

impl Family {
    fn start(script: &std::path::Path) -> Family {
        use std::os::unix::process::CommandExt;
        Family(Command::new("sh").arg(script).stdout(Stdio::null()).process_group(0).spawn().expect("sh"))
    }
}

impl Drop for Family {
    fn drop(&mut self) {
        // SAFETY: SIGKILL to the process group led by the child this test started.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Whether `proctor doctor` says the BPF process events work here; a SKIP line for `what` when
/// not.
fn events_here(what: &str) -> bool {
    let doctor = String::from_utf8_lossy(&proctor(&["doctor"]).stdout).into_owned();
    let events = doctor.lines().find(|l| l.starts_with("process events:")).unwrap_or("process events: (no line)");
    let here = events.contains("every exec and process exit");
    if !here {
        eprintln!("SKIP: {what}: {events}");
    }
    here
}

/// A wrapper script whose children burn ~0.1 s of CPU each and exit, one after another, for at
/// most 30 s (at any sample most of the CPU was used by children no sample saw), and a rules
/// file naming its group `wrapper`.
fn short_children(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let script = dir.join(name);
    std::fs::write(
        &script,
        "end=$(( $(date +%s) + 30 ))\nwhile [ $(date +%s) -lt $end ]; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; done\n",
    )
    .expect("script");
    let rules = dir.join("rules.yml");
    std::fs::write(&rules, format!("process_names:\n  - name: wrapper\n    cmdline: ['{}']\n", script.display()))
        .expect("rules");
    (script, rules)
}

#[test]
fn a_rules_file_groups_a_wrapper_with_its_children_and_a_child_with_its_own_rule_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("wrapper-groups-test.sh");
    // A wrapper that starts two sleeps (children follow it) and one marked child that has a
    // rule of its own.
    // The marker names this run alone, so no other run's processes can match it.
    let marker = format!("own-group-{}", std::process::id());
    std::fs::write(&script, format!("sleep 300 &\nsleep 301 &\nsh -c 'sleep 302' {marker}-marker &\nwait\n"))
        .expect("script");
    let wrapper = Family::start(&script);
    let rules = dir.path().join("rules.yml");
    std::fs::write(
        &rules,
        format!(
            "process_names:\n  - name: \"marked-{{{{.Matches.Tag}}}}\"\n    cmdline: ['(?P<Tag>{marker})-marker']\n  - name: wrapper\n    cmdline: ['{}']\n",
            script.display()
        ),
    )
    .expect("rules");
    // The children need a moment to exist and to have their command lines read.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = json(&proctor(&["groups", "--config", rules.to_str().expect("utf-8"), "--format", "json"]));
        let group = |name: &str| v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == name)).cloned();
        let (w, m) = (group("wrapper"), group(&format!("marked-{marker}")));
        let done = w.as_ref().is_some_and(|w| w["processes"] == 3) && m.as_ref().is_some_and(|m| m["processes"] == 2);
        if done {
            let w = w.expect("wrapper");
            assert!(w["threads"].as_u64().is_some_and(|t| t >= 3), "{w}");
            assert!(w["rss_bytes"].as_u64().is_some_and(|r| r > 0), "{w}");
            assert!(w["oldest_start_unix_secs"].as_f64().is_some(), "{w}");
            assert_eq!(v["by"], "rules");
            assert!(v["ungrouped"].as_u64().is_some_and(|u| u > 0), "the rest of the host is not grouped: {v}");
            break;
        }
        assert!(Instant::now() < deadline, "groups never settled: wrapper {w:?}, marked {m:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(wrapper);
}

#[test]
fn check_points_at_each_mistake_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "process_names:\n  - name: \"{{.Pid}}\"\n    cmdline: ['(x']\n  - comm: bash\n")
        .expect("file");
    let out = proctor(&["groups", "--check", bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let at = |pos: &str, says: &str| err.lines().any(|l| l.contains(&format!("bad.yml:{pos}:")) && l.contains(says));
    assert!(at("2:11", "unknown template field '.Pid'"), "{err}");
    assert!(at("3:15", "cmdline regex '(x'"), "{err}");
    assert!(at("4:11", "comm must be a list of strings"), "{err}");
    assert!(err.contains("3 mistakes"), "{err}");
    let good = dir.path().join("good.yml");
    std::fs::write(&good, "process_names:\n  - name: \"{{.Comm}}\"\n    cmdline: ['.+']\n").expect("file");
    let out = proctor(&["groups", "--check", good.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A bad file given to --config is refused with the first mistakes and a pointer to --check.
    let out = proctor(&["groups", "--config", bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--check"));
}

#[test]
fn a_wrapper_whose_children_live_less_than_a_sample_still_shows_their_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (script, rules) = short_children(dir.path(), "short-children-wrapper.sh");
    let wrapper = Family::start(&script);
    let mut best = (0.0, 0.0);
    for _ in 0..5 {
        let v = json(&proctor(&["groups", "--config", rules.to_str().expect("utf-8"), "--format", "json"]));
        let g = v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == "wrapper")).cloned();
        if let Some(g) = g {
            let (cpu, reaped) =
                (g["cpu_percent"].as_f64().unwrap_or(0.0), g["reaped_cpu_percent"].as_f64().unwrap_or(0.0));
            assert!(cpu >= reaped, "{g}");
            if reaped > best.1 {
                best = (cpu, reaped);
            }
            if reaped >= 10.0 {
                break;
            }
        }
    }
    // The loop keeps about one CPU busy; without the reaped CPU the group shows about 0 %. How
    // much of a CPU it gets is the machine's: beside two busy loops, the suite and a sanitizer
    // build it was 19.3 % at best, so the test asks for a tenth of one, which only the reaped
    // CPU can give.
    assert!(best.1 >= 10.0, "reaped CPU of the wrapper's short-lived children: {best:?}");
    drop(wrapper);
}

/// With the BPF process events, a short-lived child that a rule of its own names is counted in
/// that group — started, exited, its CPU — not in its parent's reaped share: the issue's "a
/// build's compiler runs land in the wrong group". Without the events (not root) the child's
/// CPU can only come back through its parent, and the test says SKIP.
#[test]
fn a_short_lived_child_with_a_rule_of_its_own_is_counted_in_its_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("burner-{}", std::process::id());
    let script = dir.path().join("own-group-wrapper.sh");
    std::fs::write(
        &script,
        format!(
            "end=$(( $(date +%s) + 30 ))\nwhile [ $(date +%s) -lt $end ]; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done' {marker}; done\n"
        ),
    )
    .expect("script");
    let rules = dir.path().join("rules.yml");
    std::fs::write(
        &rules,
        format!(
            "process_names:\n  - name: burner\n    cmdline: ['{marker}']\n  - name: wrapper\n    cmdline: ['{}']\n",
            script.display()
        ),
    )
    .expect("rules");
    if !events_here("short-lived children in their own group") {
        return;
    }
    let wrapper = Family::start(&script);
    let mut best: Option<serde_json::Value> = None;
    for _ in 0..5 {
        let v = json(&proctor(&["groups", "--config", rules.to_str().expect("utf-8"), "--format", "json"]));
        let find = |name: &str| v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == name)).cloned();
        if let Some(burner) = find("burner") {
            let cpu = burner["cpu_percent"].as_f64().unwrap_or(0.0);
            if best.as_ref().is_none_or(|b| cpu > b["burner"]["cpu_percent"].as_f64().unwrap_or(0.0)) {
                best = Some(serde_json::json!({ "burner": burner, "wrapper": find("wrapper") }));
            }
            if cpu >= 20.0 {
                break;
            }
        }
    }
    let best = best.expect("a burner group: its members all lived between two samples");
    let (burner, wrapper_group) = (&best["burner"], &best["wrapper"]);
    assert!(burner["cpu_percent"].as_f64().unwrap_or(0.0) >= 20.0, "{best}");
    assert!(burner["exited"].as_u64().unwrap_or(0) >= 1 && burner["started"].as_u64().unwrap_or(0) >= 1, "{best}");
    // The wrapper itself only waits: what was reaped into it moved to the burner group.
    let wrapper_reaped = wrapper_group["reaped_cpu_percent"].as_f64().unwrap_or(0.0);
    assert!(wrapper_reaped < burner["cpu_percent"].as_f64().unwrap_or(0.0) / 4.0, "{best}");
    drop(wrapper);
}

/// A daemonised grandchild (its parent shell exits at once, so it is reparented away from the
/// family) that lives less than a sample is counted in the group its own rule names: only its
/// exec and exit events tell of it. Without the events, SKIP.
#[test]
fn a_daemonised_short_lived_grandchild_is_counted_in_its_rules_group() {
    if !events_here("a daemonised grandchild's group") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("daemonised-{}", std::process::id());
    let script = dir.path().join("daemoniser.sh");
    std::fs::write(
        &script,
        format!(
            "end=$(( $(date +%s) + 30 ))\nwhile [ $(date +%s) -lt $end ]; do sh -c '(sleep 0.05; /bin/true {marker}) &'; sleep 0.2; done\n"
        ),
    )
    .expect("script");
    let rules = dir.path().join("rules.yml");
    // Only the exec'd program's command line: the shells that start it name the marker too.
    std::fs::write(&rules, format!("process_names:\n  - name: daemonised\n    cmdline: ['^/bin/true {marker}']\n"))
        .expect("rules");
    let family = Family::start(&script);
    let mut last = serde_json::Value::Null;
    for _ in 0..5 {
        let v = json(&proctor(&["groups", "--config", rules.to_str().expect("utf-8"), "--format", "json"]));
        last = v["groups"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["name"] == "daemonised"))
            .cloned()
            .unwrap_or_default();
        if last["exited"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
    }
    assert!(last["exited"].as_u64().unwrap_or(0) >= 1, "the daemonised grandchildren's group: {last}");
    assert!(last["started"].as_u64().unwrap_or(0) >= 1 && last["exited_total"].as_u64().unwrap_or(0) >= 1, "{last}");
    drop(family);
}

/// What the agent folded from short-lived processes is in the recording: `dump group` over a
/// `record --groups RULES` shows the group that only processes living between two samples were
/// in, with the same counts the agent had (the stored `SampleGroups::exited`). Without the
/// events, SKIP.
#[test]
fn a_recording_keeps_short_lived_processes_in_their_groups() {
    if !events_here("short-lived processes in a recording's groups") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("stored-{}", std::process::id());
    let script = dir.path().join("short.sh");
    std::fs::write(
        &script,
        format!(
            "end=$(( $(date +%s) + 30 ))\nwhile [ $(date +%s) -lt $end ]; do /bin/true {marker}; sleep 0.05; done\n"
        ),
    )
    .expect("script");
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, format!("process_names:\n  - name: short\n    cmdline: ['^/bin/true {marker}']\n"))
        .expect("rules");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let family = Family::start(&script);
    let out = proctor(&[
        "record",
        "--dir",
        data.to_str().expect("utf-8"),
        "--interval",
        "500ms",
        "--count",
        "6",
        "--groups",
        rules.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(family);
    let out = proctor(&[
        "dump",
        "group",
        "--dir",
        data.to_str().expect("utf-8"),
        "--fields",
        "name,started,exited,processes",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<Vec<u64>> = text
        .lines()
        .filter_map(|l| l.strip_prefix("short,"))
        .map(|r| r.split(',').map(|v| v.parse().unwrap_or(0)).collect())
        .collect();
    let exited: u64 = rows.iter().map(|r| r[1]).sum();
    assert!(exited >= 5, "the stored samples' short-lived members: {text}");
    assert!(rows.iter().all(|r| r[0] == r[1] || r[2] > 0), "each started and ended between samples: {text}");
}

/// `serve --groups RULES`: `/api/v1/groups` has the wrapper with its short-lived children's
/// CPU, and its CPU counter grows between two snapshots; without `--groups` the route says how
/// to turn groups on.
#[test]
fn serve_keeps_groups_every_sample_for_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (script, rules) = short_children(dir.path(), "serve-groups-wrapper.sh");
    let _wrapper = Family::start(&script);
    let start = |extra: &[&str]| {
        let mut child = super::proctor_command()
            .args(["serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "500ms"])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve");
        let mut stderr = super::bounded::StderrLines::take(&mut child);
        let addr = stderr.address();
        (super::Guard(child), addr, stderr)
    };
    let body = |reply: &str| reply.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    let (plain, addr, _e1) = start(&[]);
    let reply = super::http_get(&addr, "/api/v1/groups");
    assert!(reply.starts_with("HTTP/1.1 404") && reply.contains("--groups"), "{reply}");
    drop(plain);

    let (_serve, addr, _e2) = start(&["--groups", rules.to_str().expect("utf-8")]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen: Vec<(f64, f64)> = Vec::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(600));
        let v: serde_json::Value =
            serde_json::from_str(&body(&super::http_get(&addr, "/api/v1/groups"))).expect("json");
        assert_eq!(v["by"], "rules", "{v}");
        if let Some(w) = v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == "wrapper")) {
            seen.push((
                w["reaped_cpu_percent"].as_f64().unwrap_or(0.0),
                w["cpu_seconds_counter"].as_f64().unwrap_or(0.0),
            ));
        }
        let grew = seen.first().zip(seen.last()).is_some_and(|(a, b)| b.1 > a.1);
        if seen.iter().any(|s| s.0 >= 20.0) && grew {
            break;
        }
    }
    assert!(seen.iter().any(|s| s.0 >= 20.0), "the wrapper's reaped CPU: {seen:?}");
    assert!(seen.windows(2).all(|w| w[1].1 >= w[0].1), "the counter never goes down: {seen:?}");
    assert!(seen.first().zip(seen.last()).is_some_and(|(a, b)| b.1 > a.1), "the counter grows: {seen:?}");
}

#[test]
fn a_rules_file_over_a_mebibyte_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.yml");
    std::fs::write(&big, "#".repeat(2 << 20)).expect("file");
    let out = proctor(&["groups", "--check", big.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("over 1024 KiB"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `record --groups RULES`, then `replay --groups` and `dump group` over the recording: every
/// sample's groups come back, the wrapper among them with its children's CPU, and the two views
/// agree sample by sample; a recording without groups is a clear error for replay.
#[test]
fn replay_groups_shows_the_groups_stored_with_each_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (script, rules) = short_children(dir.path(), "replay-groups-wrapper.sh");
    let wrapper = Family::start(&script);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let data = data.to_str().expect("utf-8");
    let out = proctor(&[
        "record",
        "--dir",
        data,
        "--interval",
        "300ms",
        "--count",
        "8",
        "--groups",
        rules.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(wrapper);

    let out = proctor(&["replay", "--dir", data, "--groups", "--from", "@0", "--format", "json", "--top", "0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(docs.len(), 8, "a document per sample");
    let wrapper_at = |doc: &serde_json::Value| {
        doc["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == "wrapper")).cloned()
    };
    // The first sample is taken before any command line is read (they are read off the
    // sampling thread): its rules cannot match, and it says so.
    let summary: Vec<_> = docs.iter().map(|d| (wrapper_at(d).is_some(), d["cmdline_unread"].clone())).collect();
    assert!(docs.iter().all(|d| d["by"] == "rules"));
    assert!(docs[1..].iter().all(|d| wrapper_at(d).is_some()), "the wrapper in every later sample: {summary:?}");
    assert!(wrapper_at(&docs[0]).is_some() || docs[0]["cmdline_unread"].as_u64() > Some(0), "{summary:?}");
    let busiest =
        docs.iter().filter_map(wrapper_at).map(|g| g["cpu_percent"].as_f64().unwrap_or(0.0)).fold(0.0, f64::max);
    assert!(busiest >= 10.0, "the wrapper's children keep a CPU busy: {busiest}");

    let out = proctor(&[
        "dump",
        "group",
        "--dir",
        data,
        "--format",
        "json",
        "--fields",
        "time_unix_ms,name,cpu_percent,processes",
        "--filter",
        "name=wrapper",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.len(), docs.iter().filter(|d| wrapper_at(d).is_some()).count(), "{summary:?}");
    for row in &rows {
        let doc = docs.iter().find(|d| d["time_unix_ms"] == row["time_unix_ms"]).expect("the same sample");
        let g = wrapper_at(doc).expect("wrapper");
        assert_eq!((&row["cpu_percent"], &row["processes"]), (&g["cpu_percent"], &g["processes"]), "{row} vs {g}");
    }

    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).expect("dir");
    let plain = plain.to_str().expect("utf-8");
    assert!(proctor(&["record", "--dir", plain, "--interval", "200ms", "--count", "2"]).status.success());
    let out = proctor(&["replay", "--dir", plain, "--groups"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("recorded without groups"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A group's open fds: a process of this test holding 40 more files open, in a group of its
/// own, is counted as the kernel lists its `/proc/PID/fd`. Kernels before 6.2 do not give the
/// count: a loud SKIP there.
#[test]
fn a_group_counts_its_members_open_fds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let code = "import os, sys, time\nfiles = [open(os.devnull) for _ in range(40)]\nprint(len(os.listdir('/proc/self/fd')), flush=True)\ntime.sleep(60)\n";
    let mut holder =
        Command::new("python3").args(["-c", code, "fd-holder-marker"]).stdout(Stdio::piped()).spawn().expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.as_mut().expect("stdout")), &mut line)
        .expect("the holder says how many fds it has");
    // What the kernel lists for it, from outside (its own listing counted the listing's fd).
    let listed = std::fs::read_dir(format!("/proc/{}/fd", holder.id())).expect("its fd directory").count() as u64;
    assert!(listed >= 43, "{listed} (it said {line})");
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, "process_names:\n  - name: holder\n    cmdline: ['fd-holder-marker']\n").expect("rules");
    let mut found = None;
    for _ in 0..5 {
        let v = json(&proctor(&["groups", "--config", rules.to_str().expect("utf-8"), "--format", "json"]));
        if let Some(g) = v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == "holder")).cloned() {
            found = Some(g);
            break;
        }
    }
    let _ = holder.kill();
    let _ = holder.wait();
    let g = found.expect("the holder's group");
    // The kernel's answer, asked directly: 0 is a kernel that does not count.
    if std::fs::symlink_metadata("/proc/self/fd").map_or(0, |m| m.len()) == 0 {
        eprintln!(
            "SKIP: open fds per group: this kernel does not give /proc/PID/fd's size as its fd count (Linux 6.2+): {g}"
        );
        return;
    }
    assert_eq!((g["processes"].as_u64(), g["fds_known"].as_u64()), (Some(1), Some(1)), "{g}");
    assert_eq!(g["open_fds"].as_u64(), Some(listed), "{g}");
}
