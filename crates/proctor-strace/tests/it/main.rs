//! Integration tests: the analyzer on logs captured on a Debian machine with the real
//! strace (see tests/fixtures/capture.sh), and one live trace when strace is installed.

use std::path::{Path, PathBuf};

use proctor_strace::input::{self, Input};
use proctor_strace::report::SyscallReport;
use proctor_strace::{feed_reader, report, Analyzer, AnalyzerConfig, Report};

mod hand_written;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn analyze(paths: &[PathBuf]) -> Report {
    let inputs = input::expand(paths).expect("inputs exist");
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    for input in &inputs {
        analyzer.begin_source(&input.name(), input.pid);
        let reader = input::open(input, None).expect("opens");
        feed_reader(&mut analyzer, reader).expect("reads");
    }
    report::build(analyzer.finish())
}

fn syscall<'a>(report: &'a Report, name: &str) -> &'a SyscallReport {
    report.syscalls.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name} in report"))
}

/// The futex peaks of waiters.c: 16 × 250 ms, 8 × 500 ms, 4 × 1 s, each within 5 %, and
/// the retry hint between them.
fn check_timeouts(report: &Report) {
    let futex = syscall(report, "futex");
    let slow: Vec<(f64, u64)> =
        futex.peaks.iter().filter(|peak| peak.seconds > 0.1).map(|peak| (peak.seconds, peak.count)).collect();
    let expected = [(0.25, 16), (0.5, 8), (1.0, 4)];
    assert_eq!(slow.len(), 3, "futex peaks {:?}", futex.peaks);
    for ((seconds, count), (want_seconds, want_count)) in slow.iter().zip(expected) {
        assert!((seconds / want_seconds - 1.0).abs() < 0.05, "futex peaks {:?}", futex.peaks);
        assert_eq!(*count, want_count, "futex peaks {:?}", futex.peaks);
    }
    assert!(futex.errnos.iter().any(|errno| errno.name == "ETIMEDOUT" && errno.count >= 28));
    assert_eq!(futex.near_multiples.len(), 2, "{:?}", futex.near_multiples);
}

/// A log strace wrote to its own file has no bad line and no orphan half.
fn check_clean(report: &Report) {
    assert_eq!(report.bad_lines.count, 0, "{:?}", report.bad_lines.examples);
    assert_eq!(report.orphans.unfinished + report.orphans.resumed, 0, "{:?}", report.orphans);
}

/// The child that exited with 3, the one killed by SIGKILL after SIGUSR1 interrupted its
/// nanosleep, and the parent's SIGCHLDs.
fn check_processes(report: &Report) {
    let exits: Vec<&str> = report.pids.iter().filter_map(|pid| pid.exit.as_deref()).collect();
    assert!(exits.contains(&"exited with 3"), "{exits:?}");
    assert!(exits.contains(&"killed by SIGKILL"), "{exits:?}");
    let signals: Vec<&str> = report.signals.iter().map(|signal| signal.name.as_str()).collect();
    assert!(signals.contains(&"SIGCHLD") && signals.contains(&"SIGUSR1"), "{signals:?}");
    let nanosleep = syscall(report, "clock_nanosleep");
    assert!(nanosleep.errnos.iter().any(|errno| errno.name.starts_with("ERESTART")), "{:?}", nanosleep.errnos);
    assert!(syscall(report, "restart_syscall").count >= 1);
}

#[test]
fn f_tt_t_plain_text() {
    let report = analyze(&[fixture("f_tt_T.log")]);
    check_timeouts(&report);
    check_processes(&report);
    check_clean(&report);
    assert_eq!(report.timestamps, Some(proctor_strace::parse::TimeKind::Clock));
    // A split call is listed at the line where it started.
    let slowest = &report.slowest[0];
    assert_eq!(slowest.syscall, "futex");
    assert!(slowest.time.is_some() && slowest.pid.is_some());
}

#[test]
fn f_ttt_t_y_gzip() {
    let report = analyze(&[fixture("f_ttt_T_y.log.gz")]);
    check_timeouts(&report);
    check_processes(&report);
    check_clean(&report);
    assert_eq!(report.timestamps, Some(proctor_strace::parse::TimeKind::Epoch));
    // -y names the files the loader read.
    assert!(report.paths.iter().any(|path| path.path.contains("libc")), "{:?}", report.paths);
}

#[test]
fn f_r_t_relative() {
    let report = analyze(&[fixture("f_r_T.log.gz")]);
    check_timeouts(&report);
    check_processes(&report);
    check_clean(&report);
    assert_eq!(report.timestamps, Some(proctor_strace::parse::TimeKind::Relative));
    // The run lasts about four seconds; summed -r deltas must say so.
    let last = report.timeline.buckets.last().expect("slow calls").start_seconds;
    assert!((3.0..6.0).contains(&last), "{last}");
}

