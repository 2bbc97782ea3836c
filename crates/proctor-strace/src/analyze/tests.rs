//! Tests of the analyzer's internals; what it finds, through the report, is tested on
//! hand-written logs in `tests/it/hand_written.rs` and on captured logs in `tests/it/main.rs`.

use super::*;

/// `finish` hands over what [`Tally`] documents: syscalls and paths in order of first
/// appearance, pids by pid, the slowest calls slowest first (of equal ones the earlier first)
/// and the two settings the report needs.
#[test]
fn finish_hands_over_the_tally_in_its_documented_orders() {
    let config = AnalyzerConfig { slowest: 3, slow_threshold_ns: 5_000_000, ..AnalyzerConfig::default() };
    let mut analyzer = Analyzer::new(config);
    for line in [
        "30 read(3</b>, \"x\", 1) = 1 <0.010000>",
        "20 write(4</a>, \"xy\", 2) = 2 <0.020000>",
        "10 read(3</b>, \"x\", 1) = 1 <0.010000>",
        "20 close(4</a>) = 0 <0.001000>",
    ] {
        analyzer.feed_line(line.as_bytes());
    }
    let tally = analyzer.finish();
    let names: Vec<&str> = tally.syscalls.iter().map(|syscall| syscall.name.as_str()).collect();
    assert_eq!(names, ["read", "write", "close"]);
    let paths: Vec<(&str, u64, u64)> =
        tally.paths.iter().map(|(path, stats)| (path.as_str(), stats.calls, stats.bytes)).collect();
    assert_eq!(paths, [("/b", 2, 2), ("/a", 2, 2)]);
    assert_eq!(tally.pids.keys().copied().collect::<Vec<u32>>(), [10, 20, 30]);
    let slowest: Vec<(u64, u64)> = tally.slowest.iter().map(|call| (call.duration_ns, call.line)).collect();
    assert_eq!(slowest, [(20_000_000, 2), (10_000_000, 1), (10_000_000, 3)]);
    assert_eq!((tally.lines, tally.sources.len(), tally.without_duration), (4, 1, 0));
    assert_eq!(tally.slow_threshold_ns, 5_000_000);
    assert_eq!(tally.modes, AnalyzerConfig::default().modes);
}

#[test]
fn path_table_finds_every_path_it_added_and_stops_at_its_cap() {
    // Lengths 0 to 40 cover the short-word, one-word and many-word hashing paths, and 1000
    // paths make the table grow several times.
    let paths: Vec<Vec<u8>> =
        (0..1000u32).map(|index| format!("/p{index}").repeat(index as usize % 9).into_bytes()).collect();
    let distinct: std::collections::BTreeSet<&[u8]> = paths.iter().map(Vec::as_slice).collect();
    let mut table = PathTable::default();
    for round in 0..2 {
        for path in &paths {
            if let Some(stats) = table.get_or_insert(path, 700) {
                stats.calls += 1;
            }
        }
        assert_eq!(table.entries.len(), 700.min(distinct.len()), "round {round}");
    }
    for (path, stats) in &table.entries {
        let copies = paths.iter().filter(|candidate| candidate[..] == path[..]).count() as u64;
        assert_eq!(stats.calls, 2 * copies, "{}", String::from_utf8_lossy(path));
    }
    let tracked: std::collections::BTreeSet<&[u8]> = table.entries.iter().map(|(path, _)| &path[..]).collect();
    assert_eq!(tracked.len(), table.entries.len(), "a path was added twice");
}

#[test]
fn same_bytes_is_slice_equality() {
    let samples: Vec<Vec<u8>> = (0..40usize)
        .flat_map(|len| {
            let base: Vec<u8> = (0..len).map(|at| b'a' + (at % 26) as u8).collect();
            let mut changed = base.clone();
            if let Some(last) = changed.last_mut() {
                *last = b'#';
            }
            let mut first_changed = base.clone();
            if let Some(first) = first_changed.first_mut() {
                *first = b'#';
            }
            let mut middle_changed = base.clone();
            if len > 0 {
                middle_changed[len / 2] = b'#';
            }
            [base, changed, first_changed, middle_changed]
        })
        .collect();
    for a in &samples {
        for b in &samples {
            assert_eq!(same_bytes(a, b), a == b, "{:?} {:?}", String::from_utf8_lossy(a), String::from_utf8_lossy(b));
        }
    }
}
