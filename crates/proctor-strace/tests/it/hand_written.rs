//! The analyzer and the report on hand-written logs, one behaviour per test. They check what
//! the analyzer finds through the report, which `analyze` does not know, so they live here
//! rather than beside the analyzer.

use proctor_strace::parse::TimeKind;
use proctor_strace::{feed_reader, report, Analyzer, AnalyzerConfig, Report};

use crate::syscall;

fn analyze(text: &str) -> Report {
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    feed_reader(&mut analyzer, text.as_bytes()).expect("in-memory read");
    report::build(analyzer.finish())
}

#[test]
fn pairs_interleaved_halves_per_pid() {
    let report = analyze(
        "10 12:00:00.000000 futex(0x1, FUTEX_WAIT, 0, NULL <unfinished ...>\n\
         11 12:00:00.100000 futex(0x2, FUTEX_WAIT, 0, NULL <unfinished ...>\n\
         11 12:00:00.350000 <... futex resumed>) = 0 <0.250000>\n\
         10 12:00:00.500000 <... futex resumed>) = -1 ETIMEDOUT (Connection timed out) <0.500000>\n",
    );
    let futex = syscall(&report, "futex");
    assert_eq!(futex.count, 2);
    assert_eq!(futex.errors, 1);
    assert_eq!(futex.errnos[0].name, "ETIMEDOUT");
    assert!((futex.total_seconds - 0.75).abs() < 1e-9);
    assert_eq!(report.orphans.unfinished + report.orphans.resumed, 0);
    // The slowest call is reported at its start line, with both halves' arguments.
    let slowest = &report.slowest[0];
    assert_eq!((slowest.line, slowest.pid), (1, Some(10)));
    assert_eq!(slowest.time.as_deref(), Some("12:00:00.000000"));
    assert!(slowest.args.starts_with("0x1, FUTEX_WAIT"), "{}", slowest.args);
}

#[test]
fn orphans_of_both_halves_are_reported_not_dropped() {
    let report = analyze(
        "20 read(0, <unfinished ...>\n\
         21 <... write resumed>) = 5 <0.100000>\n\
         22 poll([{fd=3}], 1, -1 <unfinished ...>\n\
         22 +++ killed by SIGKILL +++\n",
    );
    assert_eq!(report.orphans.unfinished, 1);
    assert_eq!(report.orphans.resumed, 1);
    assert_eq!(report.orphans.unfinished_at_exit, 1);
    assert_eq!(syscall(&report, "write").count, 1);
    assert_eq!(syscall(&report, "read").unfinished, 1);
    let lines: Vec<u64> = report.orphans.examples.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![2, 1]);
    let pid = report.pids.iter().find(|p| p.pid == 22).expect("pid 22");
    assert_eq!(pid.exit.as_deref(), Some("killed by SIGKILL"));
}

#[test]
fn clock_wraps_at_midnight() {
    let report = analyze(
        "23:59:59.900000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n\
         00:00:00.100000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n",
    );
    let starts: Vec<f64> = report.timeline.buckets.iter().map(|b| b.start_seconds).collect();
    assert_eq!(starts, vec![86_399.0, 86_400.0]);
}

#[test]
fn relative_timestamps_accumulate() {
    let report = analyze(
        "     0.000000 nanosleep({tv_sec=1}, NULL) = 0 <1.000000>\n\
              1.000100 nanosleep({tv_sec=1}, NULL) = 0 <1.000000>\n\
              1.000100 nanosleep({tv_sec=1}, NULL) = 0 <1.000000>\n",
    );
    let starts: Vec<f64> = report.timeline.buckets.iter().map(|b| b.start_seconds).collect();
    assert_eq!(starts, vec![0.0, 1.0, 2.0]);
    assert_eq!(report.timestamps, Some(TimeKind::Relative));
}

#[test]
fn bad_lines_are_counted_with_line_numbers() {
    let report = analyze("close(3) = 0 <0.000001>\ngarbage here\nwrite(1, \"x\"\n");
    assert_eq!(report.bad_lines.count, 2);
    let lines: Vec<u64> = report.bad_lines.examples.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![2, 3]);
    assert_eq!(report.calls, 1);
}

#[test]
fn y_paths_are_summarized_with_bytes() {
    let report = analyze(
        "read(3</etc/hosts>, \"abc\", 4096) = 3 <0.000010>\n\
         read(3</etc/hosts>, \"\", 4096) = 0 <0.000002>\n\
         write(5<TCP:[127.0.0.1:1->127.0.0.1:2]>, \"hello\", 5) = 5 <0.000020>\n\
         fstat(3</etc/hosts>, {st_mode=S_IFREG}) = 0 <0.000001>\n",
    );
    let hosts = report.paths.iter().find(|p| p.path == "/etc/hosts").expect("hosts");
    assert_eq!((hosts.calls, hosts.bytes), (3, 3));
    let socket = report.paths.iter().find(|p| p.path.starts_with("TCP:")).expect("socket");
    assert_eq!(socket.path, "TCP:[127.0.0.1:1->127.0.0.1:2]");
    assert_eq!(socket.bytes, 5);
}

#[test]
fn lines_split_across_buffer_fills_are_joined() {
    let text = "close(3) = 0 <0.000001>\nopenat(AT_FDCWD, \"/x\", O_RDONLY) = -1 ENOENT (No such file) <0.000002>\n";
    for capacity in 1..text.len() {
        let mut analyzer = Analyzer::new(AnalyzerConfig::default());
        let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
        feed_reader(&mut analyzer, reader).expect("in-memory read");
        let report = report::build(analyzer.finish());
        assert_eq!((report.calls, report.bad_lines.count), (2, 0), "capacity {capacity}");
    }
}

