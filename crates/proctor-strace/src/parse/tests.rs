//! One `check` per shape of strace line; the property test feeds arbitrary bytes.

use super::*;

fn call(line: &str) -> (Option<u32>, Call<'_>) {
    match parse_line(line.as_bytes()) {
        Ok(Line { pid, event: Event::Call(call), .. }) => (pid, call),
        other => panic!("{line:?} parsed as {other:?}"),
    }
}

#[test]
fn plain_call_with_duration() {
    let (pid, call) = call("write(1, \"hi\\n\", 3) = 3 <0.000012>");
    assert_eq!(pid, None);
    assert_eq!(call.name, b"write");
    assert_eq!(call.part, Part::Whole);
    assert_eq!(call.args, b"1, \"hi\\n\", 3");
    assert_eq!(call.result, Some(CallResult::Value(3)));
    assert_eq!(call.duration_ns, Some(12_000));
}

#[test]
fn pid_column_and_clock() {
    let line = parse_line(b"4242  12:34:56.789012 getpid() = 4242 <0.000003>").expect("parses");
    assert_eq!(line.pid, Some(4242));
    let timestamp = line.timestamp.expect("timestamp");
    assert_eq!(timestamp.kind, TimeKind::Clock);
    assert!((timestamp.seconds - 45296.789012).abs() < 1e-6);
    assert_eq!(timestamp.text, b"12:34:56.789012");
}

#[test]
fn bracket_pid_epoch_and_relative() {
    let line = parse_line(b"[pid  77] 1700000000.250000 close(3) = 0").expect("parses");
    assert_eq!(line.pid, Some(77));
    let timestamp = line.timestamp.expect("timestamp");
    assert_eq!(timestamp.kind, TimeKind::Epoch);
    assert!((timestamp.seconds - 1_700_000_000.25).abs() < 1e-3);

    let line = parse_line(b"     0.000123 close(3) = 0 <0.000002>").expect("parses");
    assert_eq!(line.pid, None);
    assert_eq!(line.timestamp.map(|t| t.kind), Some(TimeKind::Relative));
    let line = parse_line(b"12 0.5 close(3) = 0").expect("parses");
    assert_eq!(line.pid, Some(12));
    assert_eq!(line.timestamp.map(|t| t.seconds), Some(0.5));
    let line = parse_line(b"12:00:01 close(3) = 0").expect("parses");
    assert_eq!(line.timestamp.map(|t| t.seconds), Some(43201.0));
}

#[test]
fn errors_and_interrupted() {
    let (_, open) = call("openat(AT_FDCWD, \"/nope\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>");
    assert_eq!(open.result, Some(CallResult::Error { errno: b"ENOENT" }));
    assert_eq!(open.duration_ns, Some(10_000));
    let (_, read) = call("read(0, 0x7ffd, 10) = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.500000>");
    assert_eq!(read.result, Some(CallResult::Interrupted { errno: b"ERESTARTSYS" }));
    let (_, exit) = call("exit_group(0)                     = ?");
    assert_eq!(exit.result, Some(CallResult::Unknown));
    assert_eq!(exit.duration_ns, None);
    let (_, mmap) = call("mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f12a000 <0.000004>");
    assert_eq!(mmap.result, Some(CallResult::Value(0x7f12a000)));
}

#[test]
fn y_decorations_keep_the_last_angle_brackets_as_duration() {
    let (_, read) = call("read(3</etc/passwd>, \"root:x:0:0<>\"..., 4096) = 1234 <0.000021>");
    assert_eq!(read.args, b"3</etc/passwd>, \"root:x:0:0<>\"..., 4096");
    assert_eq!(read.duration_ns, Some(21_000));
    let (_, open) = call("openat(AT_FDCWD</tmp>, \"x\", O_RDONLY) = 3</tmp/x>");
    assert_eq!(open.result, Some(CallResult::Value(3)));
    assert_eq!(open.duration_ns, None);
    let (_, open) = call("openat(AT_FDCWD</tmp>, \"x\", O_RDONLY) = 3</tmp/x> <0.000030>");
    assert_eq!(open.duration_ns, Some(30_000));
    let (_, socket) = call("sendto(5<TCP:[127.0.0.1:40000->127.0.0.1:80]>, \"GET\", 3, 0, NULL, 0) = 3 <0.000040>");
    assert_eq!(socket.duration_ns, Some(40_000));
}

#[test]
fn unfinished_and_resumed_halves() {
    let (pid, first) = call("101   futex(0x55d0, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>");
    assert_eq!(pid, Some(101));
    assert_eq!(first.part, Part::Unfinished);
    assert_eq!(first.args, b"0x55d0, FUTEX_WAIT_PRIVATE, 2, NULL");
    assert_eq!(first.result, None);
    let (pid, second) = call("101   <... futex resumed>) = 0 <0.250123>");
    assert_eq!(pid, Some(101));
    assert_eq!(second.part, Part::Resumed);
    assert_eq!(second.name, b"futex");
    assert_eq!(second.result, Some(CallResult::Value(0)));
    assert_eq!(second.duration_ns, Some(250_123_000));
    let (_, restart) = call("restart_syscall(<... resuming interrupted clock_nanosleep ...>) = 0 <0.3>");
    assert_eq!(restart.name, b"restart_syscall");
    assert_eq!(restart.duration_ns, Some(300_000_000));
}

