//! `proctor share` as a user runs it, on a real forked family: a Python master that fills
//! 64 MiB before forking two workers, one of which copies pages on a schedule. The gunicorn
//! end to end (with smem beside it) is scripts/test.d/68-share.sh.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{json, proctor, Guard};

const MIB: f64 = 1024.0 * 1024.0;

/// A master holding 64 MiB of dirty anonymous memory, forked into two workers; worker 2 writes
/// `copy_mib` MiB of it every 200 ms (up to the whole object). Prints the master's pid and the
/// copier's, then waits; the workers die with it.
fn family(copy_mib: u32, every_ms: u32) -> (Guard, u32, u32) {
    let program = format!(
        r#"
import ctypes, os, sys, time
data = bytearray(b"\x01") * (64 << 20)
kids = []
r, w = os.pipe()
for i in range(2):
    pid = os.fork()
    if pid == 0:
        # Die with the master (PR_SET_PDEATHSIG, SIGKILL): the test ends the master by its pid.
        ctypes.CDLL(None).prctl(1, 9)
        if i == 1:
            off = 0
            while True:
                time.sleep({every_ms} / 1000)
                for at in range(off, min(off + ({copy_mib} << 20), len(data)), 4096):
                    data[at] = 2
                off += {copy_mib} << 20
        time.sleep(600)
        os._exit(0)
    kids.append(pid)
print(os.getpid(), kids[1], flush=True)
time.sleep(600)
"#
    );
    let mut child =
        Command::new("python3").args(["-c", &program]).stdout(Stdio::piped()).spawn().expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("pids");
    let pids: Vec<u32> = line.split_whitespace().map(|p| p.parse().expect("pid")).collect();
    // Give the workers a moment to be forked and settled.
    std::thread::sleep(Duration::from_millis(300));
    (Guard(child), pids[0], pids[1])
}

