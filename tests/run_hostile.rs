//! Hostile input for every file `batchguard run` reads (SPEC 9): the manifest, the outputs
//! file, the `BATCHGUARD_ERROR` file, spool files, and a `--report` path that cannot be
//! written. Never a panic; every refusal located; nothing dropped silently.

mod common;
use common::{bin, sh, sqlite_rows};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SLOT: &str = "2026-03-01T02:00:00Z";

fn manifest(dir: &Path, script: &str) {
    let text = format!(
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 10m\n    retry:\n      max_attempts: 1\n",
        sh(script)
    );
    std::fs::write(dir.join("m.batchguard.yaml"), text).expect("manifest");
}

fn run_in(dir: &Path, manifest: &str, extra: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .args(["run", "--manifest", manifest, "--job", "j"])
        .args(["--scheduled-at", SLOT])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "{e}");
    assert_ne!(o.status.code(), Some(101), "{e}");
}

/// (event, error_code, detail) of the store's events, in order.
fn events(dir: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    sqlite_rows(
        &dir.join(".batchguard/store.db"),
        "SELECT event, error_code, detail FROM batchguard_events ORDER BY rowid",
    )
}

fn outputs(dir: &Path) -> Vec<String> {
    sqlite_rows::<(String,)>(
        &dir.join(".batchguard/store.db"),
        "SELECT output_key FROM batchguard_outputs ORDER BY rowid",
    )
    .into_iter()
    .map(|r| r.0)
    .collect()
}

/// A manifest `run` must refuse with exit 125, quickly, naming `want`; nothing runs.
fn refused(bytes: &[u8], want: &str) {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("bad.yaml"), bytes).expect("write");
    let t = Instant::now();
    let o = run_in(d.path(), "bad.yaml", &["--", "touch", "ran"]);
    no_panic(&o);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(stderr(&o).contains(want), "want {want:?} in {}", stderr(&o));
    assert!(!d.path().join("ran").exists());
    assert!(
        !d.path().join(".batchguard/store.db").exists(),
        "no store before the manifest is good"
    );
}

#[test]
fn a_manifest_over_the_size_limit_is_refused_unread() {
    let mut big = b"version: 1\njobs: []\n# ".to_vec();
    big.resize(9 * 1024 * 1024, b'x');
    refused(&big, "over the 8 MiB limit");
}

