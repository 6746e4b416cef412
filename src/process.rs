//! A bounded child process (SPEC 7.1 items 5, 8, 9): argv without a shell, an added
//! environment, stdin `/dev/null`, stdout passed through, stderr teed (passed through and
//! its last 4 KiB kept), its own process group, a deadline (TERM to the group at
//! `deadline - grace`, KILL at the deadline), and no descendant left behind.
//!
//! Linux specifics, and why:
//! - The supervisor is a child subreaper, so a descendant that left the group (`setsid`)
//!   is re-parented to it and can be found and killed; the lock is released only after
//!   [`run`] returns, when no descendant is left. "None left" is `waitpid` answering ECHILD,
//!   and the ones left are found by walking the kernel's children lists down from this
//!   process: the clean-up never reads the host's whole process table, so its cost does not
//!   grow with the number of processes on the host (a job that leaves nothing behind costs
//!   one `waitpid`).
//! - The child gets `PR_SET_PDEATHSIG(SIGKILL)`: if the supervisor is killed, the command
//!   dies with it instead of running on past a lease nobody watches.
//! - SIGTERM, SIGINT, SIGHUP and SIGCHLD are blocked in the supervisor ([`block_signals`],
//!   called before any thread starts) and taken with `sigtimedwait`, which also wakes the
//!   supervisor at the next deadline step: no polling, no handler.
//!
//! [`capture`] is the smaller sibling for a helper program whose output batchguard reads
//! (node evaluating a PM2 ecosystem file): run to completion under a deadline, stdout and
//! stderr captured up to a cap, TERM then KILL to its group when the deadline passes. It
//! waits on its own child only (`waitid` on that pid), so threads may run it side by side;
//! it is not for a process whose signals [`block_signals`] took over.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
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

/// Blocks the signals the supervisor takes synchronously and makes this process a child
/// subreaper. Call first, before any thread exists, so every thread inherits the mask.
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

/// Reaps every exited child; returns the status of `child` when it was among them.
fn reap(child: i32) -> Option<libc::c_int> {
    let mut mine = None;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on any child with WNOHANG; status is ours.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return mine;
        }
        if pid == child {
            mine = Some(status);
        }
    }
}

/// Reaps every exited child and says whether any child is left (`waitpid` ends in ECHILD
/// when none is). As a child subreaper this process inherits every descendant whose parent
/// died, so no child left means no descendant left.
fn children_left() -> bool {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on any child with WNOHANG; status is ours.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            continue;
        }
        if pid == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Every live descendant of this process as `(pid, parent)`, parents before children.
///
/// The kernel's per-thread children lists (`/proc/PID/task/TID/children`) are walked down
/// from this process, so the cost follows the job's own process tree, not the host's
/// process count. A kernel built without those lists (no CONFIG_PROC_CHILDREN) leaves the
/// scan of every process's parent link as the only way to find a descendant by pid.
fn descendants() -> Vec<(i32, i32)> {
    let me = std::process::id() as i32;
    if !std::path::Path::new("/proc/thread-self/children").exists() {
        return descendants_by_scan(me);
    }
    let mut found: Vec<(i32, i32)> = Vec::new();
    let mut seen = std::collections::HashSet::from([me]);
    let mut i = 0;
    let mut parent = Some(me);
    while let Some(p) = parent {
        for c in children_of(p) {
            if seen.insert(c) {
                found.push((c, p));
            }
        }
        parent = found.get(i).map(|&(pid, _)| pid);
        i += 1;
    }
    found
}

/// The children of `pid`, from the lists of each of its threads (a child belongs to the
/// thread that forked it, and an orphan to whichever thread of the subreaper took it).
/// A list read while it changes may miss a child; callers look again until none is left.
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The descendants of `me` found by reading every process's parent link in /proc; only
/// for kernels without children lists (see [`descendants`]).
fn descendants_by_scan(me: i32) -> Vec<(i32, i32)> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_pid(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found: Vec<(i32, i32)> = Vec::new();
    let mut i = 0;
    let mut parent = Some(me);
    while let Some(p) = parent {
        for &(pid, ppid) in &parent_of {
            if ppid == p && pid != me && !found.iter().any(|&(f, _)| f == pid) {
                found.push((pid, p));
            }
        }
        parent = found.get(i).map(|&(pid, _)| pid);
        i += 1;
    }
    found
}

/// The parent of a live (not zombie) process, from `/proc/PID/stat`.
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses).
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    let ppid = f.next()?.parse::<i32>().ok()?;
    (state != "Z").then_some(ppid)
}