#[test]
fn one_round_reads_every_member_and_says_what_sharing_saves() {
    let (guard, master, _) = family(0, 200);
    let doc = json(&proctor(&["share", &master.to_string(), "--format", "json"]));
    let members = doc["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{doc}");
    assert_eq!(members[0]["role"], "master");
    assert_eq!(members[0]["pid"].as_u64(), Some(u64::from(master)));
    // Two workers share the master's 64 MiB: the saving is about 2 x 64 MiB (the interpreter's
    // shared pages add a little).
    let saving = doc["summary"]["saving_bytes"].as_f64().expect("saving") / MIB;
    assert!((120.0..170.0).contains(&saving), "saving {saving:.1} MiB: {doc}");
    for m in members {
        let c = &m["counters"];
        assert!(c["shared_dirty_bytes"].as_f64().expect("shared") / MIB > 60.0, "{m}");
        assert!(m["cost"]["held_ns"].as_u64().is_some_and(|n| n > 0), "each read is timed: {m}");
    }
    assert_eq!(doc["cost"]["reads"].as_u64(), Some(3));
    assert_eq!(doc["cost"]["budget"].as_f64(), Some(0.1));
    assert!(doc["watch"].is_null());

    let text = proctor(&["share", &master.to_string()]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("3 processes use ") && stdout.contains("sharing saves"), "{stdout}");
    assert!(stdout.contains("cost: 3 smaps_rollup reads in 1 rounds"), "{stdout}");

    // Without the master, two members; a --match that leaves none is said so.
    let workers = json(&proctor(&["share", &master.to_string(), "--include-self", "false", "--format", "json"]));
    assert_eq!(workers["members"].as_array().map(Vec::len), Some(2));
    let none = proctor(&["share", &master.to_string(), "--match", "^nothing-matches-this$"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no member matching --match"));
    let python = json(&proctor(&["share", &master.to_string(), "--match", "python3", "--format", "json"]));
    assert_eq!(python["members"].as_array().map(Vec::len), Some(3), "the command lines are read for --match");
    drop(guard);
}

#[test]
fn a_watch_names_the_copier_and_maps_find_the_copy() {
    let (guard, master, copier) = family(4, 200);
    let doc = json(&proctor(&[
        "share",
        &master.to_string(),
        "--watch",
        "500ms",
        "--count",
        "5",
        "--maps",
        "--format",
        "json",
    ]));
    let watch = &doc["watch"];
    assert_eq!(watch["rounds"].as_u64(), Some(5));
    assert_eq!(watch["top_grower_pid"].as_u64(), Some(u64::from(copier)), "{watch}");
    let grower = watch["members"].as_array().expect("members").iter().find(|g| g["pid"] == copier).expect("copier");
    // 4 MiB every 200 ms over 2 s of watching: well over 20 MiB.
    assert!(grower["growth_bytes"].as_f64().expect("growth") / MIB > 20.0, "{grower}");
    assert!(grower["full_copy_after_secs"].as_f64().is_some(), "{grower}");
    assert!(watch["verdict"].as_str().expect("verdict").contains(&format!("(pid {copier}) copies")), "{watch}");
    assert_eq!(doc["maps"]["pid"].as_u64(), Some(u64::from(copier)));
    assert_eq!(doc["maps"]["areas"][0]["name"], "[anonymous]", "{}", doc["maps"]);
    drop(guard);
}

#[test]
fn from_a_recording_the_agents_readings_make_the_rounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8");
    // 1 MiB a second: the copier's private dirty grows for ~64 s, so that the agent's PSS
    // worker reads it twice while it grows even on a starved machine. (At 1 MiB every 200 ms,
    // ~13 s, a loaded suite run's agent first read the family 12.8 s in, as the growth ended,
    // and next at the readings' maximum age, 60 s later: no growth between them.)
    let (guard, master, copier) = family(1, 1000);
    // The agent records until its readings are in the store: each member read at least once and
    // the copier read by itself at two sizes of its private pages, so that it copied between
    // them (a state, waited for with a bound, not a fixed count of samples: on a loaded machine
    // the budgeted worker takes longer to reach the family; two readings 0.8 s apart, whose PSS
    // moved with a sibling's pages but not the copier's own, made a watch with no grower).
    let recorder = super::proctor_command()
        .args(["record", "--dir", data, "--interval", "200ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record");
    let recorder_pid = recorder.id();
    let mut recorder = Guard(recorder);
    let pids = [master, copier];
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let readings = pss_readings(data, &pids);
        let workers = pss_readings_of_children(data, master);
        if readings[0] >= 1 && readings[1] >= 2 && workers >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the recording holds too few PSS readings of the family after 120 s: master {}, copier {}, workers read {workers}",
            readings[0],
            readings[1]
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // SAFETY: SIGINT to the recorder this test started; it finishes its store and exits 0.
    unsafe { libc::kill(recorder_pid as i32, libc::SIGINT) };
    let status = recorder.0.wait().expect("record exits");
    assert!(status.success(), "record after SIGINT: {status:?}");
    let doc =
        json(&proctor(&["share", &master.to_string(), "--dir", data, "--from", "1 hour ago", "--format", "json"]));
    assert_eq!(doc["source"], "recording");
    assert!(doc["cost"]["budget"].is_null(), "no reads of its own: {}", doc["cost"]);
    let watch = &doc["watch"];
    assert!(watch["rounds"].as_u64().is_some_and(|n| n >= 2), "{watch}");
    assert_eq!(watch["top_grower_pid"].as_u64(), Some(u64::from(copier)), "{watch}");
    assert!(doc["notes"][0].as_str().expect("note").contains("no /proc reads"), "{}", doc["notes"]);
    let refused = proctor(&["share", &master.to_string(), "--dir", data, "--watch", "1s"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--watch and --maps read /proc"));
    drop(guard);
}

/// How many distinct readings of its own (not a clone's standing in) the recording in `data`
/// holds for each of `pids`, by their unique set size: a reading whose PSS alone moved (a
/// sibling's pages) shows no copying, and the watch's rounds count growth in private pages.
fn pss_readings(data: &str, pids: &[u32]) -> Vec<usize> {
    let rows = dump_pss(data);
    pids.iter()
        .map(|pid| {
            let mut values: Vec<&str> =
                rows.iter().filter(|r| r.pid == *pid && r.estimated_from.is_empty()).map(|r| r.uss.as_str()).collect();
            values.sort_unstable();
            values.dedup();
            values.len()
        })
        .collect()
}

/// How many of `master`'s children have at least one PSS reading in the recording.
fn pss_readings_of_children(data: &str, master: u32) -> usize {
    let rows = dump_pss(data);
    let mut read: Vec<u32> = rows.iter().filter(|r| r.ppid == master).map(|r| r.pid).collect();
    read.sort_unstable();
    read.dedup();
    read.len()
}

/// A stored process row with a PSS reading.
struct PssRow {
    pid: u32,
    ppid: u32,
    uss: String,
    /// The clone whose reading stands in for this process's (empty: its own).
    estimated_from: String,
}

/// Every stored process row that has a PSS reading.
fn dump_pss(data: &str) -> Vec<PssRow> {
    let fields = "pid,ppid,pss_bytes,uss_bytes,pss_estimated_from";
    let out = proctor(&["dump", "process", "--dir", data, "--from", "1 hour ago", "--fields", fields]);
    assert!(out.status.success(), "dump: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let [pid, ppid, pss, uss, from] = cells[..] else { return None };
            if pss.is_empty() {
                return None;
            }
            Some(PssRow {
                pid: pid.parse().ok()?,
                ppid: ppid.parse().ok()?,
                uss: uss.to_string(),
                estimated_from: from.to_string(),
            })
        })
        .collect()
}

#[test]
fn mistakes_are_said() {
    let gone = proctor(&["share", "4000000000"]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no process with pid 4000000000"));
    let budget = proctor(&["share", "1", "--budget", "2"]);
    assert_eq!(budget.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&budget.stderr).contains("--budget 2 is not a share of one core"));
    let zero = proctor(&["share", "1", "--watch", "0s"]);
    assert_eq!(zero.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--watch needs an interval above zero"));
    let plot = proctor(&["share", "1", "--plot", "x.gif"]);
    assert_eq!(plot.status.code(), Some(1));
    let once = proctor(&["share", "1", "--plot", "x.png"]);
    assert_eq!(once.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&once.stderr).contains("--plot draws rounds over time"));
}
