//! `batchguard run` end to end, one outcome of SPEC 7.1 items 6–12 per test: real
//! processes, a real SQLite store file in a temporary directory.

mod common;
use common::{bin, sh, sqlite_rows};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SLOT: &str = "2026-03-01T02:00:00Z";

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// A manifest with one job `j` (every minute), the given lock ttl and retry block.
    fn new(ttl: &str, retry: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n    retry:\n{retry}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn cmd(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .args([
                "run",
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "j",
                "--instance",
                "t1",
            ])
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, extra: &[&str]) -> Output {
        self.cmd(extra).output().expect("run")
    }

    /// Every event of the store: (run_id, event, attempt, status, error_code, trigger, fence, detail).
    fn events(&self) -> Vec<Ev> {
        type Row = (
            String,
            String,
            Option<i64>,
            Option<String>,
            Option<String>,
            String,
            Option<i64>,
            Option<String>,
            String,
        );
        let rows: Vec<Row> = sqlite_rows(
            &self.path(".batchguard/store.db"),
            "SELECT run_id, event, attempt, status, error_code, \"trigger\", fence, detail, scheduled_at \
             FROM batchguard_events ORDER BY rowid",
        );
        rows.into_iter()
            .map(|r| Ev {
                run_id: r.0,
                event: r.1,
                attempt: r.2,
                status: r.3,
                error_code: r.4,
                trigger: r.5,
                fence: r.6,
                detail: r.7,
                scheduled_at: r.8,
            })
            .collect()
    }

    fn outputs(&self) -> Vec<String> {
        sqlite_rows::<(String,)>(
            &self.path(".batchguard/store.db"),
            "SELECT output_key FROM batchguard_outputs ORDER BY rowid",
        )
        .into_iter()
        .map(|r| r.0)
        .collect()
    }
}

#[derive(Debug)]
#[allow(dead_code)]
struct Ev {
    run_id: String,
    event: String,
    attempt: Option<i64>,
    status: Option<String>,
    error_code: Option<String>,
    trigger: String,
    fence: Option<i64>,
    detail: Option<String>,
    scheduled_at: String,
}

const NO_RETRY: &str = "      max_attempts: 1\n";
const RETRY3: &str = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n      retryable: [ETIMEDOUT]\n      fatal: [VALIDATION_ERROR]\n      on_unknown: dead_letter\n";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn kinds(ev: &[Ev]) -> Vec<&str> {
    ev.iter().map(|e| e.event.as_str()).collect()
}

