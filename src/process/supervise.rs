//! The supervisor: a process between batchguard and the command that outlives batchguard
//! (SPEC 7.1 items 8 and 29).
//!
//! batchguard → supervisor → command. The supervisor is a child subreaper and the
//! command's parent, so every descendant of the command whose parent dies is re-parented
//! to it, also after batchguard is gone. It keeps the deadline itself (monotonic clock):
//! TERM to the command's group and every descendant at `deadline - grace`, KILL at the
//! deadline, even while batchguard is frozen (SIGSTOP). When batchguard dies (SIGKILL
//! included) its end of the socket between them closes; the supervisor reads end-of-file
//! and stops the tree at once (TERM, KILL after the grace, no later than the deadline). It
//! reports `DONE` only when no descendant is left, and batchguard releases the lock only
//! after that report (or after it has cleared the tree itself, see [`wait`]).
//!
//! Why fork without exec: a re-exec of `/proc/self/exe` would give a clean process to
//! write the supervisor in ordinary Rust, but it costs a dynamic load and start of a 24 MB
//! binary on every `run` (milliseconds, the whole budget of `run -- true`). A fork costs
//! a fraction of a millisecond. batchguard may have threads at this point (tokio's
//! blocking pool for a PostgreSQL or MySQL store, the stderr reader of a previous
//! attempt), so the forked supervisor only does what is safe in the child of a threaded
//! process: system calls, data prepared before the fork (argv, envp, fds), fixed buffers
//! on the stack; it never allocates, locks, prints or panics, and ends with `_exit`.
//! The command is forked from the supervisor and `execvp`s as `std::process::Command`
//! did (the environment set through `environ`, `PATH` searched by libc, a script without
//! `#!` run by `/bin/sh`).
//!
//! The socket carries 16-byte records from the supervisor (and from the command's child
//! when its `exec` fails) to batchguard, and single bytes (a stop signal's number) the
//! other way.

use super::{Exit, Outcome, SpawnError, Spec, Stopped, tree};
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::{Duration, Instant};

/// The `exec` of the command failed: `[SPAWN_FAILED, errno, 0, 0]`.
const SPAWN_FAILED: i32 = 1;
/// The command has ended and no descendant is left: `[DONE, wait status, stopped, signal]`.
const DONE: i32 = 2;

const STOPPED_NO: i32 = 0;
const STOPPED_DEADLINE: i32 = 1;
const STOPPED_INTERRUPTED: i32 = 2;

/// How long past the deadline batchguard waits for the supervisor's report before it
/// clears the tree itself (the supervisor was killed or frozen as well).
const FALLBACK_AFTER: Duration = Duration::from_millis(500);

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// What the command's child needs for its `exec`, built before the fork (no allocation
/// after it).
pub(super) struct Prepared {
    program: CString,
    /// Owns the strings `argv_ptrs` points into.
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    /// Owns the strings `envp_ptrs` points into.
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
}

impl Prepared {
    /// The command line and batchguard's environment with `spec.env` added (a later value
    /// of a name wins), as `std::process::Command::envs` did.
    pub(super) fn new(spec: &Spec) -> Result<Prepared, SpawnError> {
        let nul = |what: &str| {
            SpawnError::Other(format!(
                "{}: a NUL byte in the {what}",
                spec.argv.first().map_or("", String::as_str)
            ))
        };
        let argv = spec
            .argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| nul("command"))?;
        let program = argv
            .first()
            .cloned()
            .ok_or_else(|| SpawnError::Other("an empty command".into()))?;
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        for (k, v) in spec.env {
            let k = OsStr::new(k);
            vars.retain(|(name, _)| name != k);
            vars.push((k.to_owned(), OsString::from(v)));
        }
        let envp = vars
            .into_iter()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| nul("environment"))?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Ok(Prepared {
            argv_ptrs: ptrs(&argv),
            envp_ptrs: ptrs(&envp),
            program,
            _argv: argv,
            _envp: envp,
        })
    }
}

/// batchguard's side of a started supervisor.
pub(super) struct Started {
    pid: libc::pid_t,
    sock: libc::c_int,
    /// The read end of the command's stderr.
    pub(super) stderr: Option<std::fs::File>,
}

/// An fd at 3 or above (with close-on-exec), so that the `dup2`s onto 0 and 2 in the
/// command's child cannot overwrite one another when batchguard started without them.
fn above_std(fd: libc::c_int) -> libc::c_int {
    if fd > 2 {
        return fd;
    }
    // SAFETY: duplicating and closing an fd we own.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        if high < 0 {
            return fd;
        }
        libc::close(fd);
        high
    }
}