#[test]
fn f_t_t_yy_sockets_and_seconds() {
    let report = analyze(&[fixture("f_t_T_yy.log.gz")]);
    check_timeouts(&report);
    check_processes(&report);
    check_clean(&report);
}

#[test]
fn stderr_form_with_pid_brackets_and_notes() {
    let report = analyze(&[fixture("stderr_f_tt_T.log.gz")]);
    check_timeouts(&report);
    check_processes(&report);
    // On stderr, strace's "Process N attached" notes and the program's own writes land in
    // the middle of lines: those halves are bad lines, reported with their numbers.
    assert!(report.bad_lines.count > 0 && report.bad_lines.count < 20, "{:?}", report.bad_lines);
    let first = &report.bad_lines.examples[0];
    assert!(first.line > 1 && first.source.ends_with("stderr_f_tt_T.log.gz"), "{first:?}");
}

#[test]
fn ff_directory_takes_pids_from_file_names() {
    let report = analyze(&[fixture("ff_tt_T")]);
    check_timeouts(&report);
    check_processes(&report);
    check_clean(&report);
    assert!(report.sources.len() >= 5);
    let expected: Vec<u32> =
        report.sources.iter().filter_map(|source| input::pid_suffix(Path::new(&source.name))).collect();
    let pids: Vec<u32> = report.pids.iter().map(|pid| pid.pid).collect();
    for pid in expected {
        assert!(pids.contains(&pid), "{pid} missing from {pids:?}");
    }
}

#[test]
fn several_ff_files_as_arguments() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture("ff_tt_T"))
        .expect("fixture directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    let report = analyze(&files);
    check_timeouts(&report);
}

#[test]
fn binary_and_empty_inputs_are_recognised_as_such() {
    let directory = tempfile::tempdir().expect("temp dir");
    let binary = directory.path().join("binary");
    std::fs::write(&binary, (0..=255u8).cycle().take(10_000).collect::<Vec<u8>>()).expect("write");
    let report = analyze(&[binary]);
    assert!(report.is_empty());
    assert!(report.bad_lines.by_reason.iter().any(|reason| reason.name == "binary data"));
    let empty = directory.path().join("empty");
    std::fs::write(&empty, b"").expect("write");
    let report = analyze(&[empty]);
    assert!(report.is_empty());
    assert_eq!(report.lines, 0);
    let missing = input::open(&Input { path: Some(directory.path().join("missing")), pid: None }, None);
    let message = missing.err().map(|err| err.to_string()).unwrap_or_default();
    assert!(message.starts_with("cannot open ") && message.ends_with("missing"), "{message}");
}

/// Traces a shell that sleeps 250 ms twice and exits 3 from a subshell.
#[test]
fn live_trace_when_strace_is_installed() {
    let Some(strace) = ["/usr/bin/strace", "/bin/strace"].into_iter().map(Path::new).find(|p| p.exists()) else {
        eprintln!("SKIP live_trace_when_strace_is_installed: strace is not installed");
        return;
    };
    let directory = tempfile::tempdir().expect("temp dir");
    let log = directory.path().join("live.log");
    let status = std::process::Command::new(strace)
        .args(["-f", "-tt", "-T", "-o"])
        .arg(&log)
        .args(["--", "sh", "-c", "sleep 0.25; sleep 0.25; (exit 3)"])
        .status()
        .expect("strace starts");
    if !log.exists() {
        // ptrace may be forbidden (containers without CAP_SYS_PTRACE); say so loudly.
        eprintln!("SKIP live_trace_when_strace_is_installed: strace wrote no log ({status})");
        return;
    }
    let report = analyze(&[log]);
    let sleeps = syscall(&report, "clock_nanosleep");
    assert_eq!(sleeps.timed, 2);
    let peak = sleeps.peaks.first().expect("a peak");
    assert!((peak.seconds / 0.25 - 1.0).abs() < 0.2, "{:?}", sleeps.peaks);
    assert!(report.pids.iter().any(|pid| pid.exit.as_deref() == Some("exited with 3")));
}

