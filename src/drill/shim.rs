//! The drill's tap between the guard and the job (`batchguard __drill-job -- ARGV…`, hidden):
//! `run` starts it as the command; it starts the job with `BATCHGUARD_OUTPUTS` pointing at a
//! FIFO it reads, copies every line to the guard's outputs file, and acts on the job's
//! FIRST output line as the scenario asks (crash, fail for a retry, pause). A FIFO makes
//! "right after the first output line" precise: a job whose reader stops can write at most
//! one pipe buffer (set to its minimum, one page) before it blocks.
//!
//! It talks to the drill through marker files in `BATCHGUARD_DRILL_CTL` (written whole,
//! then renamed), which the drill waits for: observable facts, not sleeps.

use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const ENV_CTL: &str = "BATCHGUARD_DRILL_CTL";
pub const ENV_MODE: &str = "BATCHGUARD_DRILL_MODE";
pub const ENV_CWD: &str = "BATCHGUARD_DRILL_CWD";

/// What the tap does at the first output line of attempt 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing: copy lines, pass the job's exit on.
    Pass,
    /// Wait for the drill's `go` before starting the job (`concurrent`: the instance that
    /// got the lock holds it until every other instance has been refused).
    Hold,
    /// KILL the job, then wait to be killed with the guard (`crash`).
    Crash,
    /// KILL the job and report `EX_TEMPFAIL`, exit 75 (`retry`).
    Fail,
    /// STOP the job (`stale`); the drill stops the guard and the tap too, and continues
    /// them after a second instance has finished the slot.
    Pause,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Pass => "pass",
            Mode::Hold => "hold",
            Mode::Crash => "crash",
            Mode::Fail => "fail",
            Mode::Pause => "pause",
        }
    }

    fn parse(s: &str) -> Mode {
        match s {
            "hold" => Mode::Hold,
            "crash" => Mode::Crash,
            "fail" => Mode::Fail,
            "pause" => Mode::Pause,
            _ => Mode::Pass,
        }
    }
}

/// Marker names; the tap's pid follows the dash.
pub const READY: &str = "ready-";
pub const CRASHED: &str = "crashed-";
pub const PAUSED: &str = "paused-";
pub const GO: &str = "go";

/// The pipe of a tap that only copies lines: 1 MiB, Linux's default `pipe-max-size`.
const WIDE_PIPE: libc::c_int = 1 << 20;

/// How long such a tap lets lines gather before it reads them.
const BATCH: Duration = Duration::from_millis(5);

/// Writes a marker whole (temporary name, then rename), so its reader never sees half.
pub fn mark(ctl: &Path, name: &str, body: &str) -> std::io::Result<()> {
    let tmp = ctl.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, ctl.join(name))
}

fn die(msg: &str) -> u8 {
    eprintln!("batchguard drill tap: {msg}");
    // Not a code a scenario treats as the job's: the drill reports the tap's failure.
    70
}