/// Waits (bounded) until a file exists; the command writes it when it has started.
fn wait_for(p: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(p)
            && s.ends_with('\n')
        {
            return s.trim().to_owned();
        }
        assert!(Instant::now() < until, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Waits (bounded) until a process is gone; false if it outlived the wait.
fn gone(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn success_gives_the_environment_outputs_and_report() {
    let c = Case::new(
        "10s",
        NO_RETRY,
        &sh(
            "env | grep ^BATCHGUARD_ | sort > env.txt; printf 'k1\\nk2\\n' >> \"$BATCHGUARD_OUTPUTS\"; echo out; echo err >&2",
        ),
    );
    let o = c.run(&["--scheduled-at", SLOT, "--report", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    assert!(
        stderr(&o).contains("err"),
        "stderr reaches the scheduler's log"
    );
    let env = std::fs::read_to_string(c.path("env.txt")).expect("env");
    for want in [
        "BATCHGUARD_JOB=j",
        "BATCHGUARD_SERVICE=svc",
        "BATCHGUARD_SCHEDULED_AT=2026-03-01T02:00:00Z",
        "BATCHGUARD_ATTEMPT=1",
        "BATCHGUARD_FENCE=1",
        "BATCHGUARD_DEADLINE=",
        "BATCHGUARD_RUN_ID=",
        "BATCHGUARD_OUTPUTS=",
        "BATCHGUARD_ERROR=",
    ] {
        assert!(env.contains(want), "{want} missing in {env}");
    }
    assert_eq!(kinds(&c.events()), ["start", "end"]);
    assert_eq!(c.outputs(), ["k1", "k2"]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.path("r.json")).expect("report"))
            .expect("json");
    assert_eq!(r["outcome"], "succeeded");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["attempts"][0]["fence"], 1);
    assert_eq!(r["attempts"][0]["outputs"], 2);
    // The same slot again: skipped, never rerun, exit 0.
    let o = c.run(&["--scheduled-at", SLOT, "--report", "r2.json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("already succeeded (run "),
        "{}",
        stderr(&o)
    );
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end", "skip"]);
    assert!(
        ev[2]
            .detail
            .as_deref()
            .unwrap_or("")
            .starts_with("already succeeded")
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.path("r2.json")).expect("report"))
            .expect("json");
    assert_eq!(r["outcome"], "skipped");
}

#[test]
fn exit_n_is_the_exit_code_and_dead_letters_an_unknown_code() {
    let c = Case::new("10s", RETRY3, &sh("echo boom >&2; exit 3"));
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(3));
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end", "dead_letter"]);
    assert_eq!(ev[1].error_code.as_deref(), Some("EXIT_3"));
    assert!(
        ev[1].detail.as_deref().unwrap_or("").contains("boom"),
        "{:?}",
        ev[1].detail
    );
    // Dead-lettered: the next tick skips it.
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("dead-lettered"));
}

#[test]
fn tempfail_is_retried_with_a_new_fence() {
    let c = Case::new(
        "10s",
        RETRY3,
        &sh(
            "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; echo $BATCHGUARD_FENCE >> fences; [ $n -ge 1 ] || exit 75",
        ),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end", "start", "end"]);
    assert_eq!(ev[1].error_code.as_deref(), Some("EX_TEMPFAIL"));
    assert_eq!(ev[2].trigger, "retry");
    assert_eq!(ev[2].attempt, Some(2));
    assert!(ev[2].fence > ev[0].fence);
    assert_eq!(std::fs::read_to_string(c.path("fences")).unwrap(), "1\n2\n");
}

#[test]
fn a_fatal_code_is_never_retried_and_attempts_run_out() {
    let c = Case::new(
        "10s",
        RETRY3,
        &sh("echo VALIDATION_ERROR > \"$BATCHGUARD_ERROR\"; exit 1"),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(1));
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end", "dead_letter"]);
    assert_eq!(ev[1].error_code.as_deref(), Some("VALIDATION_ERROR"));

    let c = Case::new(
        "10s",
        RETRY3,
        &sh("echo ETIMEDOUT > \"$BATCHGUARD_ERROR\"; exit 1"),
    );
    let o = c.run(&["--scheduled-at", SLOT, "--report", "r.json"]);
    assert_eq!(o.status.code(), Some(1));
    let ev = c.events();
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "end",
            "start",
            "end",
            "start",
            "end",
            "dead_letter"
        ]
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.path("r.json")).expect("report"))
            .expect("json");
    assert_eq!(r["outcome"], "dead_lettered");
    assert_eq!(r["attempts"].as_array().map(Vec::len), Some(3));
}

