//! `batchguard drill` end to end: real `run` processes in sandboxes, the example Node.js
//! jobs (idempotent and naive), shell jobs that drop or double records, hostile snapshots,
//! the digest check and the refusal of a store that is not a fresh sandbox.

mod common;
#[path = "common/stores.rs"]
mod stores;

use common::{bg, need_node};
use serde_json::Value;
use std::path::{Path, PathBuf};
use stores::mysqldb;

const MANIFEST: &str = "examples/jobs/billing.batchguard.yaml";
const SNAPSHOT: &str = "examples/snapshots/settle-payments/2026-03-01T02:00:00Z.jsonl";
const SLOT: &str = "2026-03-01T02:00:00Z";

/// Where the sandboxes a failed drill keeps go: the build's scratch space, not /tmp.
fn tmp() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("drill");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a drill from the repository root; returns the exit code, the JSON report (when
/// stdout held one) and stderr.
fn drill(args: &[&str]) -> (i32, Value, String) {
    let out = bg()
        .current_dir(repo())
        .env("TMPDIR", tmp())
        .arg("drill")
        .args(args)
        .args(["--format", "json"])
        .output()
        .expect("drill runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, stderr)
}

/// [`drill`] of `job` in `manifest` over the example snapshot and its slot, then `rest`.
fn drill_slot(manifest: &str, job: &str, rest: &[&str]) -> (i32, Value, String) {
    let mut args = vec![
        "--manifest",
        manifest,
        "--job",
        job,
        "--snapshot",
        SNAPSHOT,
        "--scheduled-at",
        SLOT,
    ];
    args.extend_from_slice(rest);
    drill(&args)
}

fn scenario<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["scenarios"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no scenario {name} in {r:#}"))
}

/// The scenarios' names, in the report's order.
fn names(r: &Value) -> Vec<&str> {
    r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect()
}

fn n(s: &Value, field: &str) -> u64 {
    s[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {s:#}"))
}

fn fences(s: &Value) -> Vec<i64> {
    s["fences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_i64().unwrap())
        .collect()
}

fn keys(s: &Value) -> Vec<String> {
    s["offending_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

/// A manifest in `dir` with one job whose replay is `replay` (a YAML flow list).
fn manifest(dir: &Path, replay: &str, extra: &str) -> PathBuf {
    let p = dir.join("drill.batchguard.yaml");
    std::fs::write(
        &p,
        format!(
            r##"version: 1
service: billing
jobs:
  - name: settle
    schedule: "0 2 * * *"
    expected_duration: 30s
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: 90s
    retry:
      max_attempts: 3
      backoff: fixed
      initial_delay: 10s
    snapshot:
      path: "snapshots/{{scheduled_at}}.jsonl"
      key: payment_id
    runbook:
      owner: billing-team
      on_call: "#billing-oncall"
      communication: "#billing-incidents"
    replay:
      command: {replay}
{extra}"##
        ),
    )
    .unwrap();
    p
}

/// Applies every record of the snapshot at once, every time (a naive job in one `sed`).
const SH_NAIVE: &str = r#"["sh", "-c", "sed -n 's/.*\"payment_id\":\"\\([^\"]*\\)\".*/\\1/p' \"$0\" >> \"$BATCHGUARD_OUTPUTS\"", "{snapshot}"]"#;
/// Applies all but every tenth record.
const SH_DROPS: &str = r#"["sh", "-c", "sed -n 's/.*\"payment_id\":\"\\([^\"]*\\)\".*/\\1/p' \"$0\" | awk 'NR % 10 != 0' >> \"$BATCHGUARD_OUTPUTS\"", "{snapshot}"]"#;

fn abs(p: &str) -> String {
    repo().join(p).display().to_string()
}

#[test]
fn the_idempotent_example_passes_every_scenario() {
    if !need_node(16) {
        return;
    }
    let (code, r, err) = drill_slot(MANIFEST, "settle-payments", &["--jobs", "2"]);
    assert_eq!(code, 0, "{err}\n{r:#}");
    assert_eq!(r["passed"], true);
    assert_eq!(r["counted_by"], "verify");
    // Its state is under BATCHGUARD_SANDBOX (seen after `clean`): two sandboxes at a time,
    // reported in the fixed order whatever finished first.
    assert_eq!(r["scenarios_at_once"], 2, "{r:#}");
    let names = names(&r);
    assert_eq!(
        names,
        ["clean", "rerun", "concurrent", "crash", "retry", "stale"]
    );
    assert_eq!(r["scheduled_at"], SLOT);
    for s in r["scenarios"].as_array().unwrap() {
        assert_eq!(s["passed"], true, "{s:#}");
        assert_eq!(n(s, "inputs"), 40);
        assert_eq!(n(s, "duplicates"), 0);
        assert_eq!(n(s, "missing"), 0);
        assert_eq!(n(s, "unexpected"), 0);
    }
    assert_eq!(n(scenario(&r, "clean"), "outputs"), 40);
    assert_eq!(fences(scenario(&r, "clean")), [1]);
    // The rerun continues clean's sandbox: a new fence, nothing new applied.
    assert_eq!(n(scenario(&r, "rerun"), "outputs"), 0);
    assert_eq!(fences(scenario(&r, "rerun")), [2]);
    let c = scenario(&r, "concurrent");
    assert_eq!(n(c, "attempts"), 1);
    let skips = c["skip_reasons"].as_array().unwrap();
    assert_eq!(skips.len(), 2, "{c:#}");
    assert!(
        skips
            .iter()
            .all(|s| s.as_str().unwrap().starts_with("held by concurrent-"))
    );
    for name in ["crash", "retry", "stale"] {
        let s = scenario(&r, name);
        assert_eq!(n(s, "attempts"), 2, "{s:#}");
        assert_eq!(fences(s), [1, 2], "{s:#}");
        assert!(s["recovery_seconds"].is_number(), "{s:#}");
    }
}

#[test]
fn the_idempotent_job_counted_by_its_outputs_passes_too() {
    if !need_node(16) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        r#"["node", "examples/jobs/settle-idempotent.js", "--input", "{snapshot}"]"#,
        "",
    );
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--scenarios", "rerun,concurrent,stale"],
    );
    assert_eq!(code, 0, "{err}\n{r:#}");
    assert_eq!(r["counted_by"], "outputs_file");
    let names = names(&r);
    // Selecting rerun runs clean first.
    assert_eq!(names, ["clean", "rerun", "concurrent", "stale"]);
    assert_eq!(n(scenario(&r, "clean"), "outputs"), 40);
    assert_eq!(n(scenario(&r, "rerun"), "outputs"), 0);
    // The stale holder stopped at its fence: each record reported once over both holders.
    assert_eq!(n(scenario(&r, "stale"), "outputs"), 40);
}

#[test]
fn the_naive_example_fails_rerun_crash_retry_and_stale_with_the_keys_it_doubled() {
    if !need_node(16) {
        return;
    }
    let (code, r, err) = drill_slot(MANIFEST, "settle-payments-naive", &["--jobs", "2"]);
    assert_eq!(code, 1, "{err}\n{r:#}");
    assert_eq!(r["passed"], false);
    assert_eq!(r["counted_by"], "outputs_file");
    // Its `settled.log` is under BATCHGUARD_SANDBOX too: in parallel.
    assert_eq!(r["scenarios_at_once"], 2, "{r:#}");
    let clean = scenario(&r, "clean");
    assert_eq!(clean["passed"], true);
    assert_eq!(n(clean, "outputs"), 40);
    let rerun = scenario(&r, "rerun");
    assert_eq!(rerun["passed"], false);
    assert_eq!((n(rerun, "outputs"), n(rerun, "duplicates")), (40, 40));
    let expected: Vec<String> = (1..=20).map(|i| format!("pay-{i:04}")).collect();
    assert_eq!(keys(rerun), expected);
    assert!(
        rerun["reason"]
            .as_str()
            .unwrap()
            .contains("applied 40 outputs again")
    );
    // The lock works whatever the job does.
    assert_eq!(scenario(&r, "concurrent")["passed"], true);
    for name in ["crash", "retry"] {
        let s = scenario(&r, name);
        assert_eq!(s["passed"], false, "{s:#}");
        let dup = n(s, "duplicates");
        assert!(dup >= 1, "{s:#}");
        // What the first attempt applied before it died is applied again by the recovery.
        assert_eq!(n(s, "outputs"), 40 + dup, "{s:#}");
        assert_eq!(n(s, "missing"), 0);
        assert_eq!(keys(s)[0], "pay-0001");
    }
    let stale = scenario(&r, "stale");
    assert_eq!(stale["passed"], false);
    // The second holder applies all 40, the resumed first one the rest of its 40 again.
    assert_eq!((n(stale, "outputs"), n(stale, "duplicates")), (80, 40));
}

#[test]
fn a_job_that_drops_records_fails_clean_with_the_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_DROPS, "");
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--scenarios", "clean,crash", "--jobs", "2"],
    );
    assert_eq!(code, 1, "{err}");
    // It keeps nothing under BATCHGUARD_SANDBOX, and has no setup: one sandbox at a time.
    assert_eq!(r["scenarios_at_once"], 1, "{r:#}");
    let s = scenario(&r, "clean");
    assert_eq!(s["passed"], false);
    assert_eq!(
        (
            n(s, "inputs"),
            n(s, "outputs"),
            n(s, "missing"),
            n(s, "duplicates")
        ),
        (40, 36, 4, 0)
    );
    assert_eq!(keys(s), ["pay-0010", "pay-0020", "pay-0030", "pay-0040"]);
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("4 records were never applied")
    );
}

#[test]
fn outputs_that_name_no_record_are_unexpected() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        r#"["sh", "-c", "sed -n 's/.*\"payment_id\":\"\\([^\"]*\\)\".*/\\1/p' \"$0\" >> \"$BATCHGUARD_OUTPUTS\"; echo ghost-1 >> \"$BATCHGUARD_OUTPUTS\"", "{snapshot}"]"#,
        "",
    );
    let (code, r, _) = drill_slot(m.to_str().unwrap(), "settle", &["--scenarios", "clean"]);
    assert_eq!(code, 1);
    let s = scenario(&r, "clean");
    assert_eq!((n(s, "outputs"), n(s, "unexpected")), (41, 1));
    assert_eq!(keys(s), ["ghost-1"]);
}

