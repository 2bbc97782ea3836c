//! `proctor groups` against real processes: a process-exporter rules file names a wrapper
//! script's group, its children follow it, a child with a rule of its own leaves it; `--check`
//! points at each mistake.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{json, proctor, Guard};

#[test]
fn a_rules_file_groups_a_wrapper_with_its_children_and_a_child_with_its_own_rule_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("wrapper-groups-test.sh");
    // A wrapper that starts two sleeps (children follow it) and one marked child that has a
    // rule of its own.
    std::fs::write(&script, "sleep 300 &\nsleep 301 &\nsh -c 'sleep 302' own-group-marker &\nwait\n").expect("script");
    let wrapper = Guard(Command::new("sh").arg(&script).stdout(Stdio::null()).spawn().expect("sh"));
    let rules = dir.path().join("rules.yml");
    std::fs::write(
        &rules,
        format!(
            "process_names:\n  - name: \"marked-{{{{.Matches.Tag}}}}\"\n    cmdline: ['(?P<Tag>own-group)-marker']\n  - name: wrapper\n    cmdline: ['{}']\n",
            script.display()
        ),
    )
    .expect("rules");
    // The children need a moment to exist and to have their command lines read.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = json(&proctor(&[
            "groups",
            "--config",
            rules.to_str().expect("utf-8"),
            "--interval",
            "300ms",
            "--format",
            "json",
        ]));
        let group = |name: &str| v["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == name)).cloned();
        let (w, m) = (group("wrapper"), group("marked-own-group"));
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
    let script = dir.path().join("short-children-wrapper.sh");
    // Children that burn ~0.1 s of CPU each and exit, one after another, for at most 30 s:
    // at any sample most of the CPU was used by children that no sample saw.
    std::fs::write(
        &script,
        "end=$(( $(date +%s) + 30 ))\nwhile [ $(date +%s) -lt $end ]; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; done\n",
    )
    .expect("script");
    let wrapper = Guard(Command::new("sh").arg(&script).stdout(Stdio::null()).spawn().expect("sh"));
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, format!("process_names:\n  - name: wrapper\n    cmdline: ['{}']\n", script.display()))
        .expect("rules");
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
            if reaped >= 20.0 {
                break;
            }
        }
    }
    // The loop keeps about one CPU busy; on a loaded 2-core machine at least a fifth of one is
    // expected to come back as reaped CPU (without it, the group shows about 0 %).
    assert!(best.1 >= 20.0, "reaped CPU of the wrapper's short-lived children: {best:?}");
    drop(wrapper);
}