/// The tap's whole life; its return value is its exit code.
pub fn main(argv: &[String]) -> u8 {
    let Some(ctl) = std::env::var_os(ENV_CTL).map(PathBuf::from) else {
        return die("not started by `batchguard drill` (no BATCHGUARD_DRILL_CTL)");
    };
    let Some(outputs) = std::env::var_os("BATCHGUARD_OUTPUTS").map(PathBuf::from) else {
        return die("not started by `batchguard run` (no BATCHGUARD_OUTPUTS)");
    };
    let error_file = std::env::var_os("BATCHGUARD_ERROR").map(PathBuf::from);
    let first_attempt = std::env::var("BATCHGUARD_ATTEMPT").is_ok_and(|a| a == "1");
    let mode = std::env::var(ENV_MODE).map_or(Mode::Pass, |m| Mode::parse(&m));
    let mode = if first_attempt { mode } else { Mode::Pass };
    let Some((program, args)) = argv.split_first() else {
        return die("no command after `--`");
    };
    let me = std::process::id();
    if mode == Mode::Hold {
        if let Err(e) = mark(&ctl, &format!("{READY}{me}"), "") {
            return die(&format!("cannot write to {}: {e}", ctl.display()));
        }
        while !ctl.join(GO).exists() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let fifo = ctl.join(format!("tap-{me}"));
    let _ = std::fs::remove_file(&fifo);
    let c = match std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()) {
        Ok(c) => c,
        Err(_) => return die("the sandbox path holds a NUL byte"),
    };
    // SAFETY: mkfifo and open on a C string we own; the fd is owned by `reader` below.
    let fd = unsafe {
        if libc::mkfifo(c.as_ptr(), 0o600) != 0 {
            return die(&format!(
                "cannot make the FIFO {}: {}",
                fifo.display(),
                std::io::Error::last_os_error()
            ));
        }
        // Read and write: the tap itself keeps a writer open, so a job that opens and
        // closes the file per line never makes it see an end of file between lines.
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return die(&format!(
            "cannot open the FIFO: {}",
            std::io::Error::last_os_error()
        ));
    }
    // One page while the first line must be caught as it comes (crash, fail, pause); a
    // tap that only copies takes a wide pipe and reads it in batches (`BATCH`).
    let streaming = mode == Mode::Pass || mode == Mode::Hold;
    // SAFETY: fcntl on our own fd; failure leaves the default buffer, which only widens
    // the window in which a job can write past its first line, or batches less.
    unsafe {
        libc::fcntl(
            fd,
            libc::F_SETPIPE_SZ,
            if streaming { WIDE_PIPE } else { 4096 },
        );
    }
    let mut sink = match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&outputs)
    {
        Ok(f) => f,
        Err(e) => return die(&format!("cannot open {}: {e}", outputs.display())),
    };
    let cwd = std::env::var_os(ENV_CWD).map(PathBuf::from);
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env("BATCHGUARD_OUTPUTS", &fifo)
        .env_remove(ENV_CTL)
        .env_remove(ENV_MODE)
        .env_remove(ENV_CWD)
        .process_group(0);
    if let Some(d) = &cwd {
        cmd.current_dir(d);
    }
    // SAFETY: async-signal-safe calls only between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    // The guard's stop signals reach the tap's group; they are the job's to hear.
    let set = stop_set();
    // SAFETY: blocking signals in this (single-threaded so far) process.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let mut child = {
        // SAFETY: the child starts with the mask cleared again.
        unsafe {
            cmd.pre_exec(|| {
                let empty: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                // The guard's own words for a command it cannot start.
                eprintln!("batchguard drill tap: {program}: {e}");
                return if e.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                };
            }
        }
    };
    let pgid = child.id() as i32;
    std::thread::spawn(move || {
        loop {
            let mut sig = 0;
            // SAFETY: sigwait on a set we own.
            if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                // SAFETY: a signal to the job's group.
                unsafe {
                    libc::killpg(pgid, sig);
                }
            }
        }
    });
    let mut pending: Vec<u8> = Vec::new();
    let mut acted = mode == Mode::Pass || mode == Mode::Hold;
    let mut chunk = vec![0u8; 65536];
    let status = loop {
        if streaming {
            // Woken by every write, the tap cost the job a context switch per line (10,000
            // per execution of the example); read what a few milliseconds gathered instead.
            std::thread::sleep(BATCH);
        } else {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one fd we own.
            unsafe {
                libc::poll(&mut pfd, 1, 20);
            }
        }
        let read = drain(fd, &mut chunk, &mut pending);
        let first = copy_lines(&mut pending, &mut sink);
        if read.is_err() {
            break child.wait();
        }
        if first && !acted {
            acted = true;
            match mode {
                Mode::Crash | Mode::Fail => {
                    // SAFETY: KILL to the job's own group.
                    unsafe {
                        libc::killpg(pgid, libc::SIGKILL);
                    }
                    let _ = child.wait();
                    job_cpu(&ctl, me);
                    let _ = drain(fd, &mut chunk, &mut pending);
                    copy_lines(&mut pending, &mut sink);
                    flush_rest(&mut pending, &mut sink);
                    if mode == Mode::Fail {
                        if let Some(e) = &error_file {
                            let _ = std::fs::write(e, "EX_TEMPFAIL\n");
                        }
                        let _ = std::fs::remove_file(&fifo);
                        return 75;
                    }
                    let _ = mark(&ctl, &format!("{CRASHED}{me}"), &pgid.to_string());
                    // The drill kills the guard and this tap next: a crash leaves no `end`.
                    loop {
                        // SAFETY: pause() only waits for a signal.
                        unsafe {
                            libc::pause();
                        }
                    }
                }
                Mode::Pause => {
                    // SAFETY: STOP to the job's own group.
                    unsafe {
                        libc::killpg(pgid, libc::SIGSTOP);
                    }
                    let _ = mark(&ctl, &format!("{PAUSED}{me}"), &pgid.to_string());
                }
                Mode::Pass | Mode::Hold => {}
            }
        }
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
    };
    job_cpu(&ctl, me);
    let _ = drain(fd, &mut chunk, &mut pending);
    copy_lines(&mut pending, &mut sink);
    flush_rest(&mut pending, &mut sink);
    let _ = std::fs::remove_file(&fifo);
    match status {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(c), _) => u8::try_from(c).unwrap_or(1),
            (None, Some(sig)) => {
                // Die of the same signal, so the guard classifies it as the job's.
                // SAFETY: restoring the default action and raising it on ourselves.
                unsafe {
                    let mut one: libc::sigset_t = std::mem::zeroed();
                    libc::sigaddset(&mut one, sig);
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                    libc::signal(sig, libc::SIG_DFL);
                    libc::raise(sig);
                }
                128u8.saturating_add(u8::try_from(sig).unwrap_or(0))
            }
            _ => 1,
        },
        Err(e) => die(&format!("cannot wait for the job: {e}")),
    }
}

/// Marker of the CPU seconds the job (and what it waited for) used, once it was reaped:
/// the drill subtracts the jobs' CPU to tell its own.
pub const CPU: &str = "cpu-";

fn job_cpu(ctl: &Path, me: u32) {
    let _ = mark(
        ctl,
        &format!("{CPU}{me}"),
        &format!("{:.6}", children_cpu()),
    );
}

/// User + system seconds of the reaped children of this process.
pub fn children_cpu() -> f64 {
    // SAFETY: getrusage fills a struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn stop_set() -> libc::sigset_t {
    // SAFETY: initialising a plain C struct we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Reads what the FIFO holds now (non-blocking) into `pending`.
fn drain(fd: i32, chunk: &mut [u8], pending: &mut Vec<u8>) -> Result<(), ()> {
    loop {
        // SAFETY: read into a buffer we own, at most its length.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n > 0 {
            pending.extend_from_slice(&chunk[..n as usize]);
            continue;
        }
        if n == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(()),
            _ => Err(()),
        };
    }
}

/// Moves the complete lines of `pending` to the outputs file; true when one moved.
fn copy_lines(pending: &mut Vec<u8>, sink: &mut std::fs::File) -> bool {
    let Some(last) = pending.iter().rposition(|&b| b == b'\n') else {
        return false;
    };
    let _ = sink.write_all(&pending[..=last]);
    pending.drain(..=last);
    true
}

fn flush_rest(pending: &mut Vec<u8>, sink: &mut std::fs::File) {
    if !pending.is_empty() {
        let _ = sink.write_all(pending);
        let _ = sink.write_all(b"\n");
        pending.clear();
    }
}
