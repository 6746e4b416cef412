//! What ends a `watch` besides `--for`, `q` or an alert: TERM, HUP or INT, and its
//! terminal going away, on the screen and off it alike.
//!
//! The waits between refreshes are one `poll(2)` on the terminal's input and on a pipe
//! the signal handlers write to, so a signal or a closed terminal ends the wait at once
//! and nothing spins. The keys are read here rather than with crossterm's event reader:
//! that reader loops without end when its terminal reaches end of file (a tmux session
//! killed under it), where no signal flag is ever looked at again.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGWINCH};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What ended a wait.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Wake {
    /// The time asked for passed.
    Timeout,
    /// TERM, HUP or INT: its number.
    Signal(i32),
    /// The terminal went away (its input hung up or reached end of file).
    Gone,
    /// The terminal was resized.
    Resized,
    /// Keys typed (raw bytes; only read on the screen).
    Keys(Vec<u8>),
}

/// The signal handlers and the terminal input a wait watches.
pub(super) struct Ends {
    stop: Arc<AtomicUsize>,
    resized: Arc<AtomicBool>,
    wake: UnixStream,
    /// Standard input when it is a terminal; on the screen, else the process's
    /// controlling terminal (as crossterm reads keys).
    tty: Option<RawFd>,
    /// `/dev/tty` when it was opened for that.
    _dev_tty: Option<std::fs::File>,
    /// Whether keys are read (the screen); off it only a hang-up is looked for, so a
    /// `watch` in the background neither takes a person's typing nor stops on SIGTTIN.
    keys: bool,
    registered: Vec<signal_hook::SigId>,
}

impl Ends {
    /// Takes TERM, HUP, INT (and, with `keys`, WINCH) until dropped.
    pub(super) fn new(keys: bool) -> std::io::Result<Ends> {
        let (wake, notify) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        notify.set_nonblocking(true)?;
        let stop = Arc::new(AtomicUsize::new(0));
        let resized = Arc::new(AtomicBool::new(false));
        let mut registered = Vec::new();
        for sig in [SIGTERM, SIGHUP, SIGINT] {
            registered.push(signal_hook::flag::register_usize(
                sig,
                Arc::clone(&stop),
                sig as usize,
            )?);
            registered.push(signal_hook::low_level::pipe::register(
                sig,
                notify.try_clone()?,
            )?);
        }
        if keys {
            registered.push(signal_hook::flag::register(SIGWINCH, Arc::clone(&resized))?);
            registered.push(signal_hook::low_level::pipe::register(SIGWINCH, notify)?);
        }
        let stdin = std::io::stdin();
        let mut dev_tty = None;
        let tty = if std::io::IsTerminal::is_terminal(&stdin) {
            Some(stdin.as_raw_fd())
        } else if keys {
            dev_tty = std::fs::File::open("/dev/tty").ok();
            dev_tty.as_ref().map(AsRawFd::as_raw_fd)
        } else {
            None
        };
        Ok(Ends {
            stop,
            resized,
            wake,
            tty,
            _dev_tty: dev_tty,
            keys,
            registered,
        })
    }

    /// The signal that arrived, if one did.
    pub(super) fn signal(&self) -> Option<i32> {
        match self.stop.load(Ordering::Relaxed) {
            0 => None,
            sig => Some(sig as i32),
        }
    }

    /// Waits up to `timeout` for a signal, the terminal going away, a resize or keys.
    pub(super) fn wait(&mut self, timeout: Duration) -> std::io::Result<Wake> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(sig) = self.signal() {
                return Ok(Wake::Signal(sig));
            }
            if self.resized.swap(false, Ordering::Relaxed) {
                return Ok(Wake::Resized);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Wake::Timeout);
            }
            let mut fds = [
                libc::pollfd {
                    fd: self.wake.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    // A negative fd is ignored by poll.
                    fd: self.tty.unwrap_or(-1),
                    // Hang-ups and errors are reported whatever is asked.
                    events: if self.keys { libc::POLLIN } else { 0 },
                    revents: 0,
                },
            ];
            // Rounded up, so a wait never becomes a spin of zero-millisecond polls.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: poll reads and writes the two pollfd structs we own, for their count.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                self.drain();
            }
            let tty = fds[1].revents;
            if tty & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                return Ok(Wake::Gone);
            }
            if tty & libc::POLLIN != 0 {
                let mut buf = [0u8; 64];
                // SAFETY: read into a buffer we own, at most its length.
                let r = unsafe { libc::read(fds[1].fd, buf.as_mut_ptr().cast(), buf.len()) };
                if r == 0 {
                    return Ok(Wake::Gone);
                }
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    match e.kind() {
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => {
                            continue;
                        }
                        // EIO: the terminal was hung up.
                        _ => return Ok(Wake::Gone),
                    }
                }
                return Ok(Wake::Keys(buf[..r as usize].to_vec()));
            }
        }
    }

    /// Empties the wake-up pipe (each signal wrote a byte).
    fn drain(&mut self) {
        use std::io::Read;
        let mut buf = [0u8; 64];
        while matches!(self.wake.read(&mut buf), Ok(n) if n > 0) {}
    }
}

impl Drop for Ends {
    fn drop(&mut self) {
        for id in self.registered.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Whether typed bytes ask the screen to quit: `q`, Ctrl-C (raw mode sends it as a byte)
/// or a lone Esc. A key that sends an escape sequence (an arrow, F2 = `Esc O Q`) starts
/// with Esc too but never comes alone, and its letters are not keys.
pub(super) fn quit_keys(keys: &[u8]) -> bool {
    match keys {
        [0x1b] => true,
        [0x1b, ..] => false,
        _ => keys.iter().any(|&b| matches!(b, b'q' | b'Q' | 0x03)),
    }
}

#[cfg(test)]
mod tests {
    use super::quit_keys;

    #[test]
    fn q_ctrl_c_and_a_lone_esc_quit_and_an_arrow_does_not() {
        assert!(quit_keys(b"q"));
        assert!(quit_keys(&[0x03]));
        assert!(quit_keys(&[0x1b]));
        assert!(!quit_keys(b"\x1b[A"));
        assert!(!quit_keys(b"\x1bOQ"));
        assert!(!quit_keys(b"x"));
    }
}
