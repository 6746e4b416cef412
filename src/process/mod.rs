//! A bounded child process (SPEC 7.1 items 5, 8, 9, 29): argv without a shell, an added
//! environment, stdin `/dev/null`, stdout passed through, stderr teed (passed through and
//! its last 4 KiB kept), its own process group, a deadline (TERM to the group at
//! `deadline - grace`, KILL at the deadline), and no descendant left behind, also when
//! batchguard itself is killed or frozen.
//!
//! Linux specifics, and why:
//! - The command runs under a supervisor forked from batchguard ([`supervise`]): a child
//!   subreaper that keeps the deadline itself and outlives batchguard, so a descendant
//!   that left the group (`setsid`) is re-parented to it and killed even after a SIGKILL
//!   of batchguard, and the deadline holds while batchguard is stopped. The lock is
//!   released only after [`run`] returns, when the supervisor has reported that no
//!   descendant is left. "None left" is `waitpid` answering ECHILD, and the ones left are
//!   found by walking the kernel's children lists down from the supervisor ([`tree`]): the
//!   clean-up never reads the host's whole process table, so its cost does not grow with
//!   the number of processes on the host.
//! - The command gets `PR_SET_PDEATHSIG(SIGKILL)`: if the supervisor is killed, the command
//!   dies with it; batchguard, a child subreaper too, then clears what is left.
//! - SIGTERM, SIGINT, SIGHUP and SIGCHLD are blocked in batchguard ([`block_signals`],
//!   called before any thread starts) and taken synchronously (`sigtimedwait`, or a
//!   signalfd while the command runs): no handler.
//!
//! [`capture`] is the smaller sibling for a helper program whose output batchguard reads
//! (node evaluating a PM2 ecosystem file): run to completion under a deadline, stdout and
//! stderr captured up to a cap, TERM then KILL to its group when the deadline passes. It
//! waits on its own child only (`waitid` on that pid), so threads may run it side by side;
//! it is not for a process whose signals [`block_signals`] took over.

mod supervise;
mod tree;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How much of stderr a failed `end` keeps.
pub const STDERR_TAIL: usize = 4096;

pub struct Spec<'a> {
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub deadline: Instant,
    pub grace: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Who stopped the command, if anyone did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    No,
    Deadline,
    /// batchguard was told to stop by this signal.
    Interrupted(i32),
}

#[derive(Debug)]
pub struct Outcome {
    pub exit: Exit,
    pub stopped: Stopped,
    pub stderr_tail: Vec<u8>,
}

#[derive(Debug)]
pub enum SpawnError {
    NotFound(String),
    NotExecutable(String),
    Other(String),
}

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a plain C struct we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn all_watched() -> libc::sigset_t {
    sigset(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD])
}

/// Blocks the signals batchguard takes synchronously (stop signals, SIGCHLD) and makes
/// this process a child subreaper, so that what a killed supervisor leaves behind is
/// re-parented to it ([`supervise`]). Call first, before any thread exists, so every thread
/// inherits the mask.
///
/// Transparent huge pages are off for batchguard itself: the allocator is built without
/// them (mimalloc's `no_thp` turns them off for the process before `main`), since each
/// first touch of a 2 MiB region zeroes all of it, about half a millisecond of every
/// `run` for a heap of a few hundred KiB. The command's child turns them back on: the
/// job gets the host's setting.
pub fn block_signals() {
    let set = all_watched();
    // SAFETY: plain syscalls on a set we own; failure leaves the defaults, which is safe.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Waits up to `timeout` for a stop signal; `Some(n)` when one came.
pub fn sleep_unless_stopped(timeout: Duration) -> Option<i32> {
    let until = Instant::now() + timeout;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        if let Some(s) = wait_signal(&sigset(&STOP_SIGNALS), left) {
            return Some(s);
        }
    }
}

/// A stop signal (TERM, INT, HUP) that has arrived, taken without waiting; `None` when
/// none is pending.
pub fn stop_signal_now() -> Option<i32> {
    wait_signal(&sigset(&STOP_SIGNALS), Duration::ZERO)
}

fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: sigtimedwait reads the set and timespec we pass; siginfo may be null.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (s > 0).then_some(s)
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: a signal to a process group we created; ESRCH (gone) is fine.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Runs the command to its end (or its stop) under a supervisor that outlives batchguard
/// ([`supervise`]), and returns once no descendant is left.
pub fn run(spec: &Spec) -> Result<Outcome, SpawnError> {
    let Some(program) = spec.argv.first() else {
        return Err(SpawnError::Other("an empty command".into()));
    };
    let prepared = supervise::Prepared::new(spec)?;
    let mut started = supervise::start(&prepared, spec)?;
    let tee = started.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 8192];
            let mut out = std::io::stderr();
            loop {
                match err.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = out.write_all(&buf[..n]);
                        tail.extend_from_slice(&buf[..n]);
                        if tail.len() > 2 * STDERR_TAIL {
                            tail.drain(..tail.len() - STDERR_TAIL);
                        }
                    }
                }
            }
            if tail.len() > STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
            tail
        })
    });
    let report = supervise::wait(&started, spec);
    let stderr_tail = tee.and_then(|t| t.join().ok()).unwrap_or_default();
    match report {
        supervise::Report::SpawnFailed(errno) => {
            let e = std::io::Error::from_raw_os_error(errno);
            let m = format!("{program}: {e}");
            Err(match e.kind() {
                std::io::ErrorKind::NotFound => SpawnError::NotFound(m),
                std::io::ErrorKind::PermissionDenied => SpawnError::NotExecutable(m),
                _ if errno == libc::ENOEXEC => SpawnError::NotExecutable(m),
                _ => SpawnError::Other(m),
            })
        }
        supervise::Report::Done(outcome) => Ok(Outcome {
            stderr_tail,
            ..outcome
        }),
    }
}

/// A helper program to run to completion and read the output of.
pub struct Capture<'a> {
    pub argv: &'a [std::ffi::OsString],
    pub env: &'a [(String, String)],
    /// Working directory; batchguard's own when `None`.
    pub cwd: Option<&'a std::path::Path>,
    /// From the spawn: KILL to the group when it passes.
    pub timeout: Duration,
    /// TERM this long before the timeout; zero sends KILL alone.
    pub grace: Duration,
    /// Bytes of stdout kept: reading stops after `stdout_cap + 1`, so `len() > cap` tells
    /// that the program printed more, and closes the pipe (the program's further writes fail).
    pub stdout_cap: usize,
    /// The same for stderr.
    pub stderr_cap: usize,
}

/// What a captured program left.
#[derive(Debug)]
pub struct Captured {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The timeout passed and the program was stopped.
    pub timed_out: bool,
}

#[derive(Debug)]
pub enum CaptureError {
    /// The program could not be started (`NotFound` when it is not on PATH).
    Spawn(std::io::Error),
    /// Waiting for it failed; it was killed.
    Wait(std::io::Error),
}

