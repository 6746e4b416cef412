//! `run --link` (docs/node-protocol.md): the guard driven over JSON lines by a process of
//! its own, as the npm package's `guard()` drives it. The driver here is the test itself,
//! speaking to a real `batchguard run` on a real SQLite store file.

mod common;
use common::{bin, sqlite_rows};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const S0: &str = "2026-03-01T02:00:00Z";
const S1: &str = "2026-03-01T02:01:00Z";

fn service(ttl: &str, retry: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.batchguard.yaml"),
        format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n    retry:\n{retry}"
        ),
    )
    .expect("manifest");
    dir
}

const RETRY: &str = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n      retryable: [ETIMEDOUT]\n";

/// A `run --link` child and its two ends.
struct Driver {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl Driver {
    fn start(dir: &std::path::Path, extra: &[&str]) -> Driver {
        let mut child = Command::new(bin())
            .current_dir(dir)
            .env_remove("BATCHGUARD_STORE")
            .args([
                "run",
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "j",
                "--link",
            ])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let to = child.stdin.take();
        let from = BufReader::new(child.stdout.take().expect("stdout"));
        Driver { child, to, from }
    }

    /// The next line from the guard (`None` at its end).
    fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("a JSON line")),
        }
    }

    /// Reads lines until one whose `event` is `event`.
    fn until(&mut self, event: &str) -> Value {
        loop {
            let m = self
                .next()
                .unwrap_or_else(|| panic!("ended before `{event}`"));
            if m["event"] == event {
                return m;
            }
        }
    }

    fn say(&mut self, v: Value) {
        let to = self.to.as_mut().expect("stdin open");
        writeln!(to, "{v}").expect("write");
        to.flush().expect("flush");
    }

    fn exit(mut self) -> (Option<i32>, String) {
        drop(self.to.take());
        let o = self.child.wait_with_output().expect("wait");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

fn events(dir: &std::path::Path) -> Vec<(String, String, Option<String>, String)> {
    sqlite_rows(
        &dir.join(".batchguard/store.db"),
        "SELECT event, scheduled_at, error_code, \"trigger\" FROM batchguard_events ORDER BY rowid",
    )
}

fn outputs(dir: &std::path::Path) -> Vec<String> {
    sqlite_rows::<(String,)>(
        &dir.join(".batchguard/store.db"),
        "SELECT output_key FROM batchguard_outputs ORDER BY rowid",
    )
    .into_iter()
    .map(|r| r.0)
    .collect()
}

#[test]
fn a_callback_runs_under_the_lease_its_outputs_are_acked_and_the_slot_never_reruns() {
    let d = service("60s", RETRY);
    let mut g = Driver::start(d.path(), &["--scheduled-at", S0]);
    let a = g.until("acquired");
    assert_eq!(a["slot"], S0);
    assert_eq!(a["attempt"], 1);
    assert_eq!(a["fence"], "1", "the fence is a decimal string: {a}");
    assert_eq!(a["trigger"], "schedule");
    assert!(
        a["deadline"].as_str().is_some() && a["abortAt"].as_str().is_some(),
        "{a}"
    );
    g.say(json!({"op": "output", "id": 1, "key": "inv-1"}));
    assert_eq!(g.until("ack"), json!({"event": "ack", "id": 1, "ok": true}));
    g.say(json!({"op": "output", "id": 2, "key": "two\nlines"}));
    let refused = g.until("ack");
    assert_eq!(refused["ok"], false, "{refused}");
    g.say(json!({"op": "done", "status": "success"}));
    let e = g.until("ended");
    assert_eq!(e["status"], "success");
    let r = g.until("result");
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["fence"], "1");
    assert_eq!(g.exit().0, Some(0));
    assert_eq!(outputs(d.path()), ["inv-1"]);

    // Another instance's call on the same slot: skipped, the callback is never called.
    let mut g = Driver::start(d.path(), &["--scheduled-at", S0]);
    let r = g.until("result");
    assert_eq!(r["status"], "skipped");
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("already succeeded (run "),
        "{r}"
    );
    assert_eq!(g.exit().0, Some(0));
}

#[test]
fn a_retryable_error_code_is_retried_with_a_new_fence_and_an_unknown_one_dead_letters() {
    let d = service("60s", RETRY);
    let mut g = Driver::start(d.path(), &["--scheduled-at", S0]);
    let a1 = g.until("acquired");
    g.say(json!({"op": "done", "status": "failure", "code": "ETIMEDOUT", "message": "bank timed out"}));
    let e = g.until("ended");
    assert_eq!(
        (e["status"].clone(), e["code"].clone()),
        (json!("failure"), json!("ETIMEDOUT"))
    );
    assert_eq!(e["retryInMs"], 0, "{e}");
    let a2 = g.until("acquired");
    assert_eq!(a2["attempt"], 2);
    assert!(a2["fence"].as_str() > a1["fence"].as_str(), "{a1} {a2}");
    assert_eq!(a2["trigger"], "retry");
    g.say(json!({"op": "done", "status": "success"}));
    assert_eq!(g.until("result")["status"], "succeeded");
    assert_eq!(g.exit().0, Some(0));

    // A code nobody listed, on_unknown dead_letter: one attempt, dead-lettered.
    let mut g = Driver::start(d.path(), &["--scheduled-at", S1]);
    g.until("acquired");
    g.say(json!({"op": "done", "status": "failure", "code": "VALIDATION"}));
    let r = g.until("result");
    assert_eq!(
        (r["status"].clone(), r["code"].clone()),
        (json!("dead_lettered"), json!("VALIDATION"))
    );
    let (code, err) = g.exit();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("dead-lettered"), "{err}");
    let ev = events(d.path());
    assert!(
        ev.iter().any(|e| e.2.as_deref() == Some("VALIDATION")),
        "{ev:?}"
    );
}