/// Sends `sig` to a descendant found under `parent`.
///
/// A child of this process keeps its pid until it is reaped here, so `kill` is safe. A
/// deeper descendant may end, be reaped by its own parent and have its pid reused between
/// the listing and the signal, so it is signalled through a pidfd (see
/// [`signal_by_pidfd`]); `kill` remains only for a kernel without pidfds (before 5.3).
fn signal_descendant(pid: i32, parent: i32, sig: i32) {
    let me = std::process::id() as i32;
    if parent != me && signal_by_pidfd(pid, [parent, me], sig) {
        return;
    }
    // SAFETY: a signal to our own descendant; ESRCH (gone) is fine.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Opens `pid` as a pidfd, checks that it is still a child of one of `parents` and sends
/// `sig` through the pidfd. The check reads `/proc` after the open: if the pid was reused
/// in between, the process the pidfd refers to has ended and the send fails (ESRCH), so
/// a stranger is never signalled. `false` when the kernel has no pidfds.
#[cfg(target_os = "linux")]
fn signal_by_pidfd(pid: i32, parents: [i32; 2], sig: i32) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS);
    }
    let fd = fd as libc::c_int;
    if parent_pid(pid).is_some_and(|pp| parents.contains(&pp)) {
        // SAFETY: a signal through a pidfd we own, without a siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
    // SAFETY: closing the fd pidfd_open gave us.
    unsafe { libc::close(fd) };
    true
}

#[cfg(not(target_os = "linux"))]
fn signal_by_pidfd(_pid: i32, _parents: [i32; 2], _sig: i32) -> bool {
    false
}

/// Sends `sig` to the command's group and to every descendant that left it.
fn signal_tree(pgid: i32, sig: i32) {
    kill_group(pgid, sig);
    for (pid, parent) in descendants() {
        signal_descendant(pid, parent, sig);
    }
}

/// Stops every descendant left: TERM, then KILL once `grace` has passed; returns when none
/// is left (no child of this subreaper, live or unreaped).
fn clear_descendants(pgid: i32, grace: Duration) {
    let kill_at = Instant::now() + grace;
    let mut termed = false;
    while children_left() {
        let sig = if termed && Instant::now() < kill_at {
            0
        } else if termed {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        if sig != 0 {
            signal_tree(pgid, sig);
        }
        termed = true;
        let wait = if sig == libc::SIGKILL {
            Duration::from_millis(10)
        } else {
            kill_at
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50))
                .max(Duration::from_millis(1))
        };
        wait_signal(&sigset(&[libc::SIGCHLD]), wait);
    }
}

/// Runs the command to its end (or its stop) and leaves no descendant behind.
pub fn run(spec: &Spec) -> Result<Outcome, SpawnError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(SpawnError::Other("an empty command".into()));
    };
    let parent = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let empty = sigset(&[]);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            #[cfg(target_os = "linux")]
            {
                // The job gets the host's transparent huge pages (see `block_signals`).
                libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(format!("{program}: {e}")),
        std::io::ErrorKind::PermissionDenied => {
            SpawnError::NotExecutable(format!("{program}: {e}"))
        }
        _ if e.raw_os_error() == Some(libc::ENOEXEC) => {
            SpawnError::NotExecutable(format!("{program}: {e}"))
        }
        _ => SpawnError::Other(format!("{program}: {e}")),
    })?;
    let pid = child.id() as i32;
    let tee = child.stderr.take().map(|mut err| {
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
    let term_at = spec
        .deadline
        .checked_sub(spec.grace)
        .unwrap_or(spec.deadline);
    let mut stopped = Stopped::No;
    let mut termed = false;
    let mut killed = false;
    let mut interrupt_kill_at: Option<Instant> = None;
    let watched = all_watched();
    let status = loop {
        if let Some(s) = reap(pid) {
            break s;
        }
        let now = Instant::now();
        if !killed && (now >= spec.deadline || interrupt_kill_at.is_some_and(|t| now >= t)) {
            if stopped == Stopped::No {
                stopped = Stopped::Deadline;
            }
            signal_tree(pid, libc::SIGKILL);
            killed = true;
        } else if !termed && now >= term_at {
            if stopped == Stopped::No {
                stopped = Stopped::Deadline;
            }
            signal_tree(pid, libc::SIGTERM);
            termed = true;
        }
        let mut next = if termed { spec.deadline } else { term_at };
        if let Some(t) = interrupt_kill_at {
            next = next.min(t);
        }
        let wait = if killed {
            Duration::from_millis(10)
        } else {
            next.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        if let Some(sig) = wait_signal(&watched, wait)
            && STOP_SIGNALS.contains(&sig)
            && !matches!(stopped, Stopped::Interrupted(_))
        {
            stopped = Stopped::Interrupted(sig);
            signal_tree(pid, sig);
            interrupt_kill_at = Some((Instant::now() + spec.grace).min(spec.deadline));
        }
    };
    // The std handle must not wait again: the status is already reaped.
    std::mem::forget(child);
    let left_grace = match stopped {
        Stopped::No => spec
            .grace
            .min(spec.deadline.saturating_duration_since(Instant::now())),
        _ => Duration::ZERO,
    };
    clear_descendants(pid, left_grace);
    let stderr_tail = tee.and_then(|t| t.join().ok()).unwrap_or_default();
    let st = std::process::ExitStatus::from_raw(status);
    let exit = match (st.code(), st.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        _ => Exit::Code(255),
    };
    Ok(Outcome {
        exit,
        stopped,
        stderr_tail,
    })
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
