//! SIGINT and SIGTERM for the long-running commands (`serve`, `record`, `statsd`, `probe`).
//!
//! The signals are blocked in the calling thread *before* any other thread starts, so every
//! thread inherits the mask and only one waiter receives them: no handler runs in the middle of
//! a sample, a flush or a store write. What this module does not do: decide what stopping
//! means (each command says that when the waiter returns).

use anyhow::bail;

/// SIGINT and SIGTERM, blocked in this thread (and every thread it starts afterwards).
#[derive(Debug)]
pub struct Signals {
    set: libc::sigset_t,
}

/// Blocks SIGINT and SIGTERM; call before starting threads.
pub fn block() -> anyhow::Result<Signals> {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use; pthread_sigmask
    // only changes this thread's mask (inherited by threads spawned afterwards).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!("cannot block SIGINT/SIGTERM: {}", std::io::Error::from_raw_os_error(rc));
        }
        Ok(Signals { set })
    }
}

impl Signals {
    /// Waits until SIGINT or SIGTERM arrives.
    pub fn wait(&self) {
        let mut signal: libc::c_int = 0;
        // SAFETY: `set` was initialised by `block` and the signals are blocked in every thread.
        unsafe {
            libc::sigwait(&self.set, &mut signal);
        }
    }

    /// Starts a thread named `name` that waits for a signal and then runs `then` (which sends
    /// the command's own stop message).
    pub fn on_signal(self, name: &str, then: impl FnOnce() + Send + 'static) -> anyhow::Result<()> {
        use anyhow::Context;
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                self.wait();
                then();
            })
            .context("cannot start the signal thread")?;
        Ok(())
    }
}