/// Runs `spec.argv` with stdin `/dev/null` in its own process group, to its end or its
/// timeout, and returns its status and capped output.
pub fn capture(spec: &Capture) -> Result<Captured, CaptureError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(CaptureError::Spawn(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an empty command",
        )));
    };
    let started = Instant::now();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    #[cfg(target_os = "linux")]
    unsafe {
        cmd.pre_exec(|| {
            // The forking thread waits for the child, so this fires only if batchguard dies.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(CaptureError::Spawn)?;
    let pid = child.id() as i32;
    let capped = |pipe: Option<Box<dyn Read + Send>>, cap: usize| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(cap as u64 + 1).read_to_end(&mut buf);
            }
            buf // dropping the pipe here makes further writes fail (EPIPE)
        })
    };
    let out = capped(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        spec.stdout_cap,
    );
    let err = capped(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        spec.stderr_cap,
    );
    // A waiter that sees the exit without reaping it (WNOWAIT): until `child.wait()` below
    // the pid cannot be reused, so signalling its group stays safe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(wait_exited(pid));
    });
    // A timeout past what the clock holds is the longest one it does.
    let deadline = started
        .checked_add(spec.timeout)
        .unwrap_or(started + Duration::from_secs(100 * 365 * 86_400));
    let term_at = deadline.checked_sub(spec.grace).unwrap_or(started);
    let left = |at: Instant| at.saturating_duration_since(Instant::now());
    let mut timed_out = false;
    let mut waited = rx.recv_timeout(left(term_at));
    if waited.is_err() && !spec.grace.is_zero() {
        timed_out = true;
        kill_group(pid, libc::SIGTERM);
        waited = rx.recv_timeout(left(deadline));
    }
    if waited.is_err() {
        timed_out = true;
        kill_group(pid, libc::SIGKILL);
        waited = rx
            .recv()
            .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected);
    }
    let status = match waited {
        Ok(Ok(())) => child.wait(),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("the waiter thread ended")),
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CaptureError::Wait(e));
        }
    };
    Ok(Captured {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    })
}

/// Blocks until `pid` (a child of this process) has exited, leaving it unreaped.
fn wait_exited(pid: i32) -> std::io::Result<()> {
    loop {
        // SAFETY: waitid fills a siginfo we own; WNOWAIT leaves the child to be reaped.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The name of a signal number (`TERM`, `KILL`…), for `SIGNAL_<NAME>`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "HUP",
        libc::SIGINT => "INT",
        libc::SIGQUIT => "QUIT",
        libc::SIGILL => "ILL",
        libc::SIGTRAP => "TRAP",
        libc::SIGABRT => "ABRT",
        libc::SIGBUS => "BUS",
        libc::SIGFPE => "FPE",
        libc::SIGKILL => "KILL",
        libc::SIGUSR1 => "USR1",
        libc::SIGSEGV => "SEGV",
        libc::SIGUSR2 => "USR2",
        libc::SIGPIPE => "PIPE",
        libc::SIGALRM => "ALRM",
        libc::SIGTERM => "TERM",
        libc::SIGXCPU => "XCPU",
        libc::SIGXFSZ => "XFSZ",
        libc::SIGSYS => "SYS",
        _ => return format!("{sig}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn sh(script: &str, timeout: Duration, cap: usize) -> Result<Captured, CaptureError> {
        let argv = ["sh".into(), "-c".into(), script.into()];
        capture(&Capture {
            argv: &argv,
            env: &[("BG_TEST".into(), "set".into())],
            cwd: None,
            timeout,
            grace: Duration::ZERO,
            stdout_cap: cap,
            stderr_cap: cap,
        })
    }

    #[test]
    fn capture_reads_both_streams_and_the_status() {
        let c = sh(
            "echo out $BG_TEST; echo err >&2; exit 3",
            Duration::from_secs(30),
            100,
        )
        .expect("sh runs");
        assert_eq!(c.stdout, b"out set\n");
        assert_eq!(c.stderr, b"err\n");
        assert_eq!(c.status.code(), Some(3));
        assert!(!c.timed_out);
    }

    #[test]
    fn capture_stops_reading_past_the_cap() {
        let c = sh("head -c 100000 /dev/zero", Duration::from_secs(30), 10).expect("sh runs");
        assert_eq!(c.stdout.len(), 11, "cap + 1 tells the output went past it");
    }

    #[test]
    fn capture_kills_a_program_past_its_timeout_and_its_group() {
        let c = sh("sleep 30 & sleep 30; wait", Duration::from_millis(100), 10).expect("sh runs");
        assert!(c.timed_out);
        assert_eq!(c.status.signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn capture_says_when_the_program_is_missing() {
        let argv = ["batchguard-no-such-program".into()];
        let e = capture(&Capture {
            argv: &argv,
            env: &[],
            cwd: None,
            timeout: Duration::from_secs(1),
            grace: Duration::ZERO,
            stdout_cap: 1,
            stderr_cap: 1,
        });
        assert!(
            matches!(e, Err(CaptureError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