#[test]
fn slowest_heap_is_bounded_and_ordered() {
    let mut text = String::new();
    for index in 0..1000 {
        text.push_str(&format!("nanosleep(NULL, NULL) = 0 <0.{index:06}>\n"));
    }
    let report = analyze(&text);
    assert_eq!(report.slowest.len(), 20);
    assert_eq!(report.slowest[0].line, 1000);
    assert_eq!(report.slowest[19].line, 981);
}

#[test]
fn timeline_coarsens_instead_of_growing() {
    let config = AnalyzerConfig { max_timeline_buckets: 8, ..AnalyzerConfig::default() };
    let mut analyzer = Analyzer::new(config);
    for second in 0..100 {
        analyzer.feed_line(format!("{}.0 nanosleep(NULL, NULL) = 0 <0.500000>", 1_700_000_000 + second).as_bytes());
    }
    let report = report::build(analyzer.finish());
    assert!(report.timeline.buckets.len() <= 8);
    assert_eq!(report.timeline.buckets.iter().map(|b| b.count).sum::<u64>(), 100);
}

#[test]
fn many_syscall_names_each_keep_their_own_counts() {
    // 300 names (some longer than the 16 bytes a word key holds) make the name table grow.
    let mut text = String::new();
    for round in 0..2 {
        for index in 0..300 {
            let name =
                if index % 10 == 0 { format!("a_very_long_syscall_name_{index}") } else { format!("call{index}") };
            text.push_str(&format!("{name}({round}) = 0 <0.000001>\n"));
        }
    }
    let report = analyze(&text);
    assert_eq!(report.syscalls.len(), 300);
    assert!(report.syscalls.iter().all(|syscall| syscall.count == 2));
    assert_eq!(syscall(&report, "a_very_long_syscall_name_290").count, 2);
    assert_eq!(syscall(&report, "call7").count, 2);
}

#[test]
fn clock_going_back_less_than_half_a_day_is_not_midnight() {
    // Out-of-order lines from different threads step back a little; only the jump from
    // 23:59 to 00:00 adds a day.
    let report = analyze(
        "12:00:01.000000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n\
         12:00:00.500000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n\
         23:59:59.900000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n\
         00:00:00.100000 nanosleep({tv_sec=0}, NULL) = 0 <0.200000>\n",
    );
    let starts: Vec<f64> = report.timeline.buckets.iter().map(|b| b.start_seconds).collect();
    assert_eq!(starts, vec![43_200.0, 43_201.0, 86_399.0, 86_400.0]);
}

/// Issue 32 item 6: "read: peak at 14.7 µs (392 calls, 100 % of calls, 100 % of time)" beside
/// reads of 286, 385 and 622 ms, and twenty clock_nanosleep calls of exactly 10 ms with no
/// peak line. A peak's shares are those of the calls in the peak, and a cluster of identical
/// durations is a peak.
#[test]
fn peak_shares_count_only_the_peaks_calls_and_identical_durations_are_a_peak() {
    let mut log = String::new();
    // 389 fast reads of 8 to 28 µs, then three slow ones.
    for index in 0..389u32 {
        let micros = 8 + (index * 5) % 21;
        log.push_str(&format!("read(3, \"x\", 1) = 1 <0.{micros:06}>\n"));
    }
    for slow in ["0.286114", "0.385020", "0.622391"] {
        log.push_str(&format!("read(3, \"x\", 1) = 1 <{slow}>\n"));
    }
    // 200 sleeps spread evenly on the log scale from 100 µs to 100 ms (golden-ratio steps),
    // and twenty of exactly 10 ms among them.
    for index in 0..220u32 {
        let seconds = if index % 11 == 5 {
            0.01
        } else {
            let fraction = (f64::from(index) * 0.618_033_988_749_895).fract();
            1e-4 * 1000f64.powf(fraction)
        };
        log.push_str(&format!("clock_nanosleep(CLOCK_MONOTONIC, 0, {{tv_sec=0}}, NULL) = 0 <{seconds:.6}>\n"));
    }
    let report = analyze(&log);

    let read = syscall(&report, "read");
    assert_eq!(read.count, 392);
    let fast = &read.peaks[0];
    assert!(fast.seconds < 30e-6, "{:?}", read.peaks);
    assert_eq!(fast.count, 389, "{:?}", read.peaks);
    let fast_total: f64 = (0..389u32).map(|index| f64::from(8 + (index * 5) % 21) * 1e-6).sum();
    assert!((fast.total_seconds - fast_total).abs() < 1e-9, "{:?}", read.peaks);
    assert!((fast.fraction - 389.0 / 392.0).abs() < 1e-9, "{:?}", read.peaks);
    assert!((fast.time_fraction - fast_total / read.total_seconds).abs() < 1e-9, "{:?}", read.peaks);
    let sentence = report::peak_sentence(read).unwrap_or_default();
    assert!(sentence.contains("(389 calls, 99 % of calls, 1 % of time)"), "{sentence}");

    let sleep = syscall(&report, "clock_nanosleep");
    let ten = sleep.peaks.iter().find(|peak| (peak.seconds - 0.01).abs() < 1e-6);
    let ten = ten.unwrap_or_else(|| panic!("no 10 ms peak: {:?}", sleep.peaks));
    assert_eq!(ten.count, 20, "{:?}", sleep.peaks);
    assert!((ten.total_seconds - 0.2).abs() < 1e-9, "{:?}", sleep.peaks);
    assert!((ten.time_fraction - 0.2 / sleep.total_seconds).abs() < 1e-9, "{:?}", sleep.peaks);
    let text = report.render_text(20);
    assert!(text.contains("clock_nanosleep: peak"), "{text}");
    assert!(text.contains("10.0 ms (20 calls, 9 % of calls"), "{text}");
}