#[test]
fn a_driver_that_dies_ends_its_run_at_once_and_the_next_call_catches_it_up() {
    let d = service("60s", RETRY);
    let mut g = Driver::start(d.path(), &["--scheduled-at", S0]);
    g.until("acquired");
    // The Node.js process is gone (kill -9): its end of the link closes.
    let (code, err) = g.exit();
    assert_eq!(code, Some(129), "{err}");
    assert!(err.contains("was interrupted (SIGHUP)"), "{err}");
    let ev = events(d.path());
    assert_eq!(
        ev.last().and_then(|e| e.2.as_deref()),
        Some("INTERRUPTED"),
        "{ev:?}"
    );
    // The lease is released: the next call (the next tick) catches the slot up, and that
    // one call works that slot only.
    let mut g = Driver::start(d.path(), &["--scheduled-at", S1]);
    let a = g.until("acquired");
    assert_eq!(
        (a["slot"].clone(), a["trigger"].clone()),
        (json!(S0), json!("catch_up"))
    );
    g.say(json!({"op": "done", "status": "success"}));
    let r = g.until("result");
    assert_eq!(
        (r["status"].clone(), r["slot"].clone()),
        (json!("succeeded"), json!(S0))
    );
    assert_eq!(g.exit().0, Some(0));
    // The call after works its own slot.
    let mut g = Driver::start(d.path(), &["--scheduled-at", S1]);
    let a = g.until("acquired");
    assert_eq!(
        (a["slot"].clone(), a["trigger"].clone()),
        (json!(S1), json!("schedule"))
    );
    g.say(json!({"op": "done", "status": "success"}));
    assert_eq!(g.until("result")["status"], "succeeded");
    assert_eq!(g.exit().0, Some(0));
}

#[test]
fn the_deadline_wins_over_a_callback_that_never_settles() {
    // ttl 3s: grace 0.3 s, safety 1 s; the deadline is 2 s after the acquire.
    let d = service("3s", "      max_attempts: 1\n");
    let mut g = Driver::start(d.path(), &["--scheduled-at", S0]);
    g.until("acquired");
    let abort = g.until("abort");
    assert_eq!(abort["reason"], "deadline");
    let e = g.until("ended");
    assert_eq!(e["code"], "TTL_EXCEEDED", "{e}");
    // Too late: the attempt is over, its outputs are refused.
    g.say(json!({"op": "output", "id": 9, "key": "late"}));
    g.say(json!({"op": "done", "status": "success"}));
    let r = g.until("result");
    assert_eq!(r["status"], "dead_lettered", "{r}");
    let (code, _) = g.exit();
    assert_eq!(code, Some(124));
    assert!(outputs(d.path()).is_empty());
}

#[test]
fn what_keeps_run_from_running_is_an_error_line_with_its_case() {
    let d = service("60s", RETRY);
    let cases: [(&[&str], &str); 4] = [
        (
            &["--manifest", "m.batchguard.yaml", "--job", "nope"],
            "E_JOB",
        ),
        (&["--manifest", "missing.yaml", "--job", "j"], "E_MANIFEST"),
        (
            &[
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "j",
                "--store",
                "postgress://u:hunter2@db/x",
            ],
            "E_STORE_URL",
        ),
        (
            &[
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "j",
                "--scheduled-at",
                "2026-03-01T02:00:30Z",
            ],
            "E_SLOT",
        ),
    ];
    for (extra, want) in cases {
        let mut c = Command::new(bin());
        c.current_dir(d.path())
            .env_remove("BATCHGUARD_STORE")
            .args(["run", "--link"])
            .args(extra)
            .stdin(Stdio::null());
        let o = c.output().expect("run");
        assert_eq!(o.status.code(), Some(125), "{extra:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        let first: Value = serde_json::from_str(out.lines().next().expect("a line")).expect("json");
        assert_eq!(first["event"], "error", "{out}");
        assert_eq!(first["code"], want, "{extra:?}: {out}");
        let message = first["message"].as_str().expect("message");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(message),
            "the CLI's message"
        );
        assert!(!out.contains("hunter2"), "{out}");
    }
}