#[test]
fn signals_exits_and_notes() {
    fn event(text: &str) -> Result<Event<'_>, BadLine> {
        parse_line(text.as_bytes()).map(|line| line.event)
    }
    assert_eq!(
        event("9 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=10} ---"),
        Ok(Event::Signal { name: b"SIGCHLD" })
    );
    assert_eq!(event("--- stopped by SIGTSTP ---"), Ok(Event::Signal { name: b"SIGTSTP" }));
    assert_eq!(event("10 +++ exited with 3 +++"), Ok(Event::Exited { code: 3 }));
    assert_eq!(event("+++ killed by SIGKILL (core dumped) +++"), Ok(Event::Killed { signal: b"SIGKILL" }));
    assert_eq!(event("strace: Process 10 attached"), Ok(Event::Note));
    assert_eq!(event("   \r"), Ok(Event::Note));
}

#[test]
fn bad_lines_have_reasons() {
    let reason = |text: &[u8]| parse_line(text).err();
    assert_eq!(reason(b"write(1, \"abc\", 3"), Some(BadLine::NoResult));
    assert_eq!(reason(b"hello world"), Some(BadLine::Unrecognized));
    assert_eq!(reason(b"\x00\x01\x02ELF"), Some(BadLine::Binary));
    assert_eq!(reason(b"[pid abc] close(1) = 0"), Some(BadLine::Pid));
    assert_eq!(reason(b"99999999999 close(1) = 0"), Some(BadLine::Pid));
    assert_eq!(reason(b"+++ exited with x +++"), Some(BadLine::Status));
    assert_eq!(reason(b"--- nothing ---"), Some(BadLine::Status));
    assert_eq!(reason(b"<... futex resumed"), Some(BadLine::Unrecognized));
}

/// SplitMix64, so the property test is the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn never_panics_on_random_bytes_or_mangled_lines() {
    let seeds: &[&[u8]] = &[
        b"1234  12:34:56.789012 futex(0x1, FUTEX_WAIT, 0, {tv_sec=0}) = -1 ETIMEDOUT (x) <0.250000>",
        b"[pid 7] <... read resumed>\"a\", 1) = 1 <0.000001>",
        b"1.5 openat(AT_FDCWD</a>, \"b\") = 3</a/b> <0.1>",
        b"+++ killed by SIGKILL +++",
        b"--- SIGINT {si_signo=SIGINT} ---",
    ];
    let alphabet = b"0123456789 .:<>()[]=-+?\"\\,xEIpdresumfnih\t\r";
    let mut state = 42u64;
    let mut accepted = 0;
    for round in 0..200_000 {
        let mut line: Vec<u8> = match round % 3 {
            // Pure random bytes.
            0 => (0..next(&mut state) % 80).map(|_| next(&mut state) as u8).collect(),
            // Random strace-ish characters.
            1 => (0..next(&mut state) % 80)
                .map(|_| alphabet[(next(&mut state) % alphabet.len() as u64) as usize])
                .collect(),
            // A real line cut, spliced and mutated.
            _ => seeds[(next(&mut state) % seeds.len() as u64) as usize].to_vec(),
        };
        if round % 3 == 2 && !line.is_empty() {
            for _ in 0..=(next(&mut state) % 4) {
                let at = (next(&mut state) % line.len() as u64) as usize;
                match next(&mut state) % 3 {
                    0 => line.truncate(at),
                    1 => line[at] = alphabet[(next(&mut state) % alphabet.len() as u64) as usize],
                    _ => line.insert(at, next(&mut state) as u8),
                }
                if line.is_empty() {
                    break;
                }
            }
        }
        if parse_line(&line).is_ok() {
            accepted += 1;
        }
    }
    // Some mutated lines must still parse, or the generator only tested the error path.
    assert!(accepted > 1000, "{accepted}");
}

