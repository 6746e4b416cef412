//! No process outlives its guard (SPEC 7.1 items 8 and 29): the command runs under a
//! supervisor that outlives `batchguard`, so a worker the job forked (one that started a
//! session of its own) is stopped when `batchguard` is SIGKILLed, and stopped at the
//! deadline while `batchguard` is frozen (SIGSTOP). Real processes, real signals, a SQLite
//! store in a temporary directory; every wait is bounded and synchronised on a fact (a pid
//! file, a process gone, an exit), never on a duration.

mod common;
use common::{bin, sh, sqlite_rows};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// A manifest with one job `j`, lock ttl `ttl`, one attempt, running `command`.
    fn new(ttl: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n    retry:\n      max_attempts: 1\n"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn spawn(&self) -> Child {
        // The minute now: a slot the store's clock calls due, neither future nor stale.
        let now = jiff::Timestamp::now().as_second();
        let slot = jiff::Timestamp::from_second(now - now.rem_euclid(60))
            .expect("a time")
            .to_string();
        Command::new(bin())
            .current_dir(self.dir.path())
            .args([
                "run",
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "j",
                "--instance",
                "t1",
                "--scheduled-at",
                &slot,
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run")
    }

    /// (event, status, error_code) of every ledger row.
    fn events(&self) -> Vec<(String, Option<String>, Option<String>)> {
        sqlite_rows(
            &self.path(".batchguard/store.db"),
            "SELECT event, status, error_code FROM batchguard_events ORDER BY rowid",
        )
    }
}

/// The job: a worker that leaves the command's process group and session (`setsid`),
/// ignores TERM (so only the KILL after the grace stops it), writes its pid and loops; the
/// command waits for it. Only a subreaper that outlives batchguard can find it once the
/// command's own shell is dead.
fn forking_job() -> String {
    sh(
        "setsid sh -c 'trap \"\" TERM; echo $$ > worker.tmp; mv worker.tmp worker.pid; while :; do sleep 0.05; done' & wait",
    )
}

/// Waits (bounded) until the worker has written its pid.
fn worker_pid(p: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(p)
            && s.ends_with('\n')
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < until, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The state letter of a process (`R`, `S`, `T`, `Z`…); `None` once it is gone.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Waits until `pid` is gone (a zombie counts as gone) or `bound` has passed; whether it
/// went. The bound is a failure threshold, not a measured duration.
fn gone_within(pid: i32, bound: Duration) -> bool {
    let until = Instant::now() + bound;
    while state(pid).is_some_and(|s| s != 'Z') {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: a signal to a process this test started.
    unsafe { libc::kill(pid, sig) };
}

#[test]
fn a_forked_worker_dies_when_batchguard_is_sigkilled() {
    let c = Case::new("60s", &forking_job());
    let mut guard = c.spawn();
    let worker = worker_pid(&c.path("worker.pid"));
    kill(guard.id() as i32, libc::SIGKILL);
    let status = guard.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    // Gone before the lease (60 s) could expire; the bound is only where the test gives up.
    let gone = gone_within(worker, Duration::from_secs(60 + 30));
    if !gone {
        kill(worker, libc::SIGKILL);
    }
    assert!(gone, "the worker {worker} outlived its SIGKILLed guard");
    // The attempt has a start and no end: the next run sees a lost holder, as before.
    let ev = c.events();
    assert_eq!(ev.first().map(|e| e.0.as_str()), Some("start"), "{ev:?}");
}

#[test]
fn a_frozen_batchguard_still_has_its_command_stopped_at_the_deadline() {
    // ttl 5s: grace 0.5s, safety 1s, so TERM at 3.5s and KILL at 4s after the acquire.
    let c = Case::new("5s", &forking_job());
    let guard = c.spawn();
    let pid = guard.id() as i32;
    let worker = worker_pid(&c.path("worker.pid"));
    kill(pid, libc::SIGSTOP);
    let gone = gone_within(worker, Duration::from_secs(5 + 30));
    // Still frozen: nothing but the supervisor can have stopped the worker.
    let frozen = state(pid);
    kill(pid, libc::SIGCONT);
    if !gone {
        kill(worker, libc::SIGKILL);
    }
    assert!(
        gone,
        "the worker {worker} outlived the deadline of a frozen guard"
    );
    assert_eq!(frozen, Some('T'), "batchguard was not stopped meanwhile");
    let out = guard.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let ev = c.events();
    let end = ev.iter().find(|e| e.0 == "end").expect("an end event");
    assert_eq!(end.2.as_deref(), Some("TTL_EXCEEDED"), "{ev:?}");
}

/// The supervisor SIGKILLed (here by the job itself: its parent is the supervisor): the
/// command dies with it, and batchguard, a child subreaper too, clears the worker that is
/// re-parented to it and records the attempt as killed.
#[test]
fn a_killed_supervisor_leaves_batchguard_to_clear_the_tree() {
    let c = Case::new(
        "60s",
        &sh(
            "setsid sh -c 'echo $$ > worker.tmp; mv worker.tmp worker.pid; exec sleep 1000' & while [ ! -f worker.pid ]; do sleep 0.01; done; kill -9 $PPID; sleep 1000",
        ),
    );
    let out = c.spawn().wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    let worker = worker_pid(&c.path("worker.pid"));
    let gone = gone_within(worker, Duration::from_secs(30));
    if !gone {
        kill(worker, libc::SIGKILL);
    }
    assert!(gone, "the worker {worker} outlived its guard");
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{err}");
    let ev = c.events();
    let end = ev.iter().find(|e| e.0 == "end").expect("an end event");
    assert_eq!(end.2.as_deref(), Some("SIGNAL_KILL"), "{ev:?}");
}
