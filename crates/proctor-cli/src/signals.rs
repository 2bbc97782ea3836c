//! SIGINT and SIGTERM for the long-running commands (`serve`, `record`, `statsd`, `probe`), and
//! SIGHUP: a command that says what it means ([`Signals::on_hangup`]: `serve` reloads its alert
//! rules) gets that; for the others it stops them as SIGTERM does. A second signal while
//! stopping exits at once, but the same signal again within 250 ms is one signal delivered twice.
//!
//! The signals are blocked in the calling thread *before* any other thread starts, so every
//! thread inherits the mask and only one waiter receives them: no handler runs in the middle of
//! a sample, a flush or a store write. What this module does not do: decide what stopping
//! means (each command says that when the waiter returns).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// What the waiter does with a signal.
enum Handler {
    /// Nothing to stop yet (start-up: opening a store, binding): exit at once.
    Exit,
    /// The command's stop action, run on the first signal.
    Stop(Box<dyn FnOnce() + Send>),
    /// The stop action ran already on `signal` at `at`: a second signal exits without waiting
    /// for it to finish, unless it is the same signal again within [`SAME_SIGNAL`].
    Stopping { signal: libc::c_int, at: Instant },
}

/// The same signal again within this is the same one delivered twice (GNU `timeout` signals
/// the command, then its whole process group), not a person asking a second time.
const SAME_SIGNAL: Duration = Duration::from_millis(250);

/// SIGINT and SIGTERM, blocked in this thread (and every thread it starts afterwards), and
/// the one thread that waits for them.
pub struct Signals {
    handler: Arc<Mutex<Handler>>,
    hangup: Arc<Mutex<Option<Hangup>>>,
}

type Hangup = Box<dyn Fn() + Send>;

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signals").finish_non_exhaustive()
    }
}

/// Blocks SIGINT and SIGTERM and starts their waiter; call before starting other threads.
/// From here on a signal is never left waiting behind a call that can block (a store being
/// opened, a socket being bound): until [`Signals::on_signal`] says what stopping means, a
/// signal ends the process at once, and a second signal always does.
pub fn block() -> anyhow::Result<Signals> {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use; pthread_sigmask
    // only changes this thread's mask (inherited by threads spawned afterwards).
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!("cannot block SIGINT/SIGTERM/SIGHUP: {}", std::io::Error::from_raw_os_error(rc));
        }
        set
    };
    let handler = Arc::new(Mutex::new(Handler::Exit));
    let hangup: Arc<Mutex<Option<Hangup>>> = Arc::new(Mutex::new(None));
    let waiter = Arc::clone(&handler);
    let on_hup = Arc::clone(&hangup);
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || loop {
            let signal = wait(&set);
            if signal == libc::SIGHUP {
                if let Some(hup) = on_hup.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
                    hup();
                    continue;
                }
            }
            let name = match signal {
                libc::SIGINT => "SIGINT",
                libc::SIGHUP => "SIGHUP",
                _ => "SIGTERM",
            };
            let mut slot = waiter.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Handler::Stopping { signal: first, at } = &*slot {
                if *first == signal && at.elapsed() < SAME_SIGNAL {
                    continue;
                }
            }
            match std::mem::replace(&mut *slot, Handler::Stopping { signal, at: Instant::now() }) {
                Handler::Exit => {
                    eprintln!("proctor: {name} while starting: exiting");
                    std::process::exit(128 + signal);
                }
                Handler::Stop(stop) => {
                    drop(slot);
                    stop();
                }
                Handler::Stopping { .. } => {
                    eprintln!("proctor: a second {name}: exiting without finishing");
                    std::process::exit(128 + signal);
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(Signals { handler, hangup })
}

/// Waits until SIGINT, SIGTERM or SIGHUP arrives; returns which.
fn wait(set: &libc::sigset_t) -> libc::c_int {
    let mut signal: libc::c_int = 0;
    // SAFETY: `set` was initialised by `block` and the signals are blocked in every thread.
    // sigwait fails only for an invalid set; it is retried then as on an interruption.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
    signal
}

impl Signals {
    /// Says what SIGHUP does from now on (instead of stopping): `serve` reloads its rules.
    pub fn on_hangup(&self, then: impl Fn() + Send + 'static) {
        *self.hangup.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(then));
    }

    /// Says what the first signal does from now on: `then` sends the command's own stop
    /// message. A signal that came before this call has ended the process already.
    pub fn on_signal(self, then: impl FnOnce() + Send + 'static) {
        let mut slot = self.handler.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Handler::Stop(Box::new(then));
    }
}