/// Seconds, instants and paths vary from run to run; the rest of the report is the contract.
fn normalized(mut r: Value) -> String {
    r["started_at"] = "STARTED_AT".into();
    r["snapshot"] = "SNAPSHOT".into();
    assert!(
        r["job_cpu_seconds"].as_f64().is_some_and(|c| c >= 0.0),
        "{r:#}"
    );
    r["job_cpu_seconds"] = "CPU".into();
    for s in r["scenarios"].as_array_mut().unwrap() {
        s["seconds"] = "SECONDS".into();
    }
    serde_json::to_string_pretty(&r).unwrap()
}

#[test]
fn json_report_of_a_naive_shell_job() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_NAIVE, "");
    let (code, r, err) = drill_slot(m.to_str().unwrap(), "settle", &["--scenarios", "rerun"]);
    assert_eq!(code, 1, "{err}");
    insta::assert_snapshot!(normalized(r));
}

/// A passed scenario's sandbox is removed while the next one runs; a failed one's is kept
/// with the root, and the job CPU of both is still reported.
#[test]
fn a_failed_drill_keeps_the_failed_sandboxes_only() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_NAIVE, "");
    // The naive job passes `concurrent` (one instance runs) and fails `crash`.
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--scenarios", "concurrent,crash"],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(scenario(&r, "concurrent")["passed"], true, "{r:#}");
    assert_eq!(scenario(&r, "crash")["passed"], false, "{r:#}");
    assert!(
        r["job_cpu_seconds"].as_f64().is_some_and(|c| c > 0.0),
        "{r:#}"
    );
    let kept = err
        .split("kept in ")
        .nth(1)
        .expect("the root is named")
        .trim();
    let mut names: Vec<String> = std::fs::read_dir(kept)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["crash"], "in {kept}");
    let _ = std::fs::remove_dir_all(kept);
}