/// `python3 python_join.py` under `strace -f -tt -T -y` (tests/fixtures/capture.sh): four
/// threads sleep 250 ms five times while the main thread joins with a 250 ms timeout. Five of
/// futex's ~50 timed calls are those ~250 ms waits and hold ~99 % of its wall time; counted by
/// calls alone, futex had one peak at a few µs "(100 %)".
#[test]
fn python_join_rare_futex_waits_that_hold_the_time_are_a_peak() {
    let report = analyze(&[fixture("python_join.log.gz")]);
    check_clean(&report);
    let futex = syscall(&report, "futex");
    let slow = futex.peaks.iter().find(|peak| peak.seconds > 0.1);
    let slow = slow.unwrap_or_else(|| panic!("no slow futex peak: {:?}", futex.peaks));
    assert!((slow.seconds / 0.25 - 1.0).abs() < 0.05, "{:?}", futex.peaks);
    assert_eq!(slow.count, 5, "{:?}", futex.peaks);
    assert!(
        futex.peaks.iter().any(|peak| peak.seconds < 1e-3),
        "the common short calls stay a peak: {:?}",
        futex.peaks
    );
    // Both shares: rare by calls, most of the time.
    assert!((slow.fraction - 5.0 / futex.timed as f64).abs() < 1e-9, "{:?}", futex.peaks);
    assert!(slow.fraction < 0.2 && slow.time_fraction > 0.9, "{:?}", futex.peaks);
    assert!((slow.total_seconds / 1.25 - 1.0).abs() < 0.05, "{:?}", futex.peaks);
    let shares: f64 = futex.peaks.iter().map(|peak| peak.time_fraction).sum();
    assert!(shares <= 1.0 + 1e-9, "{:?}", futex.peaks);
    let text = report.render_text(15);
    let line = text.lines().find(|line| line.trim_start().starts_with("futex:")).unwrap_or_default();
    let time_percent = format!("{:.0} % of time", slow.time_fraction * 100.0);
    assert!(line.contains("250 ms (5 calls, ") && line.contains(&time_percent), "{text}");
    let json = serde_json::to_value(&report).expect("serializes");
    let futex_json = json["syscalls"].as_array().and_then(|all| all.iter().find(|s| s["name"] == "futex"));
    let peaks = futex_json.map(|futex| futex["peaks"].clone()).unwrap_or_default();
    let slow_json = peaks.as_array().and_then(|peaks| peaks.iter().find(|peak| peak["count"] == 5)).cloned();
    let slow_json = slow_json.unwrap_or_else(|| panic!("the 250 ms peak in JSON: {peaks}"));
    assert!(slow_json["time_fraction"].as_f64().is_some_and(|share| share > 0.9), "{slow_json}");
    assert!(slow_json["fraction"].as_f64().is_some_and(|share| share < 0.2), "{slow_json}");
}

/// Numbers in `value` whose key is neither in `not_durations` nor ends with `_seconds`.
fn unitless_numbers(value: &serde_json::Value, path: &str, not_durations: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    match value {
        serde_json::Value::Object(fields) => {
            for (key, child) in fields {
                let here = format!("{path}.{key}");
                let numeric = child.is_number()
                    || child.as_array().is_some_and(|items| items.first().is_some_and(|item| item.is_number()));
                if numeric && !key.ends_with("_seconds") && !not_durations.contains(&key.as_str()) {
                    found.push(here.clone());
                }
                found.extend(unitless_numbers(child, &here, not_durations));
            }
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                found.extend(unitless_numbers(item, &format!("{path}[{index}]"), not_durations));
            }
        }
        _ => {}
    }
    found
}

/// Every duration in `--format json` is named `<what>_seconds`, the unit strace itself writes
/// (`<0.250085>`), histogram buckets and peaks included.
#[test]
fn every_duration_in_the_json_is_named_in_seconds() {
    let report = analyze(&[fixture("python_join.log.gz")]);
    let json = serde_json::to_value(&report).expect("serializes");
    let not_durations = [
        "lines",
        "calls",
        "calls_without_duration",
        "count",
        "errors",
        "interrupted",
        "unfinished",
        "timed",
        "fraction",
        "time_fraction",
        "peak",
        "pid",
        "line",
        "events",
        "bad_lines",
        "signals",
        "bytes",
        "resumed",
        "unfinished_at_exit",
        // The caps section: counts and table sizes.
        "syscall_lines",
        "lines_cut",
        "errnos",
        "pid_events",
        "pending",
        "max_syscalls",
        "max_errnos",
        "max_signals",
        "max_pids",
    ];
    assert_eq!(unitless_numbers(&json, "", &not_durations), Vec::<String>::new());
    let futex = json["syscalls"].as_array().and_then(|all| all.iter().find(|s| s["name"] == "futex")).cloned();
    let futex = futex.expect("futex in the JSON");
    assert!(futex.get("histogram_ns").is_none(), "renamed to histogram, in seconds");
    let buckets = futex["histogram"].as_array().cloned().unwrap_or_default();
    let counted: u64 = buckets.iter().map(|bucket| bucket["count"].as_u64().unwrap_or(0)).sum();
    assert_eq!(counted, futex["timed"].as_u64().unwrap_or(u64::MAX));
    let last = buckets.last().cloned().unwrap_or_default();
    let (low, mean, high) = (&last["low_seconds"], &last["mean_seconds"], &last["high_seconds"]);
    let (low, mean, high) = (low.as_f64().unwrap_or(0.0), mean.as_f64().unwrap_or(0.0), high.as_f64().unwrap_or(0.0));
    assert!(low <= mean && mean < high && (0.2..0.3).contains(&mean), "{last}");
    assert!(futex["peaks"][0]["value_seconds"].is_f64(), "{futex}");
    assert!(json["slowest"][0]["duration_seconds"].as_f64().is_some_and(|seconds| seconds > 0.2), "{json}");
}

