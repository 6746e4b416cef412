//! The live table as a person sees it: `batchguard watch` in a real terminal (tmux, with
//! a server of this test's own), while one instance holds a slot's lock and another,
//! woken by the same tick, was refused. The screen is read with `capture-pane` until it
//! shows what the store says (no sleep has to be long enough: each wait is for a fact on
//! the screen or a file, with a generous deadline only to fail instead of hanging).
//!
//! With `BATCHGUARD_SCREEN_CAPTURE=FILE` the test also writes the screen it read there
//! (`docs/watch-screen.txt` is made that way).

#[path = "common/live.rs"]
mod live;

use live::{Case, bin, manifest, minute, now, ok};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A tmux server of this test's own (its own socket), killed at the end.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `tag` keeps the servers of tests running at once apart.
    fn new(tag: &str) -> Option<Tmux> {
        let here = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !here {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "tmux is required in CI (.ci/run installs it)"
            );
            eprintln!("skipped: tmux is not on PATH");
            return None;
        }
        Some(Tmux {
            socket: format!("bg-watch-{tag}-{}", std::process::id()),
        })
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Session `w`, `width` x `height`, running `script`.
    fn start(&self, width: u16, height: u16, script: &str) {
        let started = self.run(&[
            "new-session",
            "-d",
            "-s",
            "w",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            script,
        ]);
        assert!(
            started.status.success(),
            "{}",
            String::from_utf8_lossy(&started.stderr)
        );
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "w"]).stdout).into_owned()
    }

    /// Waits until the screen satisfies `done`.
    fn until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let s = self.screen();
            if done(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The holder: a `run` whose command sleeps, in a process group of its own.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        // SAFETY: signalling the process group this test started.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

#[test]
fn the_live_table_shows_a_running_job_and_a_skipped_slot_with_its_holder() {
    let Some(tmux) = Tmux::new("table") else {
        return;
    };
    let c = Case::sqlite(&manifest(&[
        ("report", "* * * * *", "1s", "1m", ""),
        (
            "settle-payments",
            "* * * * *",
            "1m",
            "10m",
            "    alerts:\n      max_latency: 15m\n",
        ),
    ]));
    let url = c.url();
    let slot = live::ts(minute(now()));
    let run = |job: &str, instance: &str, cmd: &[&str]| {
        let mut a = vec![
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            job,
            "--store",
            &url,
            "--scheduled-at",
            &slot,
            "--instance",
            instance,
            "--",
        ];
        a.extend_from_slice(cmd);
        c.cmd(&a)
    };
    ok(&run("report", "host-a", &["true"]).output().unwrap());
    let mut holder = run("settle-payments", "host-a", &["sleep", "600"]);
    holder
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let _holder = Holder(holder.spawn().expect("run starts"));
    // The holder's `start` is in the ledger: the lock is taken.
    let db = c.path("store.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    while live_rows(
        &db,
        "SELECT count(*) FROM batchguard_events WHERE event = 'start' AND instance = 'host-a' AND job = 'settle-payments'",
    ) == 0
    {
        assert!(Instant::now() < deadline, "the holder never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let skipped = run("settle-payments", "host-b", &["true"])
        .output()
        .unwrap();
    ok(&skipped);
    assert!(String::from_utf8_lossy(&skipped.stderr).contains("held by host-a"));

    let exit_file = c.path("exit.txt");
    let script = format!(
        "cd '{}' && NO_COLOR=1 '{}' watch --store '{url}' --manifest m.batchguard.yaml --interval 1s; echo $? > '{}'",
        c.dir.path().display(),
        bin().display(),
        exit_file.display()
    );
    tmux.start(170, 32, &script);

    let screen = tmux.until("the running job and the skip", |s| {
        s.contains("settle-payments") && s.contains("on host-a for") && s.contains("held by host-a")
    });
    let running = screen
        .lines()
        .find(|l| l.contains("on host-a for"))
        .expect("a row runs");
    assert!(running.contains("settle-payments"), "{running}");
    let skips = screen
        .lines()
        .find(|l| l.contains("held by host-a"))
        .unwrap();
    assert!(
        skips.contains("on host-b"),
        "the refused instance is named: {skips}"
    );
    assert!(screen.contains(" leases "), "{screen}");
    assert!(screen.contains("q: quit"), "{screen}");
    if let Ok(path) = std::env::var("BATCHGUARD_SCREEN_CAPTURE") {
        std::fs::write(path, &screen).expect("capture written");
    }

    // Narrower: the boxes are drawn again to the new width.
    let resized = tmux.run(&["resize-window", "-t", "w", "-x", "110", "-y", "32"]);
    assert!(
        resized.status.success(),
        "{}",
        String::from_utf8_lossy(&resized.stderr)
    );
    tmux.until("the table redrawn 110 columns wide", |s| {
        s.lines()
            .find(|l| l.contains(" jobs "))
            .is_some_and(|l| l.chars().count() == 110 && l.ends_with('┐'))
    });

    // At 80 columns whole columns give way: every header left is whole, and a line too
    // long for its box ends in `…` at a word boundary.
    let resized = tmux.run(&["resize-window", "-t", "w", "-x", "80", "-y", "32"]);
    assert!(resized.status.success());
    let screen = tmux.until("the table redrawn 80 columns wide", |s| {
        s.lines()
            .find(|l| l.contains(" jobs "))
            .is_some_and(|l| l.chars().count() == 80 && l.ends_with('┐'))
    });
    let headers = screen
        .lines()
        .find(|l| l.contains("JOB") && l.contains("MISSED"))
        .unwrap_or_else(|| panic!("the job, its missed slots shown at 80 columns:\n{screen}"));
    let words = [
        "JOB",
        "RUNNING",
        "NOW",
        "LAST",
        "OUTCOME",
        "STARTS/SKIP",
        "CONT",
        "DURATION",
        "p50/p95",
        "(exp)",
        "LATENCY",
        "p95",
        "MISSED",
        "FAILED",
        "ALERTS",
    ];
    for w in headers
        .trim_matches(|c| c == '│' || c == ' ')
        .split_whitespace()
    {
        assert!(words.contains(&w), "a header cut: `{w}` in {headers}");
    }
    assert!(
        screen.contains("hidden: a wider terminal shows them"),
        "{screen}"
    );
    let skip = screen.lines().find(|l| l.contains("held by")).unwrap();
    assert!(
        skip.contains('…'),
        "the skip line is longer than 80: {skip}"
    );

    let quit = tmux.run(&["send-keys", "-t", "w", "q"]);
    assert!(quit.status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(code) = std::fs::read_to_string(&exit_file) {
            assert_eq!(code.trim(), "0", "q quits with exit 0");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "q did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a file the pane's shell writes, and returns it.
fn file_of(tmux: &Tmux, path: &std::path::Path, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never came:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TERM sent to the screen (a deploy stopping it, `timeout`, a closed session) ends it
/// with the terminal given back: the alternate screen left, the line discipline cooked
/// again, and exit 128 + 15 as a shell reports a TERM.
#[test]
fn a_term_gives_the_terminal_back() {
    let Some(tmux) = Tmux::new("term") else {
        return;
    };
    let c = Case::sqlite(&manifest(&[("report", "* * * * *", "1s", "1m", "")]));
    let (pid_file, exit_file, stty_file) =
        (c.path("pid.txt"), c.path("exit.txt"), c.path("stty.txt"));
    // The inner shell writes its pid and becomes `watch`; the outer one reports what the
    // terminal is like once it has ended.
    let script = format!(
        "cd '{dir}' && NO_COLOR=1 sh -c 'echo $$ > {pid}; exec {bin} watch --store {url} --manifest m.batchguard.yaml --interval 1h'; echo $? > '{exit}'; stty -a > '{stty}'; sleep 600",
        dir = c.dir.path().display(),
        pid = pid_file.display(),
        bin = bin().display(),
        url = c.url(),
        exit = exit_file.display(),
        stty = stty_file.display(),
    );
    tmux.start(120, 30, &script);
    tmux.until("the table", |s| s.contains("q: quit"));
    let alternate = |tmux: &Tmux| {
        String::from_utf8_lossy(
            &tmux
                .run(&["display", "-p", "-t", "w", "#{alternate_on}"])
                .stdout,
        )
        .trim()
        .to_owned()
    };
    assert_eq!(
        alternate(&tmux),
        "1",
        "the table is on the alternate screen"
    );
    let pid: i32 = file_of(&tmux, &pid_file, "the pid")
        .trim()
        .parse()
        .expect("a pid");
    // SAFETY: signalling the process this test started in its pane.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert_eq!(file_of(&tmux, &exit_file, "the exit code").trim(), "143");
    let stty = file_of(&tmux, &stty_file, "stty -a");
    let modes: Vec<&str> = stty.split_whitespace().collect();
    for mode in ["icanon", "echo", "icrnl", "opost"] {
        assert!(modes.contains(&mode), "{mode} is back on: {stty}");
    }
    assert_eq!(alternate(&tmux), "0", "the alternate screen is left");
}

fn live_rows(db: &std::path::Path, sql: &str) -> i64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
            .await
            .expect("open");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut c)
            .await
            .expect("query")
    })
}

/// `watch` in a tmux pane of its own: the pane's shell ignores HUP and records the exit
/// code of `watch`, which writes its pid first. With `own_session`, `watch` runs in a
/// session of its own (`setsid`): its terminal going away then sends it no signal, and
/// only end of file on its input can tell it.
struct Pane {
    tmux: Tmux,
    /// Keeps the store's folder while `watch` reads it.
    _case: Case,
    pid: i32,
    exit_file: std::path::PathBuf,
}

fn watch_in_pane(tag: &str, args: &str, own_session: bool, ready: &str) -> Option<Pane> {
    let tmux = Tmux::new(tag)?;
    let c = Case::sqlite(&manifest(&[("report", "* * * * *", "1s", "1m", "")]));
    let (pid_file, exit_file) = (c.path("pid.txt"), c.path("exit.txt"));
    let script = format!(
        "cd '{dir}' && trap '' HUP; NO_COLOR=1 {setsid} sh -c 'echo $$ > {pid}; exec {bin} watch --store {url} --manifest m.batchguard.yaml --interval 1h {args}'; echo $? > '{exit}'",
        dir = c.dir.path().display(),
        setsid = if own_session { "setsid -w" } else { "" },
        pid = pid_file.display(),
        bin = bin().display(),
        url = c.url(),
        exit = exit_file.display(),
    );
    tmux.start(120, 30, &script);
    tmux.until(ready, |s| s.contains(ready));
    let pid = file_of(&tmux, &pid_file, "the pid")
        .trim()
        .parse()
        .expect("a pid");
    Some(Pane {
        tmux,
        _case: c,
        pid,
        exit_file,
    })
}

impl Pane {
    /// The exit code of `watch`, once it has ended.
    fn exit_code(&self) -> String {
        file_of(&self.tmux, &self.exit_file, "the exit code of watch")
            .trim()
            .to_owned()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signalling the process this test started in its pane.
        assert_eq!(unsafe { libc::kill(self.pid, sig) }, 0);
    }

    /// Kills the pane's session: its terminal goes away under `watch`.
    fn kill_session(&self) {
        let killed = self.tmux.run(&["kill-session", "-t", "w"]);
        assert!(
            killed.status.success(),
            "{}",
            String::from_utf8_lossy(&killed.stderr)
        );
    }
}

/// An orphaned screen (its tmux session killed) ends on the end of file of its terminal,
/// with no signal to tell it, as a hang-up: exit 129.
/// In the pane's own session, the kernel also sends it a HUP: the same exit, and no panic
/// from giving back a terminal that is gone.
#[test]
fn the_screen_ends_when_its_terminal_goes_away() {
    for (tag, own_session) in [("eof-screen", true), ("gone-screen", false)] {
        let Some(p) = watch_in_pane(tag, "", own_session, "q: quit") else {
            return;
        };
        p.kill_session();
        assert_eq!(p.exit_code(), "129", "{tag}");
    }
}

/// Off the screen (JSON lines on a terminal), the same.
#[test]
fn json_lines_on_a_terminal_end_when_it_goes_away() {
    let Some(p) = watch_in_pane("eof-json", "--format json", true, "\"version\"") else {
        return;
    };
    p.kill_session();
    assert_eq!(p.exit_code(), "129");
}

/// A HUP ends the screen with exit 129; TERM and HUP end the JSON lines with 143 and 129.
#[test]
fn hup_and_term_end_watch_on_the_screen_and_off_it() {
    for (tag, args, ready, sig, code) in [
        ("hup-screen", "", "q: quit", libc::SIGHUP, "129"),
        (
            "hup-json",
            "--format json",
            "\"version\"",
            libc::SIGHUP,
            "129",
        ),
        (
            "term-json",
            "--format json",
            "\"version\"",
            libc::SIGTERM,
            "143",
        ),
    ] {
        let Some(p) = watch_in_pane(tag, args, false, ready) else {
            return;
        };
        p.signal(sig);
        assert_eq!(p.exit_code(), code, "{tag}");
    }
}