fn os_err(what: &str) -> SpawnError {
    SpawnError::Other(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Forks the supervisor, which starts the command; batchguard goes on with [`wait`].
pub(super) fn start(prep: &Prepared, spec: &Spec) -> Result<Started, SpawnError> {
    let mut pair = [0 as libc::c_int; 2];
    let mut errp = [0 as libc::c_int; 2];
    // SAFETY: the calls fill arrays we own with new fds.
    unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        ) != 0
        {
            return Err(os_err("socketpair"));
        }
        if libc::pipe2(errp.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            let e = os_err("pipe");
            libc::close(pair[0]);
            libc::close(pair[1]);
            return Err(e);
        }
    }
    let null = c"/dev/null";
    // SAFETY: opening a constant path.
    let devnull = unsafe { libc::open(null.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    let [mine, theirs] = pair.map(above_std);
    let [err_r, err_w] = errp.map(above_std);
    let devnull = above_std(devnull);
    let close_all = |fds: &[libc::c_int]| {
        for &fd in fds {
            if fd >= 0 {
                // SAFETY: fds we own.
                unsafe { libc::close(fd) };
            }
        }
    };
    if devnull < 0 {
        let e = os_err("/dev/null");
        close_all(&[mine, theirs, err_r, err_w]);
        return Err(e);
    }
    // SAFETY: the child runs only `supervise`, which keeps to async-signal-safe calls and
    // data prepared before this fork, and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = os_err("fork");
        close_all(&[mine, theirs, err_r, err_w, devnull]);
        return Err(e);
    }
    if pid == 0 {
        close_all(&[mine, err_r]);
        let code = supervise(prep, spec, theirs, err_w, devnull);
        // SAFETY: ending the forked child without running anything of the parent's.
        unsafe { libc::_exit(code) };
    }
    close_all(&[theirs, err_w, devnull]);
    // SAFETY: the read end is ours alone from here.
    let stderr = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(err_r) };
    Ok(Started {
        pid,
        sock: mine,
        stderr: Some(stderr),
    })
}