#[test]
fn a_command_that_ignores_term_is_killed_at_the_deadline() {
    // ttl 3s: grace 0.3s, safety 1s, so TERM at 1.7s and KILL at 2s after the acquire.
    let c = Case::new(
        "3s",
        NO_RETRY,
        &sh("trap '' TERM; echo $$ > pid.tmp; mv pid.tmp pid; while :; do sleep 0.05; done"),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    let ev = c.events();
    assert_eq!(ev[1].error_code.as_deref(), Some("TTL_EXCEEDED"));
    let pid: i32 = std::fs::read_to_string(c.path("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the command outlived run");
}

#[test]
fn sigterm_to_run_is_forwarded_and_ends_interrupted() {
    let c = Case::new(
        "60s",
        RETRY3,
        &sh("echo $$ > pid.tmp; echo >> pid.tmp; mv pid.tmp pid; while :; do sleep 0.05; done"),
    );
    let mut child = c
        .cmd(&["--scheduled-at", SLOT])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid: i32 = wait_for(&c.path("pid")).parse().unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(!alive(pid));
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end"]);
    assert_eq!(ev[1].error_code.as_deref(), Some("INTERRUPTED"));
    // The next run takes the next attempt (the lease was released).
    let c2 = c.run(&["--scheduled-at", SLOT, "--", "true"]);
    assert_eq!(c2.status.code(), Some(0), "{}", stderr(&c2));
    assert_eq!(c.events()[2].attempt, Some(2));
}

#[test]
fn run_sigkilled_takes_its_command_with_it() {
    let c = Case::new(
        "60s",
        NO_RETRY,
        &sh("echo $$ > pid.tmp; echo >> pid.tmp; mv pid.tmp pid; while :; do sleep 0.05; done"),
    );
    let mut child = c.cmd(&["--scheduled-at", SLOT]).spawn().unwrap();
    let pid: i32 = wait_for(&c.path("pid")).parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(gone(pid), "the command survived its supervisor");
}

#[test]
fn a_setsid_grandchild_is_killed() {
    let c = Case::new(
        "60s",
        NO_RETRY,
        &sh(
            "setsid sh -c 'echo $$ > gc.tmp; echo >> gc.tmp; mv gc.tmp gc; exec sleep 60' & while [ ! -f gc ]; do sleep 0.01; done; exit 0",
        ),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let gc: i32 = wait_for(&c.path("gc")).parse().unwrap();
    assert!(!alive(gc), "a descendant outlived the lease");
}

/// A descendant that left the group and is not a child of `run` either: its parent left
/// the group too and is still alive, so only a walk down the process tree finds it.
#[test]
fn descendants_that_left_the_group_are_killed_at_any_depth() {
    let c = Case::new(
        "60s",
        NO_RETRY,
        &sh(
            "setsid sh -c 'setsid sh -c \"echo \\$\\$ > gc.tmp; echo >> gc.tmp; mv gc.tmp gc; exec sleep 60\" & echo $$ > mid.tmp; echo >> mid.tmp; mv mid.tmp mid; wait' & while [ ! -f gc ] || [ ! -f mid ]; do sleep 0.01; done; exit 0",
        ),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mid: i32 = wait_for(&c.path("mid")).parse().unwrap();
    let gc: i32 = wait_for(&c.path("gc")).parse().unwrap();
    assert!(
        !alive(mid),
        "a descendant outside the group outlived the lease"
    );
    assert!(
        !alive(gc),
        "a grandchild outside the group outlived the lease"
    );
}

/// The lease stays held while a descendant is still ending: a second instance started
/// from that descendant's TERM handler, after the command itself has exited, is refused
/// as `held by t1`, and its `skip` is in the ledger before the holder's `end`.
#[test]
fn the_lease_is_released_only_after_the_last_descendant_ended() {
    let second = format!(
        "{} run --manifest m.batchguard.yaml --job j --instance t2 --scheduled-at {SLOT} -- true 2> second.txt",
        bin().display()
    );
    let c = Case::new(
        "60s",
        NO_RETRY,
        &sh(&format!(
            "setsid sh -c 'trap \"{second}; exit 0\" TERM; echo > ready.tmp; mv ready.tmp ready; while :; do sleep 0.05; done' & while [ ! -f ready ]; do sleep 0.01; done; exit 0"
        )),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let second = std::fs::read_to_string(c.path("second.txt")).expect("the second instance ran");
    assert!(second.contains("skipped: held by t1"), "{second}");
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "skip", "end"], "{ev:?}");
    assert_eq!(ev[2].status.as_deref(), Some("success"));
}

/// batchguard runs without transparent huge pages (its allocator turns them off before
/// `main`); the command gets them back, as a process started by the test has them.
#[test]
fn the_command_keeps_the_huge_page_setting_it_was_given() {
    let status = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("THP_enabled:"))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_owned())
    };
    let mine = status(&std::fs::read_to_string("/proc/self/status").expect("status"));
    let c = Case::new(
        "10s",
        NO_RETRY,
        &sh("grep THP_enabled /proc/self/status > thp.txt || true"),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let theirs = status(&std::fs::read_to_string(c.path("thp.txt")).unwrap_or_default());
    assert_eq!(theirs, mine);
}

#[test]
fn malformed_outputs_are_counted_in_detail() {
    let c = Case::new(
        "10s",
        NO_RETRY,
        &sh("printf 'a\\n\\nb\\n' >> \"$BATCHGUARD_OUTPUTS\""),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(c.outputs(), ["a", "b"]);
    let ev = c.events();
    assert_eq!(
        ev[1].detail.as_deref(),
        Some("1 malformed output line skipped: line 2 (empty)")
    );
}

/// The outputs are written in one statement (a JSON array): every key comes back as the
/// job wrote it, in its order, whatever JSON or SQL would make of it.
#[test]
fn outputs_keep_their_bytes_and_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut keys: Vec<String> = [
        r#"quote"in"#,
        r"back\slash",
        "tab\there",
        "ünïcödé-💳",
        "'; DROP TABLE batchguard_outputs; --",
        "[1, 2]",
        "null",
    ]
    .iter()
    .map(|k| (*k).to_owned())
    .collect();
    keys.push("k".repeat(1000));
    keys.extend((0..3000).map(|i| format!("pay-{i:05}")));
    std::fs::write(dir.path().join("keys.txt"), keys.join("\n") + "\n").expect("keys");
    let c = Case::new(
        "10s",
        NO_RETRY,
        &sh(&format!(
            "cat '{}' >> \"$BATCHGUARD_OUTPUTS\"",
            dir.path().join("keys.txt").display()
        )),
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(c.outputs(), keys);
}

#[test]
fn not_found_not_executable_and_refusals() {
    let c = Case::new("10s", NO_RETRY, "[\"true\"]");
    let o = c.run(&["--scheduled-at", SLOT, "--", "./no-such-program"]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert_eq!(c.events()[1].error_code.as_deref(), Some("SPAWN_FAILED"));
    std::fs::write(c.path("plain.txt"), "x").unwrap();
    let o = c.run(&[
        "--scheduled-at",
        "2026-03-01T03:00:00Z",
        "--",
        "./plain.txt",
    ]);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    // Not a slot of the schedule.
    let o = c.run(&["--scheduled-at", "2026-03-01T02:00:30Z"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("is not a slot"), "{}", stderr(&o));
    // A one-string command and a ttl too short are refused before anything runs.
    let c = Case::new("10s", NO_RETRY, "\"echo hi\"");
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("one-string command"), "{}", stderr(&o));
    let c = Case::new("1s", NO_RETRY, "[\"true\"]");
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("too short"), "{}", stderr(&o));
}

#[test]
fn store_unreachable_runs_nothing_and_prints_the_replay() {
    let c = Case::new("10s", NO_RETRY, &sh("touch ran"));
    let o = c.run(&[
        "--store",
        "sqlite:/proc/no/such/dir/store.db",
        "--scheduled-at",
        SLOT,
    ]);
    assert_eq!(o.status.code(), Some(125));
    assert!(!c.path("ran").exists(), "the command ran without a lock");
    let e = stderr(&o);
    assert!(e.contains("slot 2026-03-01T02:00:00Z did not run"), "{e}");
    assert!(e.contains("batchguard run --manifest m.batchguard.yaml --job j --store 'sqlite:/proc/no/such/dir/store.db' --scheduled-at 2026-03-01T02:00:00Z"), "{e}");
}

#[test]
fn manual_recovery_reruns_a_dead_lettered_slot_only() {
    let c = Case::new("10s", NO_RETRY, &sh("[ -f ok ] || exit 4"));
    assert_eq!(c.run(&["--scheduled-at", SLOT]).status.code(), Some(4));
    std::fs::write(c.path("ok"), "").unwrap();
    let o = c.run(&["--scheduled-at", SLOT]);
    assert!(stderr(&o).contains("dead-lettered"));
    let o = c.run(&[
        "--scheduled-at",
        SLOT,
        "--manual",
        "--reason",
        "fixed the input",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = c.events();
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "end",
            "dead_letter",
            "skip",
            "manual",
            "start",
            "end"
        ]
    );
    assert_eq!(ev[4].detail.as_deref(), Some("fixed the input"));
    assert_eq!(ev[5].trigger, "manual");
    // Succeeded: not even a manual run reruns it.
    let o = c.run(&["--scheduled-at", SLOT, "--manual", "--reason", "again"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("already succeeded"));
    assert_eq!(c.events().iter().filter(|e| e.event == "start").count(), 2);
}

#[test]
fn ledger_unreachable_after_the_acquire_is_spooled_and_flushed() {
    // The command drops the outputs table, so the run's end cannot be written.
    let c = Case::new(
        "10s",
        NO_RETRY,
        "[\"python3\", \"-c\", \"import os, sqlite3; open(os.environ['BATCHGUARD_OUTPUTS'], 'a').write('k1\\\\n'); c = sqlite3.connect('.batchguard/store.db'); c.execute('DROP TABLE batchguard_outputs'); c.commit()\"]",
    );
    let o = c.run(&["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("spooled to"), "{}", stderr(&o));
    let spooled: Vec<_> = std::fs::read_dir(c.path(".batchguard/spool"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(spooled.len(), 1);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        spooled[0].metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(kinds(&c.events()), ["start"]);
    let m = Command::new(bin())
        .current_dir(c.dir.path())
        .args(["store", "migrate"])
        .output()
        .unwrap();
    assert!(m.status.success());
    let f = Command::new(bin())
        .current_dir(c.dir.path())
        .args(["store", "flush"])
        .output()
        .unwrap();
    assert!(f.status.success(), "{}", stderr(&f));
    assert_eq!(kinds(&c.events()), ["start", "end"]);
    assert_eq!(
        std::fs::read_dir(c.path(".batchguard/spool"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(c.outputs(), ["k1"]);
}