#[test]
fn fixed_offset_duration_agrees_with_the_general_parser() {
    // The fast path must either decline or give exactly what `take_duration` gives.
    let tails: &[&[u8]] = &[
        b"3, \"x\", 1) = 1 <0.000012>",
        b") = -1 ETIMEDOUT (Connection timed out) <1.000321>",
        b"x) = 3</tmp/x> <9.999999>",
        b"x) = 0  <0.000012>",
        b"x) = 0\t<0.000012>",
        b" <0.000012>",
        b"x <0.00001>",
        b"x <10.000012>",
        b"x <0.0000a2>",
        b"x <0,000012>",
        b"x) = 0 <0.000012> ",
    ];
    let mut used = 0;
    for tail in tails {
        if let Some((rest, ns)) = take_duration_micros(tail) {
            used += 1;
            assert_eq!(take_duration(tail), (rest, Some(ns)), "{}", String::from_utf8_lossy(tail));
        }
    }
    assert_eq!(used, 3);
    // Random prefixes before a random ` <d.dddddd>`, with up to two bytes replaced.
    let alphabet = b"0123456789 .<>\t=";
    let pick = |state: &mut u64| alphabet[(next(state) % alphabet.len() as u64) as usize];
    let mut state = 7u64;
    let mut used = 0;
    for _ in 0..100_000 {
        let mut tail: Vec<u8> = (0..next(&mut state) % 4).map(|_| pick(&mut state)).collect();
        tail.extend_from_slice(format!(" <{}.{:06}>", next(&mut state) % 10, next(&mut state) % 1_000_000).as_bytes());
        for _ in 0..next(&mut state) % 3 {
            let at = (next(&mut state) % tail.len() as u64) as usize;
            tail[at] = pick(&mut state);
        }
        if let Some((rest, ns)) = take_duration_micros(&tail) {
            used += 1;
            assert_eq!(take_duration(&tail), (rest, Some(ns)), "{}", String::from_utf8_lossy(&tail));
        }
    }
    assert!(used > 10_000, "{used}");
}

#[test]
fn backwards_decimal_result_agrees_with_the_general_parser() {
    fn general(tail: &[u8]) -> Option<(usize, CallResult<'_>)> {
        rfind_equals(tail).map(|equals| (equals, parse_result(trim_start(&tail[equals + 3..]))))
    }
    let tails: &[&[u8]] = &[
        b"3, \"x\", 1) = 1",
        b"x) = 0",
        b"x) = 123456789012345678",
        b"x) = 1234567890123456789",
        b"x) = -1 ENOENT (No such file or directory)",
        b"x) = 0x7f00",
        b"x) = 3</tmp/x>",
        b"x) =1",
        b"x)= 1",
        b" = 5",
        b"= 5",
        b"x) = ",
        b"a = 1 = 2",
    ];
    let mut used = 0;
    for tail in tails {
        if let Some(found) = take_decimal_result(tail) {
            used += 1;
            assert_eq!(Some(found), general(tail), "{}", String::from_utf8_lossy(tail));
        }
    }
    assert_eq!(used, 5);
    // Random ` = digits` endings with up to two bytes replaced.
    let alphabet = b"0123456789 =-x<>()E";
    let pick = |state: &mut u64| alphabet[(next(state) % alphabet.len() as u64) as usize];
    let mut state = 11u64;
    used = 0;
    for _ in 0..100_000 {
        let mut tail: Vec<u8> = (0..next(&mut state) % 4).map(|_| pick(&mut state)).collect();
        tail.extend_from_slice(b" = ");
        tail.extend((0..1 + next(&mut state) % 20).map(|_| b'0' + (next(&mut state) % 10) as u8));
        for _ in 0..next(&mut state) % 3 {
            let at = (next(&mut state) % tail.len() as u64) as usize;
            tail[at] = pick(&mut state);
        }
        if let Some(found) = take_decimal_result(&tail) {
            used += 1;
            assert_eq!(Some(found), general(&tail), "{}", String::from_utf8_lossy(&tail));
        }
    }
    assert!(used > 10_000, "{used}");
}

#[test]
fn word_at_a_time_clock_agrees_with_the_general_parser() {
    // Every line the fast path takes must read the same as through `parse_clock`.
    let alphabet = b"0123456789:. x";
    let pick = |state: &mut u64| alphabet[(next(state) % alphabet.len() as u64) as usize];
    let mut state = 5u64;
    let mut used = 0;
    for _ in 0..100_000 {
        let clock = format!(
            "{:02}:{:02}:{:02}.{:06} ",
            next(&mut state) % 30,
            next(&mut state) % 70,
            next(&mut state) % 70,
            next(&mut state) % 1_000_000
        );
        let mut text = clock.into_bytes();
        for _ in 0..next(&mut state) % 3 {
            let at = (next(&mut state) % text.len() as u64) as usize;
            text[at] = pick(&mut state);
        }
        if let Some((Some(timestamp), _)) = take_clock_micros(&text) {
            used += 1;
            assert_eq!(timestamp.text, &text[..15]);
            let seconds = parse_clock(&text[..15]).expect("the general parser accepts it");
            assert_eq!(timestamp.seconds.to_bits(), seconds.to_bits(), "{}", String::from_utf8_lossy(&text));
        } else {
            let shaped = text.iter().enumerate().all(|(at, &byte)| match at {
                2 | 5 => byte == b':',
                8 => byte == b'.',
                15 => byte == b' ',
                _ => byte.is_ascii_digit(),
            });
            let general = parse_clock(&text[..15]);
            assert!(!shaped || general.is_none(), "declined {:?}, read as {general:?}", String::from_utf8_lossy(&text));
        }
    }
    assert!(used > 10_000, "{used}");
}
