//! Waits with a limit, for tests that start `proctor` and talk to it: no test here may hang. A
//! child that never prints what is awaited, a reply that never comes, a process that ignores
//! SIGTERM: each becomes a failure that says what was awaited and what came instead. (Under
//! qemu-aarch64 on a slow machine a wait without a limit once held the whole suite past CI's
//! deadline.)

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a started `proctor` gets to say its first lines, or to stop after SIGTERM: far more
/// than a native run needs, enough for an emulated one on a loaded machine.
pub(crate) const STARTUP: Duration = Duration::from_secs(60);

/// A child's stderr, read to its end on a thread of its own so that the child never blocks on a
/// full pipe whether or not the test reads on; the lines come through a channel.
pub(crate) struct StderrLines {
    lines: Receiver<String>,
    /// Every line taken so far, in order.
    pub(crate) seen: String,
}

impl StderrLines {
    /// Takes the child's piped stderr (panics if it was not piped).
    pub(crate) fn take(child: &mut Child) -> StderrLines {
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || loop {
            let mut line = String::new();
            match stderr.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if send.send(line).is_err() {
                        // Nobody listens any more: keep draining so the child never blocks.
                        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                        return;
                    }
                }
            }
        });
        StderrLines { lines, seen: String::new() }
    }

    /// Lines until `pick` finds what it wants in one, for at most `limit`; panics naming `what`
    /// and the lines that did come when the stream ends or the time is up first.
    pub(crate) fn until<T>(&mut self, what: &str, limit: Duration, mut pick: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    if let Some(found) = pick(&line) {
                        return found;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {what} within {limit:?}; stderr so far: {}", self.seen),
                Err(RecvTimeoutError::Disconnected) => panic!("stderr ended before {what}: {}", self.seen),
            }
        }
    }

    /// `proctor serve`'s address (`127.0.0.1:PORT`) from its `listening on http://…/` line.
    pub(crate) fn address(&mut self) -> String {
        self.until("address printed by serve", STARTUP, |line| {
            line.split("listening on http://").nth(1).and_then(|rest| rest.split('/').next()).map(str::to_string)
        })
    }

    /// The lines not taken yet, up to the end of the stream or `limit` (call it once the child
    /// has ended; a grandchild holding the pipe open cannot hold the test).
    pub(crate) fn rest(&mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let mut rest = String::new();
        while let Ok(line) = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            rest.push_str(&line);
        }
        self.seen.push_str(&rest);
        rest
    }
}

/// Waits for the child to exit, for at most `limit`; past it, kills the child (a pid the test
/// started) and panics naming `what`.
pub(crate) fn wait_at_most(child: &mut Child, what: &str, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to a child the test started, then its exit status within [`STARTUP`].
pub(crate) fn terminate(child: &mut Child, what: &str) -> ExitStatus {
    // SAFETY: kill(2) with the pid of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_at_most(child, &format!("{what} after SIGTERM"), STARTUP)
}

/// The limits hold: a child that prints something else and then stays silent fails the wait
/// within its limit, naming what came, and a child that ignores SIGTERM is killed at the limit.
#[test]
fn a_silent_or_stubborn_child_fails_the_wait_instead_of_holding_it() {
    use std::process::{Command, Stdio};
    let mut child = super::Guard(
        Command::new("sh")
            .args(["-c", "trap '' TERM; echo not the address >&2; exec sleep 30"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh"),
    );
    let mut stderr = StderrLines::take(&mut child.0);
    let started = Instant::now();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stderr.until("the address", Duration::from_millis(500), |l| l.contains("http://").then_some(()))
    }));
    let message = *waited.expect_err("no address came").downcast::<String>().expect("a message");
    assert!(message.contains("no the address within") && message.contains("not the address"), "{message}");
    let stubborn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: kill(2) with the pid of the child started above.
        unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
        wait_at_most(&mut child.0, "sh ignoring TERM", Duration::from_millis(500))
    }));
    let message = *stubborn.expect_err("it ignores TERM").downcast::<String>().expect("a message");
    assert!(message.contains("still running after") && message.contains("killed"), "{message}");
    assert!(child.0.try_wait().expect("try_wait").is_some(), "killed and reaped");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}