/// A hostile log: 200,000 distinct syscall names, 200,000 distinct errnos on one syscall,
/// 1,000 signal names and 5,000 pids with a call each, against small caps. Every table stops at
/// its cap, the rest is counted under "(other names)" (or summed over pids), nothing is lost
/// from the totals, and the text says what was capped. (With no cap, the names took 1.8 GB and
/// the errnos 60 s in a release build; see `Report::capped`.)
#[test]
fn hostile_names_errnos_signals_and_pids_stop_at_their_caps() {
    use std::fmt::Write as _;
    let mut log = String::new();
    for i in 0..200_000 {
        let _ = writeln!(log, "1 sys{i:07}(1) = 0 <0.000001>");
    }
    for i in 0..200_000 {
        let _ = writeln!(log, "2 open(\"/x\", O_RDONLY) = -1 E{i:07} (No such thing) <0.000001>");
    }
    for i in 0..1_000 {
        let _ = writeln!(log, "3 --- SIGX{i:04} {{si_signo=1}} ---");
    }
    for pid in 10..5_010 {
        let _ = writeln!(log, "{pid} getpid() = {pid} <0.000001>");
    }
    let config = AnalyzerConfig {
        max_syscalls: 100,
        max_errnos: 20,
        max_signals: 50,
        max_pids: 1_000,
        ..AnalyzerConfig::default()
    };
    let mut analyzer = Analyzer::new(config);
    analyzer.begin_source("hostile.log", None);
    feed_reader(&mut analyzer, log.as_bytes()).expect("reads");
    let report = report::build(analyzer.finish());

    assert_eq!(report.syscalls.len(), 101, "100 names and the other names");
    let other = syscall(&report, proctor_strace::analyze::OTHER_NAMES);
    // Names beyond the first 100: the sys* ones, and open and getpid, which came later.
    assert_eq!(other.count, 200_000 - 100 + 200_000 + 5_000, "sys0000099 was the 100th name");
    assert_eq!(report.calls, 405_000, "every call is counted somewhere");
    assert_eq!(report.capped.syscall_lines, other.count);
    assert_eq!(other.errnos.len(), 21, "20 errnos and the other names");
    assert_eq!(other.errnos.iter().find(|e| e.name == "(other names)").map(|e| e.count), Some(200_000 - 20));
    assert_eq!(report.capped.errnos, 200_000 - 20);
    assert_eq!(report.signals.len(), 51);
    assert_eq!(report.capped.signals, 950);
    assert_eq!(report.pids.len(), 1_000);
    let beyond = report.capped.pids_other.as_ref().expect("pids beyond the cap are summed");
    assert_eq!(beyond.calls, 5_000 - (1_000 - 3), "pids 1 to 3 took three of the 1,000");
    let text = report.render_text(20);
    assert!(text.contains("Capped"), "{text}");
    assert!(text.contains("call lines under syscall names beyond the first 100"), "{text}");
    assert!(text.contains("errors under errnos beyond the first 20"), "{text}");
}

/// A line over 1 MiB is read as its first MiB, and the report says so.
#[test]
fn a_giant_line_is_cut_and_counted() {
    let line = format!("1 read(3, \"{}\", 3000000) = 3000000 <0.000001>\n", "a".repeat(3_000_000));
    let log = format!("1 getpid() = 1 <0.000001>\n{line}1 getpid() = 1 <0.000001>\n");
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    analyzer.begin_source("giant.log", None);
    // Through a small buffer, so the giant line straddles many fills.
    feed_reader(&mut analyzer, std::io::BufReader::with_capacity(4096, log.as_bytes())).expect("reads");
    let report = report::build(analyzer.finish());
    assert_eq!((report.lines, report.lines_cut), (3, 1));
    assert_eq!(syscall(&report, "getpid").count, 2, "the lines around it are whole");
    assert!(report.render_text(10).contains("1 lines longer than 1 MiB were cut"), "{}", report.render_text(10));
}