#[test]
fn markdown_report_is_the_quarterly_record() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_NAIVE, "");
    let out_file = dir.path().join("drill.md");
    let out = bg()
        .current_dir(repo())
        .env("TMPDIR", tmp())
        .args([
            "drill",
            "--manifest",
            m.to_str().unwrap(),
            "--job",
            "settle",
        ])
        .args([
            "--snapshot",
            SNAPSHOT,
            "--scheduled-at",
            SLOT,
            "--scenarios",
            "rerun",
        ])
        .args(["--format", "markdown", "--out", out_file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = std::fs::read_to_string(&out_file).unwrap();
    for want in [
        "# Recovery drill: billing / settle",
        "FAILED: 1 of 2 scenarios passed; rerun failed",
        "| owner | billing-team |",
        "| on call | #billing-oncall |",
        "| communication | #billing-incidents |",
        "| snapshot digest | `sha256:",
        "| rerun | **failed** | 40 | 40 | 40 | 0 | 0 | 1 | 2 |",
        "### rerun",
        "the job is not idempotent",
        "First keys: `pay-0001`",
    ] {
        assert!(md.contains(want), "{want:?} not in\n{md}");
    }
    // The sandbox of a failed drill is kept and named.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the sandboxes are kept in"), "{err}");
    let kept = err.split("kept in ").nth(1).unwrap().trim();
    assert!(Path::new(kept).join("clean/logs").is_dir());
    let _ = std::fs::remove_dir_all(kept);
}

fn write_ledger(dir: &Path, digest: &str) -> PathBuf {
    let p = dir.join("ledger.jsonl");
    std::fs::write(
        &p,
        format!(
            "{{\"run_id\":\"r1\",\"job\":\"billing/settle\",\"scheduled_at\":\"{SLOT}\",\"event\":\"start\",\"at\":\"2026-03-01T02:00:01Z\",\"attempt\":1,\"snapshot_digest\":\"{digest}\"}}\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_snapshot_that_is_not_the_slots_input_stops_the_drill_before_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let touched = dir.path().join("ran");
    let m = manifest(
        dir.path(),
        &format!(r#"["touch", "{}"]"#, touched.display()),
        "",
    );
    let ledger = write_ledger(dir.path(), &format!("sha256:{}", "0".repeat(64)));
    let sandbox = dir.path().join("sandbox");
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &[
            "--ledger",
            ledger.to_str().unwrap(),
            "--sandbox",
            sandbox.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["passed"], false);
    assert_eq!(r["ledger_digest"]["matches"], false);
    assert!(
        r["ledger_digest"]["note"]
            .as_str()
            .unwrap()
            .contains("differs from sha256:000")
    );
    assert_eq!(r["scenarios"].as_array().unwrap().len(), 0);
    assert!(!touched.exists(), "the job ran");
    assert!(!sandbox.exists(), "a sandbox was made");

    // The right digest lets the drill run.
    let bytes = std::fs::read(repo().join(SNAPSHOT)).unwrap();
    let digest = r["snapshot_digest"].as_str().unwrap().to_owned();
    assert!(digest.starts_with("sha256:") && bytes.len() > 100);
    let ledger = write_ledger(dir.path(), &digest);
    let m = manifest(dir.path(), SH_NAIVE, "");
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--ledger", ledger.to_str().unwrap(), "--scenarios", "clean"],
    );
    assert_eq!(code, 0, "{err}\n{r:#}");
    assert_eq!(r["ledger_digest"]["matches"], true);

    // A ledger without the slot's start is an error, not a silent pass.
    let (code, _, err) = drill(&[
        "--manifest",
        m.to_str().unwrap(),
        "--job",
        "settle",
        "--snapshot",
        SNAPSHOT,
        "--scheduled-at",
        "2026-03-02T02:00:00Z",
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("has no `start` of job `settle` for slot 2026-03-02T02:00:00Z"),
        "{err}"
    );
}

#[test]
fn a_store_that_is_not_a_fresh_sandbox_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let touched = dir.path().join("ran");
    let m = manifest(
        dir.path(),
        &format!(r#"["touch", "{}"]"#, touched.display()),
        "",
    );
    // A store `run` has used.
    let used = dir.path().join("store.db");
    let st = bg()
        .current_dir(dir.path())
        .args(["store", "migrate", "--store"])
        .arg(format!("sqlite:{}", used.display()))
        .output()
        .unwrap();
    assert!(st.status.success());
    let before = std::fs::read(&used).unwrap();
    for store in [
        format!("sqlite:{}", used.display()),
        "postgres://batchguard:hunter2@127.0.0.1:1/prod".to_owned(),
    ] {
        let (code, _, err) = drill_slot(m.to_str().unwrap(), "settle", &["--store", &store]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("is not a fresh sandbox"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
    assert_eq!(std::fs::read(&used).unwrap(), before);
    assert!(!touched.exists());

    // A sqlite file that does not exist yet is a fresh sandbox: clean's store.
    let fresh = dir.path().join("fresh.db");
    let m = manifest(dir.path(), SH_NAIVE, "");
    let (code, _, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &[
            "--scenarios",
            "clean",
            "--store",
            &format!("sqlite:{}", fresh.display()),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<(i64,)> = common::sqlite_rows(&fresh, "SELECT count(*) FROM batchguard_outputs");
    assert_eq!(rows[0].0, 40);
}

#[test]
fn hostile_snapshots_are_clear_errors_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_NAIVE, "");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "bad-json.jsonl",
            b"{\"payment_id\":\"a\"}\n{\"payment_id\": oops}\n".to_vec(),
            "bad-json.jsonl:2: not a JSON record",
        ),
        (
            "no-key.jsonl",
            b"{\"payment_id\":\"a\"}\n{\"id\":\"b\"}\n".to_vec(),
            "no-key.jsonl:2: the record has no `payment_id` field (snapshot.key)",
        ),
        (
            "nul.jsonl",
            b"{\"payment_id\":\"a\"}\n{\"payment_id\":\"b\0\"}\n".to_vec(),
            "nul.jsonl:2:17: a NUL byte",
        ),
        (
            "twice.jsonl",
            b"{\"payment_id\":\"a\"}\n{\"payment_id\":\"a\"}\n".to_vec(),
            "twice.jsonl:2: record `a` appears twice (first at line 1)",
        ),
        (
            "huge.jsonl",
            vec![b'{'; 100 << 20],
            "huge.jsonl:1: the line is over 1024 KiB",
        ),
    ];
    for (name, bytes, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let (code, _, err) = drill(&[
            "--manifest",
            m.to_str().unwrap(),
            "--job",
            "settle",
            "--snapshot",
            p.to_str().unwrap(),
            "--scheduled-at",
            SLOT,
        ]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(want), "{name}: {want:?} not in {err}");
    }
    let (code, _, err) = drill(&[
        "--manifest",
        m.to_str().unwrap(),
        "--job",
        "settle",
        "--snapshot",
        &abs("examples/snapshots/none.jsonl"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read the snapshot"), "{err}");
}

#[test]
fn what_cannot_be_drilled_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let no_replay = dir.path().join("a.batchguard.yaml");
    std::fs::write(
        &no_replay,
        "version: 1\njobs:\n  - name: settle\n    schedule: \"0 2 * * *\"\n    expected_duration: 30s\n    lock: {ttl: 90s}\n    snapshot: {key: id}\n",
    )
    .unwrap();
    let shell = dir.path().join("shell");
    std::fs::create_dir(&shell).unwrap();
    let one_string = manifest(&shell, r#""node settle.js {snapshot}""#, "");
    let m = manifest(dir.path(), SH_NAIVE, "");
    for (args, want) in [
        (
            vec!["--manifest", no_replay.to_str().unwrap(), "--job", "settle"],
            "has no `replay.command`",
        ),
        (
            vec![
                "--manifest",
                one_string.to_str().unwrap(),
                "--job",
                "settle",
            ],
            "one-string `replay.command`",
        ),
        (
            vec!["--manifest", m.to_str().unwrap(), "--job", "setle"],
            "did you mean `settle`?",
        ),
        (
            vec![
                "--manifest",
                m.to_str().unwrap(),
                "--job",
                "settle",
                "--scenarios",
                "clean,crahs",
            ],
            "`crahs` is not a drill scenario (did you mean `crash`?)",
        ),
        (
            vec![
                "--manifest",
                m.to_str().unwrap(),
                "--job",
                "settle",
                "--scheduled-at",
                "2026-03-01T03:00:00Z",
            ],
            "is not a slot of job `settle`",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--snapshot", SNAPSHOT]);
        let (code, _, err) = drill(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{want:?} not in {err}");
    }
}

#[test]
fn a_scenario_past_its_time_limit_fails_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let m = manifest(
        dir.path(),
        &format!(
            r#"["sh", "-c", "echo $$ > {}; exec sleep 600"]"#,
            pidfile.display()
        ),
        "",
    );
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--scenarios", "clean", "--time-limit", "2s"],
    );
    assert_eq!(code, 1, "{err}");
    let s = scenario(&r, "clean");
    assert!(
        s["reason"].as_str().unwrap().contains("time limit of 2s"),
        "{s:#}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The job died with its guard (parent-death signal): nothing is left running.
    let gone = (0..500).any(|_| {
        // SAFETY: kill with signal 0 only checks for the process.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"));
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        !alive
    });
    assert!(gone, "the job {pid} outlived its drill");
}

#[test]
fn recorded_drills_give_au301_exactly_for_the_job_without_a_passing_drill() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("drills.jsonl");
    drills_then_au301(dir.path(), records.to_str().unwrap());
    let lines: Vec<Value> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["job"], "billing/careful");
    assert_eq!(lines[0]["passed"], true);
    assert_eq!(lines[0]["scenarios"], "clean:passed,rerun:passed");
    assert_eq!(lines[1]["scenarios"], "clean:passed,rerun:failed");
    assert!(
        lines[1]["report_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
}

#[test]
fn drills_recorded_into_mysql_give_the_same_au301() {
    let Some(db) = mysqldb::fresh("drill_record") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    drills_then_au301(dir.path(), &db.url);
    let r = batchguard::read_drills(&db.url, &batchguard::LedgerReadOptions::default())
        .expect("read back");
    let got: Vec<(&str, bool, &str)> = r
        .records
        .iter()
        .map(|d| (d.job.as_str(), d.passed, d.scenarios.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("billing/careful", true, "clean:passed,rerun:passed"),
            ("billing/naive", false, "clean:passed,rerun:failed")
        ]
    );
    assert!(r.records[1].report_digest.starts_with("sha256:"));
}

/// Drills `careful` (passes) and `naive` (fails `rerun`) of a three-job manifest in `dir`,
/// recording both to `records`; then the audit with `--drills records` finds AU301 for
/// `naive` and the job never drilled.
fn drills_then_au301(dir: &Path, records: &str) {
    let m = dir.join("two.batchguard.yaml");
    let job = |name: &str, replay: &str| {
        format!(
            "  - name: {name}\n    schedule: \"0 2 * * *\"\n    expected_duration: 30s\n    lock: {{key: \"{{job}}:{{scheduled_at}}\", ttl: 90s}}\n    snapshot: {{path: \"snapshots/{{scheduled_at}}.jsonl\", key: payment_id}}\n    replay:\n      command: {replay}\n"
        )
    };
    // Exactly once per record, however often it runs: it keeps what it applied.
    let once = r#"["sh", "-c", "mkdir -p \"$BATCHGUARD_SANDBOX/done\"; for k in $(sed -n 's/.*\"payment_id\":\"\\([^\"]*\\)\".*/\\1/p' \"$0\"); do if mkdir \"$BATCHGUARD_SANDBOX/done/$k\" 2>/dev/null; then echo $k >> \"$BATCHGUARD_OUTPUTS\"; fi; done", "{snapshot}"]"#;
    std::fs::write(
        &m,
        format!(
            "version: 1\nservice: billing\njobs:\n{}{}{}",
            job("careful", once),
            job("naive", SH_NAIVE),
            job("never-drilled", once)
        ),
    )
    .unwrap();
    for (name, want) in [("careful", 0), ("naive", 1)] {
        let (code, _, err) = drill_slot(
            m.to_str().unwrap(),
            name,
            &["--scenarios", "rerun", "--record", records],
        );
        assert_eq!(code, want, "{name}: {err}");
    }

    // A ledger with one row; the window ends tomorrow, so today's drills are within the cadence.
    let ledger = dir.join("events.csv");
    std::fs::write(
        &ledger,
        format!("run_id,job,scheduled_at,event,at\nr1,careful,{SLOT},start,{SLOT}\n"),
    )
    .unwrap();
    let now = jiff::Timestamp::now();
    let to = now + jiff::SignedDuration::from_hours(24);
    let from = to - jiff::SignedDuration::from_hours(48);
    let out = bg()
        .args(["audit", "--ledger", ledger.to_str().unwrap()])
        .args(["--manifest", m.to_str().unwrap()])
        .args(["--drills", records])
        .args(["--from", &from.to_string(), "--to", &to.to_string()])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let mut overdue: Vec<&str> = a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "AU301")
        .map(|f| f["job"].as_str().unwrap())
        .collect();
    overdue.sort();
    assert_eq!(overdue, ["naive", "never-drilled"], "{a:#}");
}

#[test]
fn a_time_limit_past_the_clock_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(dir.path(), SH_NAIVE, "");
    let (code, r, err) = drill_slot(
        m.to_str().unwrap(),
        "settle",
        &["--scenarios", "clean", "--time-limit", "99999999999d"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(scenario(&r, "clean")["passed"], true);
}