#[test]
fn a_device_that_never_ends_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let o = run_in(d.path(), "/dev/zero", &["--", "true"]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("over the 8 MiB limit"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn invalid_yaml_is_refused_with_its_location() {
    refused(
        b"version: 1\nservice: s\njobs:\n  - name: j\n    schedule: [\"* * * * *\"\n",
        "bad.yaml:",
    );
    refused(b"version: 1\nservice: s\njobs:\n  - {name: j\n", "BG001");
}

#[test]
fn binary_garbage_is_refused() {
    refused(b"\xff\xfe\x00\x01version: 1\n\x80\x81", "BG001");
}

#[test]
fn an_alias_bomb_is_refused_fast() {
    let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        y.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    y.push_str("version: 1\nservice: s\njobs: *a11\n");
    refused(y.as_bytes(), "BG006");
}

#[test]
fn garbage_in_the_outputs_file_is_counted_and_the_good_lines_kept_and_a_long_key_hashed() {
    let d = tempfile::tempdir().expect("tempdir");
    manifest(
        d.path(),
        "printf 'ok1\\n\\377\\376junk\\n\\n\\000nul\\n' >> \"$BATCHGUARD_OUTPUTS\"; \
         head -c 5000 /dev/zero | tr '\\000' x >> \"$BATCHGUARD_OUTPUTS\"; \
         printf '\\nok2\\n' >> \"$BATCHGUARD_OUTPUTS\"",
    );
    let o = run_in(d.path(), "m.batchguard.yaml", &[]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The 5,000-byte key is kept as its digest, so a second report of it is still seen.
    let long = batchguard_digest(&"x".repeat(5000));
    assert_eq!(outputs(d.path()), ["ok1", long.as_str(), "ok2"]);
    let ev = events(d.path());
    let end = ev.iter().find(|e| e.0 == "end").expect("end");
    let detail = end.2.as_deref().unwrap_or_default();
    assert!(
        detail.starts_with("3 malformed output lines skipped: line 2 (not UTF-8), line 3 (empty), line 4 (contains NUL)"),
        "{detail}"
    );
    assert!(
        detail.contains("1 output line over 1 KiB kept as sha256:<hex of the line>"),
        "{detail}"
    );
    // Said on stderr too, not only in the ledger.
    let err = stderr(&o);
    assert!(
        err.contains("1 output line over 1 KiB kept as sha256")
            && err.contains("3 malformed output lines skipped"),
        "{err}"
    );
}

/// `sha256:` and the hex digest of a line, as `run` keeps an output key over 1 KiB.
fn batchguard_digest(line: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(line.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[test]
fn a_100_mb_outputs_file_is_read_in_bounded_memory() {
    let d = tempfile::tempdir().expect("tempdir");
    // One 100 MB line, then a good key: the long line is refused without being held.
    manifest(
        d.path(),
        "head -c 104857600 /dev/zero > \"$BATCHGUARD_OUTPUTS\"; echo after >> \"$BATCHGUARD_OUTPUTS\"",
    );
    let o = run_in(d.path(), "m.batchguard.yaml", &["--report", "r.json"]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The key after the huge line starts a line of its own only if a newline ended it; the
    // zeros and `after` are one line here, over 1 KiB: hashed as it streams, never held.
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("r.json")).expect("report"))
            .expect("json");
    assert_eq!(r["attempts"][0]["rejected_output_lines"], 0, "{r}");
    assert_eq!(r["attempts"][0]["outputs"], 1, "{r}");
    let mut line = "\0".repeat(104_857_600);
    line.push_str("after");
    assert_eq!(outputs(d.path()), [batchguard_digest(&line)]);
}

#[test]
fn a_binary_or_huge_error_file_gives_its_first_line_only() {
    let d = tempfile::tempdir().expect("tempdir");
    // 20 MB after a good first line: the code is the first line.
    manifest(
        d.path(),
        "(echo MY_CODE; head -c 20000000 /dev/zero) > \"$BATCHGUARD_ERROR\"; exit 3",
    );
    let o = run_in(d.path(), "m.batchguard.yaml", &[]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let ev = events(d.path());
    let end = ev.iter().find(|e| e.0 == "end").expect("end");
    assert_eq!(end.1.as_deref(), Some("MY_CODE"));

    // Binary garbage (and a first line of 20 MB): no code from the file, the exit's instead.
    let d = tempfile::tempdir().expect("tempdir");
    manifest(
        d.path(),
        "(printf '\\377\\376\\001'; head -c 20000000 /dev/zero) > \"$BATCHGUARD_ERROR\"; exit 3",
    );
    let o = run_in(d.path(), "m.batchguard.yaml", &[]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let ev = events(d.path());
    let end = ev.iter().find(|e| e.0 == "end").expect("end");
    assert_eq!(end.1.as_deref(), Some("EXIT_3"));
}

#[test]
fn corrupt_and_truncated_spool_files_are_reported_and_kept() {
    let d = tempfile::tempdir().expect("tempdir");
    manifest(d.path(), "exit 0");
    let spool = d.path().join(".batchguard/spool");
    std::fs::create_dir_all(&spool).expect("spool");
    let corrupt = spool.join("00000000000000000001-x-finish.json");
    let truncated = spool.join("00000000000000000002-y-skip.json");
    std::fs::write(&corrupt, b"\xff\x00garbage").expect("write");
    std::fs::write(&truncated, br#"{"Event":{"run_id":"r","job":"j","sched"#).expect("write");
    let o = run_in(d.path(), "m.batchguard.yaml", &[]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("00000000000000000001-x-finish.json is not a spool entry")
            && e.contains("00000000000000000002-y-skip.json is not a spool entry"),
        "{e}"
    );
    assert!(corrupt.exists() && truncated.exists());
    let f = Command::new(bin())
        .current_dir(d.path())
        .args(["store", "flush"])
        .output()
        .expect("flush");
    no_panic(&f);
    assert_eq!(f.status.code(), Some(1), "{}", stderr(&f));
    assert!(
        stderr(&f).contains("2 entries left in place"),
        "{}",
        stderr(&f)
    );
    assert!(corrupt.exists() && truncated.exists());
}

#[test]
fn an_unwritable_report_keeps_the_commands_exit_code() {
    let d = tempfile::tempdir().expect("tempdir");
    manifest(d.path(), "exit 3");
    let o = run_in(
        d.path(),
        "m.batchguard.yaml",
        &["--report", "no/such/dir/r.json"],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write the report no/such/dir/r.json"),
        "{}",
        stderr(&o)
    );
    // A directory as the report path: the same.
    std::fs::create_dir(d.path().join("rdir")).expect("mkdir");
    let o = run_in(d.path(), "m.batchguard.yaml", &["--report", "rdir"]);
    no_panic(&o);
    assert!(
        stderr(&o).contains("cannot write the report rdir"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_command_template_that_cannot_be_filled_is_refused_before_the_acquire() {
    let d = tempfile::tempdir().expect("tempdir");
    manifest(d.path(), "{ touch ran; }");
    let o = run_in(d.path(), "m.batchguard.yaml", &[]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(stderr(&o).contains("has no value here"), "{}", stderr(&o));
    assert!(!d.path().join("ran").exists());
    assert!(!d.path().join(".batchguard/store.db").exists());
}
