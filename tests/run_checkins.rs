//! Check-ins from `batchguard run` (docs/checkins.md) against a local server that records
//! what each service's documented API receives: Healthchecks' pinging API, Cronitor's
//! telemetry API and Sentry's check-in envelopes. Real `run` processes, a SQLite store.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use common::{bin, sh};
use recorder::{Answer, Recorder, Req};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const SLOT: &str = "2026-03-01T02:00:00Z";
const NO_RETRY: &str = "      max_attempts: 1\n";

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// One job `j` of service `svc`; `defaults` and `monitor` are YAML blocks indented for
    /// their place (`defaults:` at the top, `monitor:` inside the job).
    fn new(defaults: &str, monitor: &str, retry: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\n{defaults}jobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 10s\n    retry:\n{retry}{monitor}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn run(&self, extra: &[&str]) -> Output {
        Command::new(bin())
            .current_dir(self.dir.path())
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--instance", "t1", "--scheduled-at", SLOT])
            .args(extra)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::null())
            .output()
            .expect("run")
    }

    fn report(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.path(name)).expect("report"))
            .expect("json")
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `monitor:` inside the job, with the given lines (each indented by six spaces).
fn monitor(lines: &[String]) -> String {
    let mut s = "    monitor:\n".to_owned();
    for l in lines {
        s.push_str("      ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// The lines of a Sentry envelope: header, item header, item.
fn envelope(r: &Req) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let text = r.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "an envelope of one item: {text}");
    let p = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("envelope line");
    (p(lines[0]), p(lines[1]), p(lines[2]))
}

#[test]
fn a_success_is_a_start_and_a_success_with_one_run_id_from_defaults() {
    let hc = Recorder::start(Answer::Status(200));
    let defaults = format!(
        "defaults:\n  monitor:\n    healthchecks: \"{}/ping/KEY/{{job}}?create=1\"\n",
        hc.base
    );
    let c = Case::new(&defaults, "", NO_RETRY, &sh("echo done"));
    let o = c.run(&["--report", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = hc.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/ping/KEY/j/start", "/ping/KEY/j"], "{reqs:?}");
    let rid = reqs[0].q("rid").expect("rid");
    assert_eq!(rid.len(), 36, "a UUID: {rid}");
    assert_eq!(
        reqs[1].q("rid"),
        Some(rid),
        "start and end share the run id"
    );
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.q("create"), Some("1"), "the URL's own query is kept");
    }
    assert!(
        reqs[0].text().contains("attempt 1 started on t1"),
        "{}",
        reqs[0].text()
    );
    assert!(reqs[1].text().contains("succeeded"), "{}", reqs[1].text());
    let r = c.report("r.json");
    assert_eq!(r["notifications"]["sent"], 2);
    assert_eq!(r["notifications"]["failed"], serde_json::json!([]));
}

#[test]
fn a_failure_reaches_each_service_with_its_exit_code_and_last_stderr_line() {
    let srv = Recorder::start(Answer::Status(200));
    let b = &srv.base;
    let m = monitor(&[
        format!("healthchecks: \"{b}/hc/uuid-1\""),
        format!("cronitor: \"{b}/p/API/{{service}}-{{job}}\""),
        "sentry:".into(),
        format!(
            "  dsn: \"{}\"",
            b.replacen("http://", "http://pubkey@", 1) + "/42"
        ),
        "  monitor_slug: \"{job}-cron\"".into(),
        "  environment: staging".into(),
    ]);
    let c = Case::new("", &m, NO_RETRY, &sh("echo boom >&2; exit 3"));
    let o = c.run(&["--report", "r.json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let reqs = srv.requests();
    let hc: Vec<&Req> = reqs.iter().filter(|r| r.path.starts_with("/hc/")).collect();
    let cr: Vec<&Req> = reqs.iter().filter(|r| r.path.starts_with("/p/")).collect();
    let se: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.path.starts_with("/api/"))
        .collect();

    // Healthchecks: /start, then /<exit status> with the error code and the stderr line.
    assert_eq!(hc.len(), 2, "{hc:?}");
    assert_eq!(hc[0].path, "/hc/uuid-1/start");
    assert_eq!(hc[1].path, "/hc/uuid-1/3");
    assert_eq!(hc[0].q("rid"), hc[1].q("rid"));
    assert!(
        hc[1].text().contains("failed (EXIT_3): boom"),
        "{}",
        hc[1].text()
    );

    // Cronitor: state=run, then state=fail with the status code, in one series.
    assert_eq!(cr.len(), 2, "{cr:?}");
    assert!(
        cr.iter()
            .all(|r| r.method == "GET" && r.path == "/p/API/svc-j")
    );
    assert_eq!(cr[0].q("state"), Some("run"));
    assert_eq!(cr[1].q("state"), Some("fail"));
    assert_eq!(cr[1].q("status_code"), Some("3"));
    assert_eq!(cr[0].q("series"), cr[1].q("series"));
    assert_eq!(cr[0].q("host"), Some("t1"));
    assert!(cr[1].q("message").unwrap_or("").contains("boom"));
    assert!(cr[1].q("metric").unwrap_or("").starts_with("duration:"));

    // Sentry: two check_in envelopes to the DSN's project, one check_in_id.
    assert_eq!(se.len(), 2, "{se:?}");
    for r in &se {
        assert_eq!(r.path, "/api/42/envelope/");
        assert_eq!(
            r.header("content-type"),
            Some("application/x-sentry-envelope")
        );
        let auth = r.header("x-sentry-auth").unwrap_or("");
        assert!(
            auth.starts_with("Sentry ") && auth.contains("sentry_key=pubkey"),
            "{auth}"
        );
    }
    let (_, item0, start) = envelope(se[0]);
    let (_, _, end) = envelope(se[1]);
    assert_eq!(item0["type"], "check_in");
    assert_eq!(start["status"], "in_progress");
    assert_eq!(start["monitor_slug"], "j-cron");
    assert_eq!(start["environment"], "staging");
    assert_eq!(end["status"], "error");
    assert_eq!(end["check_in_id"], start["check_in_id"]);
    assert_eq!(start["check_in_id"].as_str().map(str::len), Some(32));
    assert!(end["duration"].as_f64().is_some_and(|d| d >= 0.0), "{end}");

    let r = c.report("r.json");
    assert_eq!(r["notifications"]["sent"], 6);
}

#[test]
fn a_retried_attempt_is_logged_and_the_slot_is_one_monitored_run() {
    let hc = Recorder::start(Answer::Status(200));
    let m = monitor(&[format!("healthchecks: \"{}/hc/u\"", hc.base)]);
    let retry = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n      on_unknown: dead_letter\n";
    let c = Case::new(
        "",
        &m,
        retry,
        &sh("if [ -e once ]; then exit 0; fi; touch once; echo slow network >&2; exit 75"),
    );
    let o = c.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = hc.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/hc/u/start", "/hc/u/log", "/hc/u"], "{reqs:?}");
    assert!(
        reqs[1]
            .text()
            .contains("attempt 1 failed (EX_TEMPFAIL), retrying")
    );
    assert!(reqs.iter().all(|r| r.q("rid") == reqs[0].q("rid")));
}

#[test]
fn a_second_attempt_at_a_succeeded_slot_is_logged_by_default() {
    let hc = Recorder::start(Answer::Status(200));
    let m = monitor(&[format!("healthchecks: \"{}/hc/u\"", hc.base)]);
    let c = Case::new("", &m, NO_RETRY, &sh("true"));
    assert_eq!(c.run(&[]).status.code(), Some(0));
    let o = c.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = hc.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/hc/u/start", "/hc/u", "/hc/u/log"], "{reqs:?}");
    let body = reqs[2].text();
    assert!(
        body.contains(&format!("slot {SLOT} was attempted again on t1")),
        "{body}"
    );
    assert!(body.contains("already succeeded"), "{body}");
}

#[test]
fn already_succeeded_fail_makes_the_second_attempt_a_failure_everywhere() {
    let srv = Recorder::start(Answer::Status(200));
    let b = &srv.base;
    let m = monitor(&[
        format!("healthchecks: \"{b}/hc/u\""),
        format!("cronitor: \"{b}/p/API/j\""),
        "sentry:".into(),
        format!(
            "  dsn: \"{}\"",
            b.replacen("http://", "http://k@", 1) + "/7"
        ),
        "  monitor_slug: j".into(),
        "already_succeeded: fail".into(),
    ]);
    let c = Case::new("", &m, NO_RETRY, &sh("true"));
    assert_eq!(c.run(&[]).status.code(), Some(0));
    let first = srv.requests().len();
    let o = c.run(&["--report", "r.json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "a skip is still exit 0: {}",
        stderr(&o)
    );
    let second: Vec<Req> = srv.requests().into_iter().skip(first).collect();
    let hc: Vec<&Req> = second
        .iter()
        .filter(|r| r.path.starts_with("/hc/"))
        .collect();
    assert_eq!(hc.len(), 1);
    assert_eq!(hc[0].path, "/hc/u/fail");
    let cr: Vec<&Req> = second
        .iter()
        .filter(|r| r.path.starts_with("/p/"))
        .collect();
    assert_eq!(cr.len(), 1);
    assert_eq!(cr[0].q("state"), Some("fail"));
    assert!(
        cr[0]
            .q("message")
            .unwrap_or("")
            .contains("already succeeded")
    );
    let se: Vec<&Req> = second
        .iter()
        .filter(|r| r.path.starts_with("/api/"))
        .collect();
    assert_eq!(se.len(), 1);
    assert_eq!(envelope(se[0]).2["status"], "error");
    assert_eq!(c.report("r.json")["notifications"]["sent"], 3);
}

#[test]
fn a_black_holed_or_refusing_monitor_neither_holds_nor_fails_the_job() {
    // Accepts connections into its backlog and never answers.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hole_url = format!("http://{}", hole.local_addr().expect("addr"));
    // A port with no listener: connection refused.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    let refusing = Recorder::start(Answer::Status(500));
    let m = monitor(&[
        format!("healthchecks: \"{hole_url}/hc/secret-uuid\""),
        format!("cronitor: \"{closed}/p/SECRETKEY/j\""),
        "sentry:".into(),
        format!(
            "  dsn: \"{}\"",
            refusing.base.replacen("http://", "http://k@", 1) + "/7"
        ),
        "  monitor_slug: j".into(),
        "timeout: 3s".into(),
    ]);
    let c = Case::new("", &m, NO_RETRY, &sh("echo ran > ran.txt"));
    let o = c.run(&["--report", "r.json"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "the job's outcome stands: {err}");
    assert_eq!(
        std::fs::read_to_string(c.path("ran.txt")).expect("ran"),
        "ran\n"
    );
    let r = c.report("r.json");
    assert_eq!(r["outcome"], "succeeded");
    let failed: Vec<String> = r["notifications"]["failed"]
        .as_array()
        .expect("failed")
        .iter()
        .map(|f| f.as_str().unwrap_or("").to_owned())
        .collect();
    // Every request is accounted for: none sent, each failure said.
    assert_eq!(r["notifications"]["sent"], 0, "{failed:?}");
    assert!(
        failed
            .iter()
            .any(|f| f.contains("sentry in_progress") && f.contains("HTTP 500")),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|f| f.starts_with("cronitor run")),
        "{failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with("healthchecks start") && f.contains("no answer within 3000 ms"))
            || failed.iter().any(|f| f.contains("still on their way")),
        "{failed:?}"
    );
    for f in &failed {
        assert!(err.contains(f.as_str()), "said on stderr too: {f}\n{err}");
    }
    assert!(
        err.contains("not delivered (the job is not affected)"),
        "{err}"
    );
    // The keys in the URLs' paths are never shown.
    assert!(
        !err.contains("secret-uuid") && !err.contains("SECRETKEY"),
        "{err}"
    );
    drop(hole);
}

#[test]
fn the_job_starts_while_the_start_check_in_is_still_unanswered() {
    // The server holds its answer until the job has started: a start check-in that the
    // job waited for could only fail (after its 30 s bound), never be sent.
    let dir_gate = tempfile::tempdir().expect("tempdir");
    let gate = dir_gate.path().join("started");
    let hc = Recorder::start(Answer::After(gate.clone()));
    let m = monitor(&[
        format!("healthchecks: \"{}/hc/u\"", hc.base),
        "timeout: 30s".into(),
    ]);
    let script = format!("echo yes > '{}'", gate.display());
    let c = Case::new("", &m, NO_RETRY, &sh(&script));
    let o = c.run(&["--report", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = c.report("r.json");
    assert_eq!(r["notifications"]["sent"], 2, "{r}");
    let paths: Vec<String> = hc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/hc/u/start", "/hc/u"]);
}

#[test]
fn no_monitor_means_no_notifications_in_the_report() {
    let c = Case::new("", "", NO_RETRY, &sh("true"));
    let o = c.run(&["--report", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(c.report("r.json").get("notifications").is_none());
}

#[test]
fn lint_reports_a_bad_monitor_at_its_value_without_its_key() {
    let m = monitor(&[
        "healthchecks: \"ftp://hc-ping.com/0000-secret\"".into(),
        "cronitor: \"https://cronitor.link/p/KEY/{jbo}\"".into(),
        "sentry:".into(),
        "  dsn: \"https://o0.ingest.sentry.io/42\"".into(),
        "  monitor_slug: j".into(),
        "already_succeded: fail".into(),
    ]);
    let c = Case::new("", &m, NO_RETRY, &sh("true"));
    let v = common::lint_json(c.dir.path());
    let bg004: Vec<&str> = common::findings(&v, "BG004")
        .into_iter()
        .map(common::message)
        .collect();
    assert!(
        bg004
            .iter()
            .any(|m| m.contains("is not a check-in URL") && m.contains("https://")),
        "{bg004:?}"
    );
    assert!(
        bg004
            .iter()
            .any(|m| m.contains("unknown placeholder `{jbo}`")),
        "{bg004:?}"
    );
    assert!(
        bg004
            .iter()
            .any(|m| m.contains("is not a Sentry DSN: it has no public key")),
        "{bg004:?}"
    );
    assert!(
        bg004.iter().all(|m| !m.contains("0000-secret")),
        "{bg004:?}"
    );
    let bg002: Vec<&str> = common::findings(&v, "BG002")
        .into_iter()
        .map(common::message)
        .collect();
    assert!(
        bg002.iter().any(|m| m.contains("already_succeded")),
        "{bg002:?}"
    );
    // `run` still runs the job, and says the monitor was left out.
    let o = c.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`monitor.healthchecks` is not valid"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_slot_that_could_not_run_is_a_failure_for_the_monitor() {
    let hc = Recorder::start(Answer::Status(200));
    let m = monitor(&[format!("healthchecks: \"{}/hc/u\"", hc.base)]);
    let c = Case::new("", &m, NO_RETRY, &sh("echo ran > ran.txt"));
    // A store that refuses connections: `run` fails closed, the command does not run.
    let o = c.run(&["--store", "postgres://bg@127.0.0.1:1/none"]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(!c.path("ran.txt").exists());
    let reqs = hc.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/hc/u/125"], "{reqs:?}");
    let body = reqs[0].text();
    assert!(
        body.contains(&format!("slot {SLOT} failed (NOT_RUN)")) && body.contains("exit 125"),
        "{body}"
    );
}

#[test]
fn a_tick_that_finds_the_lease_held_tells_the_monitor_nothing() {
    let hc = Recorder::start(Answer::Status(200));
    let m = monitor(&[
        format!("healthchecks: \"{}/hc/u\"", hc.base),
        "already_succeeded: fail".into(),
    ]);
    // The holder says it started, then waits for the test's go.
    let c = Case::new(
        "",
        &m,
        NO_RETRY,
        &sh("echo up > started; while [ ! -e go ]; do sleep 0.02; done"),
    );
    let mut holder = Command::new(bin());
    holder
        .current_dir(c.dir.path())
        .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
        .args(["--instance", "holder", "--scheduled-at", SLOT])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut holder = holder.spawn().expect("holder");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !c.path("started").exists() {
        assert!(
            std::time::Instant::now() < until,
            "the holder never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = c.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("held by holder"), "{}", stderr(&o));
    std::fs::write(c.path("go"), "").expect("go");
    assert!(holder.wait().expect("wait").success());
    // The holder's start and success; nothing from the tick that was turned away.
    let paths: Vec<String> = hc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/hc/u/start", "/hc/u"]);
}

/// Sentry Crons files check-ins by slug: a Sentry monitor without `monitor_slug` is a
/// missing field at lint time (BG003), not only a note when `run` starts.
#[test]
fn lint_reports_a_sentry_monitor_without_its_slug() {
    let without = monitor(&[
        "sentry:".into(),
        "  dsn: \"https://abc@o0.ingest.sentry.io/42\"".into(),
    ]);
    let c = Case::new("", &without, NO_RETRY, &sh("true"));
    let v = common::lint_json(c.dir.path());
    let bg003: Vec<&str> = common::findings(&v, "BG003")
        .into_iter()
        .map(common::message)
        .collect();
    assert!(
        bg003
            .iter()
            .any(|m| m.contains("the Sentry monitor has no `monitor_slug`")),
        "{bg003:?}"
    );
    let with = monitor(&[
        "sentry:".into(),
        "  dsn: \"https://abc@o0.ingest.sentry.io/42\"".into(),
        "  monitor_slug: \"{job}\"".into(),
    ]);
    let c = Case::new("", &with, NO_RETRY, &sh("true"));
    let v = common::lint_json(c.dir.path());
    assert!(
        common::findings(&v, "BG003")
            .into_iter()
            .map(common::message)
            .all(|m| !m.contains("monitor_slug")),
        "{v}"
    );
}