/// Writes a record whole; a closed peer (batchguard died) is ignored.
fn send(sock: libc::c_int, rec: [i32; 4]) {
    let mut bytes = [0u8; 16];
    for (chunk, v) in bytes.chunks_exact_mut(4).zip(rec) {
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    let mut at = 0;
    while let Some(rest) = bytes.get(at..).filter(|r| !r.is_empty()) {
        // SAFETY: sending from a buffer we own; MSG_NOSIGNAL: no SIGPIPE if the peer is gone.
        let n = unsafe { libc::send(sock, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n > 0 {
            at += n as usize;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The supervisor (a forked child; see the module comment for what it may call).
/// Returns its exit code.
fn supervise(
    prep: &Prepared,
    spec: &Spec,
    sock: libc::c_int,
    err_w: libc::c_int,
    devnull: libc::c_int,
) -> i32 {
    let watched = super::sigset(&[libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);
    // SAFETY: system calls on values we own.
    let (me, sfd) = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Its own name (`ps -o comm`, `pgrep`), so that a tool looking for batchguard by
        // name does not take the supervisor for it; its command line stays batchguard's.
        libc::prctl(libc::PR_SET_NAME, c"bg-supervisor".as_ptr(), 0, 0, 0);
        libc::sigprocmask(libc::SIG_BLOCK, &watched, std::ptr::null_mut());
        (
            libc::getpid(),
            libc::signalfd(-1, &watched, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC),
        )
    };
    // SAFETY: fork from a single-threaded process; the child only execs or `_exit`s.
    let child = unsafe { libc::fork() };
    if child < 0 {
        send(sock, [SPAWN_FAILED, errno(), 0, 0]);
        return 1;
    }
    if child == 0 {
        exec_command(prep, me, sock, err_w, devnull);
    }
    // SAFETY: the child's group, set here too so that a signal to it cannot come before
    // the child has set it; then fds only the command needed.
    unsafe {
        libc::setpgid(child, child);
        libc::close(err_w);
        libc::close(devnull);
    }
    let pgid = Some(child);
    let term_at = spec
        .deadline
        .checked_sub(spec.grace)
        .unwrap_or(spec.deadline);
    let mut stopped = Stopped::No;
    let mut termed = false;
    let mut killed = false;
    let mut kill_at: Option<Instant> = None;
    let mut orphaned = false;
    let stop = |sig: i32, stopped: &mut Stopped, kill_at: &mut Option<Instant>| {
        if !matches!(stopped, Stopped::Interrupted(_)) {
            *stopped = Stopped::Interrupted(sig);
            tree::signal_tree(pgid, sig);
            let at = Instant::now()
                .checked_add(spec.grace)
                .unwrap_or(spec.deadline);
            *kill_at = Some(at.min(spec.deadline));
        }
    };
    let status = 'run: loop {
        // Signals: TERM, INT, HUP stop the command; SIGCHLD only wakes this loop.
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        // SAFETY: reading whole signalfd_siginfo records into a buffer of that size.
        while unsafe { libc::read(sfd, info.as_mut_ptr().cast(), info.len()) } > 0 {
            let signo = i32::try_from(u32::from_ne_bytes([info[0], info[1], info[2], info[3]]))
                .unwrap_or(0);
            if super::STOP_SIGNALS.contains(&signo) {
                stop(signo, &mut stopped, &mut kill_at);
            }
        }
        loop {
            let mut st: libc::c_int = 0;
            // SAFETY: waitpid on any child with WNOHANG; status is ours.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
            if pid == child {
                break 'run st;
            }
            if pid <= 0 {
                break;
            }
        }
        // From batchguard: a stop signal's number, or end-of-file when it has died.
        if !orphaned {
            let mut b = [0u8; 8];
            // SAFETY: a non-blocking read into a buffer we own.
            let n = unsafe { libc::recv(sock, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
            if n == 0 || (n < 0 && !matches!(errno(), libc::EAGAIN | libc::EINTR)) {
                orphaned = true;
                // Nobody watches the lease any more: stop the command now.
                stop(libc::SIGTERM, &mut stopped, &mut kill_at);
            }
            for &s in b.get(..usize::try_from(n).unwrap_or(0)).unwrap_or(&[]) {
                stop(i32::from(s), &mut stopped, &mut kill_at);
            }
        }
        let now = Instant::now();
        if !killed && (now >= spec.deadline || kill_at.is_some_and(|t| now >= t)) {
            if stopped == Stopped::No {
                stopped = Stopped::Deadline;
            }
            tree::signal_tree(pgid, libc::SIGKILL);
            killed = true;
        } else if !termed && now >= term_at {
            if stopped == Stopped::No {
                stopped = Stopped::Deadline;
            }
            tree::signal_tree(pgid, libc::SIGTERM);
            termed = true;
        }
        let mut next = if termed { spec.deadline } else { term_at };
        if let Some(t) = kill_at {
            next = next.min(t);
        }
        let wait = if killed {
            Duration::from_millis(10)
        } else if sfd < 0 {
            // No signalfd: look for the command's exit every 50 ms.
            next.saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), Duration::from_millis(50))
        } else {
            next.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        let mut fds = [
            libc::pollfd {
                fd: if orphaned { -1 } else { sock },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = libc::c_int::try_from(wait.as_millis().saturating_add(1)).unwrap_or(i32::MAX);
        // SAFETY: polling an array of pollfds we own.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    };
    let left_grace = match stopped {
        Stopped::No => spec
            .grace
            .min(spec.deadline.saturating_duration_since(Instant::now())),
        _ => Duration::ZERO,
    };
    tree::clear_descendants(pgid, left_grace);
    let (kind, sig) = match stopped {
        Stopped::No => (STOPPED_NO, 0),
        Stopped::Deadline => (STOPPED_DEADLINE, 0),
        Stopped::Interrupted(s) => (STOPPED_INTERRUPTED, s),
    };
    send(sock, [DONE, status, kind, sig]);
    0
}

/// The command's child: its own group, stdin `/dev/null`, stderr to the pipe, default
/// signal mask and SIGPIPE, the host's huge pages, killed if the supervisor dies; then
/// `execvp`. A failed `exec` is reported on the socket (never returns).
fn exec_command(
    prep: &Prepared,
    supervisor: libc::pid_t,
    sock: libc::c_int,
    err_w: libc::c_int,
    devnull: libc::c_int,
) -> ! {
    // SAFETY: async-signal-safe calls on values prepared before the forks.
    unsafe {
        libc::setpgid(0, 0);
        if libc::dup2(devnull, 0) < 0 || libc::dup2(err_w, 2) < 0 {
            send(sock, [SPAWN_FAILED, errno(), 0, 0]);
            libc::_exit(127);
        }
        let empty = super::sigset(&[]);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        #[cfg(target_os = "linux")]
        {
            // The job gets the host's transparent huge pages (see `block_signals`).
            libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        }
        if libc::getppid() != supervisor {
            libc::_exit(137);
        }
        environ = prep.envp_ptrs.as_ptr();
        libc::execvp(prep.program.as_ptr(), prep.argv_ptrs.as_ptr());
        send(sock, [SPAWN_FAILED, errno(), 0, 0]);
        libc::_exit(127);
    }
}

/// What batchguard learnt from the supervisor.
pub(super) enum Report {
    SpawnFailed(i32),
    Done(Outcome),
}

/// batchguard's side: forwards stop signals to the supervisor until it reports.
///
/// When the supervisor ends without a report, or has not reported by
/// [`FALLBACK_AFTER`] past the deadline (it was killed or frozen too), batchguard kills it
/// (its command dies with it: parent-death signal) and clears the tree itself: it is a
/// child subreaper as well, so what the supervisor left is re-parented to it.
pub(super) fn wait(started: &Started, spec: &Spec) -> Report {
    let stops = super::sigset(&super::STOP_SIGNALS);
    // SAFETY: a signalfd for signals `block_signals` has blocked; -1 leaves sigtimedwait.
    let sfd = unsafe { libc::signalfd(-1, &stops, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
    let give_up = spec
        .deadline
        .checked_add(FALLBACK_AFTER)
        .unwrap_or(spec.deadline);
    let mut buf: Vec<u8> = Vec::new();
    let mut spawn_failed = None;
    let mut own_stop: Option<i32> = None;
    let mut gone = false;
    let done = loop {
        let mut chunk = [0u8; 64];
        // SAFETY: a non-blocking read into a buffer we own.
        let n = unsafe {
            libc::recv(
                started.sock,
                chunk.as_mut_ptr().cast(),
                chunk.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            buf.extend_from_slice(chunk.get(..n as usize).unwrap_or(&[]));
        } else if n == 0 || !matches!(errno(), libc::EAGAIN | libc::EINTR) {
            gone = true;
        }
        let mut done = None;
        for rec in buf.chunks_exact(16) {
            let v: Vec<i32> = rec
                .chunks_exact(4)
                .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            match v[0] {
                SPAWN_FAILED => spawn_failed = spawn_failed.or(Some(v[1])),
                DONE => done = Some((v[1], v[2], v[3])),
                _ => {}
            }
        }
        buf.drain(..buf.len() - buf.len() % 16);
        if done.is_some() {
            break done;
        }
        if n > 0 {
            continue;
        }
        if gone || Instant::now() >= give_up {
            break None;
        }
        if sfd >= 0 {
            let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
            // SAFETY: reading whole signalfd_siginfo records into a buffer of that size.
            while unsafe { libc::read(sfd, info.as_mut_ptr().cast(), info.len()) } > 0 {
                let s = i32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
                own_stop = own_stop.or(Some(s));
                let byte = [u8::try_from(s).unwrap_or(libc::SIGTERM as u8)];
                // SAFETY: a one-byte send; the supervisor may be gone (no SIGPIPE).
                unsafe { libc::send(started.sock, byte.as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
            }
        } else if let Some(s) = super::stop_signal_now() {
            own_stop = own_stop.or(Some(s));
            let byte = [u8::try_from(s).unwrap_or(libc::SIGTERM as u8)];
            // SAFETY: as above.
            unsafe { libc::send(started.sock, byte.as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
        }
        let wait = give_up.saturating_duration_since(Instant::now());
        let ms = libc::c_int::try_from(wait.as_millis().saturating_add(1))
            .unwrap_or(i32::MAX)
            .min(if sfd >= 0 { i32::MAX } else { 50 });
        let mut fds = [
            libc::pollfd {
                fd: started.sock,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: polling an array of pollfds we own (a negative fd is skipped).
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    };
    // SAFETY: closing fds we own.
    unsafe {
        if sfd >= 0 {
            libc::close(sfd);
        }
        libc::close(started.sock);
    }
    let outcome = match done {
        Some((status, kind, sig)) => {
            reap(started.pid);
            let stopped = match (kind, own_stop) {
                (STOPPED_INTERRUPTED, _) => Stopped::Interrupted(sig),
                (_, Some(s)) => Stopped::Interrupted(s),
                (STOPPED_DEADLINE, None) => Stopped::Deadline,
                _ => Stopped::No,
            };
            // Normally nothing: the supervisor cleared the tree before it reported.
            tree::clear_descendants(None, Duration::ZERO);
            Outcome {
                exit: exit_of(status),
                stopped,
                stderr_tail: Vec::new(),
            }
        }
        None => {
            // SAFETY: a signal to our own child, not yet reaped.
            unsafe { libc::kill(started.pid, libc::SIGKILL) };
            reap(started.pid);
            tree::clear_descendants(None, Duration::ZERO);
            let stopped = match own_stop {
                Some(s) => Stopped::Interrupted(s),
                None if Instant::now() >= spec.deadline => Stopped::Deadline,
                None => Stopped::No,
            };
            Outcome {
                exit: Exit::Signal(libc::SIGKILL),
                stopped,
                stderr_tail: Vec::new(),
            }
        }
    };
    match spawn_failed {
        Some(e) => Report::SpawnFailed(e),
        None => Report::Done(outcome),
    }
}

fn reap(pid: libc::pid_t) {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r >= 0 || errno() != libc::EINTR {
            return;
        }
    }
}

fn exit_of(status: libc::c_int) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    let st = std::process::ExitStatus::from_raw(status);
    match (st.code(), st.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        _ => Exit::Code(255),
    }
}
