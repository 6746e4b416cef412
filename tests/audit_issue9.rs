//! `batchguard audit` never passes silently, reads ledgers as teams export them, applies
//! `batchguard.toml`, and shows one clock per report.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const FROM: &str = "2026-03-01T00:00:00Z";
const TO: &str = "2026-03-01T03:00:00Z";

/// An hourly UTC job, `extra` appended to its item.
fn manifest(extra: &str) -> String {
    format!(
        "version: 1\nservice: svc\njobs:\n  - name: hourly\n    schedule: \"0 * * * *\"\n    timezone: UTC\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 15m\n    alerts:\n      max_latency: 10m\n{extra}"
    )
}

const HEADER: &str =
    "run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,snapshot_digest,trigger\n";

/// Every slot of [FROM, TO) started and ended successfully, `end_after` minutes late.
fn clean_events(end_after: u32) -> String {
    let mut s = HEADER.to_owned();
    for h in 0..3 {
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T0{h}:00:00Z,start,2026-03-01T0{h}:00:01Z,pod-a,1,,,,schedule\n"
        ));
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T0{h}:00:00Z,end,2026-03-01T0{h}:{end_after:02}:00Z,pod-a,1,success,,,schedule\n"
        ));
    }
    s
}

struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Self {
        Dir {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        p
    }
}

fn audit(ledger: &Path, manifest: &Path) -> Command {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args(["audit", "--ledger"])
        .arg(ledger)
        .arg("--manifest")
        .arg(manifest)
        .args(["--from", FROM, "--to", TO]);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_clean_ledger_is_clean() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn a_typo_in_a_zone_is_exit_2_with_lints_diagnostic() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace("timezone: UTC", "timezone: Asia/Soeul"),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("BG105 unknown-timezone"), "{err}");
    assert!(err.contains("did you mean `Asia/Seoul`?"), "{err}");
    assert!(err.contains("svc.batchguard.yaml:6:15"), "{err}");
    assert!(err.contains("cannot evaluate 1 manifest job"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_invalid_cron_is_exit_2_with_the_field_underlined() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace("0 * * * *", "0 * * * SUN7"),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("BG101 invalid-cron"), "{err}");
    assert!(
        err.contains("`0 * * * SUN7` is not a valid crontab schedule"),
        "{err}"
    );
    assert!(err.contains("────"), "{err}");
}

#[test]
fn an_unknown_dialect_is_exit_2_with_a_suggestion() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace(
            "service: svc\n",
            "service: svc\ndeployment:\n  scheduler: kubernets\n",
        ),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("BG004 invalid-value"), "{err}");
    assert!(err.contains("did you mean `kubernetes`?"), "{err}");
}

#[test]
fn one_rejected_row_is_au001_and_fails_the_audit() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let mut ev = clean_events(5);
    ev.push_str("r9,hourly,2026-03-01 02:00:00,start,2026-03-01T02:00:01Z,pod-a,1,,,,schedule\n");
    let l = d.write("events.csv", &ev);
    let out = audit(&l, &m)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["code"], "AU001", "{v}");
    assert_eq!(f["name"], "rows-rejected");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["count"], 1);
    let keys = f["keys"].as_array().expect("keys");
    assert!(
        keys[0]
            .as_str()
            .is_some_and(|k| k.ends_with("events.csv:8")),
        "{f}"
    );
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn every_row_rejected_is_exit_2_with_reasons_and_no_slot_findings() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let ev = clean_events(5).replace(":00:00Z,", ":00:00,");
    let l = d.write("events.csv", &ev);
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("no event row"), "{err}");
    assert!(err.contains("events.csv:2"), "{err}");
    assert!(err.contains("6 rejected"), "{err}");
    assert!(!text(&out.stdout).contains("AU101"));
}

#[test]
fn au001_is_in_the_rules_table() {
    let out = Command::cargo_bin("batchguard")
        .expect("binary")
        .args(["explain", "AU001"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("rows-rejected"));
}

// ---- ledgers as teams export them ----

/// The JSON report with the ledger's name taken out (it differs between forms).
fn json_without(out: &std::process::Output, name: &str) -> String {
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    text(&out.stdout).replace(name, "LEDGER")
}

/// A ledger with one rejected row, so its name shows in the report.
fn ledger_with_one_bad_row() -> String {
    let mut ev = clean_events(5);
    ev.push_str("r9,hourly,2026-03-01 02:00:00,start,2026-03-01T02:00:01Z,pod-a,1,,,,schedule\n");
    ev
}

fn plain_json(d: &Dir, m: &Path) -> String {
    let l = d.write("events.csv", &ledger_with_one_bad_row());
    let out = audit(&l, m)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    json_without(&out, &l.display().to_string())
}

#[test]
fn stdin_gives_the_same_report_as_the_file() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let want = plain_json(&d, &m);
    let out = audit(Path::new("-"), &m)
        .args(["--ledger-format", "csv", "--format", "json"])
        .write_stdin(ledger_with_one_bad_row())
        .output()
        .expect("runs");
    assert_eq!(json_without(&out, "stdin"), want);
    // Without --ledger-format, `-` is refused with the flag to use.
    let out = audit(Path::new("-"), &m)
        .write_stdin(ledger_with_one_bad_row())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--ledger-format"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn gzip_and_zstd_give_the_same_report_as_the_file() {
    use std::io::Write;
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let want = plain_json(&d, &m);
    let body = ledger_with_one_bad_row();
    let gz = d.path().join("events.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("create"),
        flate2::Compression::default(),
    );
    enc.write_all(body.as_bytes()).expect("gzip");
    enc.finish().expect("gzip");
    let zst = d.path().join("events.jsonl.zst");
    // The CSV's own header names the JSON keys.
    let cols: Vec<&str> = body.lines().next().unwrap_or("").split(',').collect();
    let jsonl: String = body
        .lines()
        .skip(1)
        .map(|l| {
            let obj: serde_json::Map<String, serde_json::Value> = cols
                .iter()
                .zip(l.split(','))
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(v)))
                .collect();
            serde_json::Value::Object(obj).to_string() + "\n"
        })
        .collect();
    std::fs::write(&zst, zstd::encode_all(jsonl.as_bytes(), 3).expect("zstd")).expect("write");
    let out = audit(&gz, &m)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(json_without(&out, &gz.display().to_string()), want);
    let out = audit(&zst, &m)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    // JSONL lines are numbered without a header line: the bad row is line 7, not 8.
    let got = json_without(&out, &zst.display().to_string())
        .replace("LEDGER:7", "LEDGER:8")
        .replace("\"row\": 7,", "\"row\": 8,");
    assert_eq!(got, want);
}

#[cfg(unix)]
#[test]
fn a_named_pipe_is_read_once() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let want = plain_json(&d, &m);
    let fifo = d.path().join("events.csv");
    std::fs::remove_file(&fifo).expect("rm");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let body = ledger_with_one_bad_row();
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(writer_path, body));
    let out = audit(&fifo, &m)
        .args(["--format", "json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    writer.join().expect("writer").expect("write fifo");
    assert_eq!(json_without(&out, &fifo.display().to_string()), want);
}

/// Two jobs: `hourly` ran clean, `daily` (02:00), deployed before the window, never ran.
fn two_jobs() -> String {
    manifest(
        "  - name: daily\n    schedule: \"0 2 * * *\"\n    timezone: UTC\n    since: 2026-02-01T00:00:00Z\n",
    )
}

#[test]
fn job_filters_the_jobs_and_an_unknown_name_suggests_one() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &two_jobs());
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "daily is missed");
    let out = audit(&l, &m)
        .args(["--job", "hourly", "--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let jobs: Vec<&str> = v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["job"].as_str())
        .collect();
    assert_eq!(jobs, ["hourly"]);
    let out = audit(&l, &m)
        .args(["--job", "svc/daily"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let out = audit(&l, &m)
        .args(["--job", "hourlly"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("did you mean `hourly`?"),
        "{}",
        text(&out.stderr)
    );
    // Without a manifest, --job filters the ledger's jobs.
    let mut ev = clean_events(5);
    ev.push_str("x1,other,2026-03-01T00:00:00Z,end,2026-03-01T00:05:00Z,pod-a,1,success,,,\n");
    let l2 = d.write("events2.csv", &ev);
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    let out = c
        .args(["audit", "--ledger"])
        .arg(&l2)
        .args(["--from", FROM, "--to", TO, "--job", "hourly"])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the orphan end of `other` is left out"
    );
}

#[test]
fn manifest_dir_is_searched_like_lint() {
    let d = Dir::new();
    d.write("deploy/svc.batchguard.yaml", &manifest(""));
    d.write(
        "deploy/nested/other.yaml",
        "version: 1\nservice: other\njobs:\n  - name: nightly\n    schedule: \"0 1 * * *\"\n    since: 2026-02-01T00:00:00Z\n",
    );
    d.write("deploy/values.yaml", "replicas: 3\n");
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &d.path().join("deploy"))
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let missed: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "AU101")
        .filter_map(|f| f["job"].as_str())
        .collect();
    assert_eq!(missed, ["other/nightly"], "{v}");
}

/// An SQLite ledger with only its events table.
#[test]
fn a_database_without_its_outputs_table_skips_au201_with_the_reason() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let db = d.path().join("ledger.db");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&db)
            .create_if_missing(true);
        let mut c = sqlx::SqliteConnection::connect_with(&opts)
            .await
            .expect("sqlite");
        fill(&mut c).await;
    });
    let src = format!("sqlite:{}", db.display());
    check_skips_au201(&src, &m);
}

/// The events of [`clean_events`] in table `batchguard_events` (text columns).
async fn fill<C>(c: &mut C)
where
    for<'c> &'c mut C: sqlx::Executor<'c>,
{
    let cols = "run_id, job, scheduled_at, event, at, instance, attempt, status, error_code, snapshot_digest, trigger";
    let ddl = format!(
        "CREATE TABLE batchguard_events ({})",
        cols.split(", ")
            .map(|c| format!("{c} text"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
        .execute(&mut *c)
        .await
        .expect("ddl");
    for line in clean_events(5).lines().skip(1) {
        let values: Vec<String> = line
            .split(',')
            .map(|v| {
                if v.is_empty() {
                    "NULL".into()
                } else {
                    format!("'{v}'")
                }
            })
            .collect();
        let sql = format!(
            "INSERT INTO batchguard_events ({cols}) VALUES ({})",
            values.join(", ")
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *c)
            .await
            .expect("insert");
    }
}

fn check_skips_au201(src: &str, m: &Path) {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    let out = c
        .args(["audit", "--ledger", src, "--manifest"])
        .arg(m)
        .args(["--from", FROM, "--to", TO, "--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    let out = c
        .args(["audit", "--ledger", src, "--manifest"])
        .arg(m)
        .args(["--from", FROM, "--to", TO])
        .output()
        .expect("runs");
    let shown = text(&out.stdout);
    assert!(shown.contains("skipped AU201, AU202"), "{shown}");
    assert!(shown.contains("has no outputs table"), "{shown}");
}

#[test]
fn a_postgres_ledger_without_its_outputs_table_skips_au201() {
    use sqlx::Connection;
    let url = std::env::var("BATCHGUARD_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let schema = format!("bg9_{}", std::process::id());
    let conn = rt.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sqlx::PgConnection::connect(&url),
        )
        .await
    });
    let mut c = match conn {
        Ok(Ok(c)) => c,
        other => {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "PostgreSQL at {url} is unreachable under CI=true: {other:?}"
            );
            eprintln!("skipping: PostgreSQL at {url} is unreachable");
            return;
        }
    };
    rt.block_on(async {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; SET search_path TO {schema}"
        )))
        .execute(&mut c)
        .await
        .expect("schema");
        fill(&mut c).await;
    });
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let src = format!(
        "{url}?events_table={schema}.batchguard_events&outputs_table={schema}.batchguard_outputs"
    );
    check_skips_au201(&src, &m);
    rt.block_on(async {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&mut c)
            .await
            .expect("drop");
    });
}

// ---- batchguard.toml applies to audit ----

fn codes(out: &std::process::Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["code"].as_str().unwrap_or(""),
                f["severity"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn config_found_from_the_current_directory_sets_check_severities() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    // Every slot ends 15 minutes late: over max_latency 10m, AU106 (a warning).
    let l = d.write("events.csv", &clean_events(15));
    let run = |toml: Option<&str>| {
        let _ = std::fs::remove_file(d.path().join("batchguard.toml"));
        if let Some(t) = toml {
            d.write("batchguard.toml", t);
        }
        audit(&l, &m)
            .current_dir(d.path())
            .args(["--format", "json"])
            .output()
            .expect("runs")
    };
    let out = run(None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(codes(&out), ["AU106 warning"; 3]);
    let out = run(Some("[rules]\nAU106 = \"off\"\n"));
    assert_eq!(out.status.code(), Some(0));
    assert!(codes(&out).is_empty(), "{:?}", codes(&out));
    let out = run(Some("[rules]\nlatency-breach = \"error\"\n"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(codes(&out), ["AU106 error"; 3]);
    // --config names the file explicitly, wherever the audit runs.
    let cfg = d.write("conf/strict.toml", "[rules]\nAU106 = \"error\"\n");
    let _ = std::fs::remove_file(d.path().join("batchguard.toml"));
    let out = audit(&l, &m)
        .arg("--config")
        .arg(&cfg)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_rule_set_by_code_and_by_name_is_a_located_config_error() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let l = d.write("events.csv", &clean_events(5));
    d.write(
        "batchguard.toml",
        "[rules]\nAU106 = \"off\"\nlatency-breach = \"error\"\n",
    );
    let out = audit(&l, &m).current_dir(d.path()).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("sets AU106 twice"), "{err}");
    assert!(err.contains("batchguard.toml:3:1"), "{err}");
    // The same check guards lint.
    d.write(
        "batchguard.toml",
        "[rules]\nlock-ttl-too-long = \"off\"\nBG203 = \"warning\"\n",
    );
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    let out = c
        .current_dir(d.path())
        .args(["lint", "svc.batchguard.yaml"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("sets BG203 twice"), "{err}");
    assert!(err.contains("batchguard.toml:3:1"), "{err}");
}

// ---- one clock per report ----

fn demo(args: &[&str]) -> std::process::Output {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "fixtures/demo/events.csv",
        "--outputs",
        "fixtures/demo/outputs.csv",
        "--manifest",
        "fixtures/demo/billing.batchguard.yaml",
        "--from",
        "2026-03-01T00:00:00+09:00",
        "--to",
        "2026-03-03T00:00:00+09:00",
    ])
    .args(args)
    .output()
    .expect("runs")
}

#[test]
fn a_seoul_window_has_seoul_days_and_times() {
    let html = text(&demo(&["--format", "html"]).stdout);
    assert!(html.contains("<title>2026-03-01: "), "no 03-01 bucket");
    assert!(!html.contains("<title>2026-02-28: "), "a UTC day leaked in");
    assert!(html.contains("times and days in +09:00"));
    let pretty = text(&demo(&[]).stdout);
    let head = pretty.lines().next().unwrap_or("");
    assert_eq!(
        head,
        "batchguard audit 2026-03-01T00:00:00+09:00 .. 2026-03-03T00:00:00+09:00 (times in +09:00)"
    );
    let md = text(&demo(&["--format", "markdown"]).stdout);
    assert!(
        md.starts_with("# Batch audit: 2026-03-01T00:00:00+09:00 to 2026-03-03T00:00:00+09:00")
    );
    assert!(md.contains("| 2026-03-01T05:00:00+09:00 |"), "{md}");
    // --timezone overrides, for the day buckets too; JSON keeps its instants.
    let html = text(&demo(&["--format", "html", "--timezone", "UTC"]).stdout);
    assert!(html.contains("<title>2026-02-28: "));
    let pretty = text(&demo(&["--timezone", "UTC"]).stdout);
    assert!(
        pretty.contains("slot 2026-02-28T20:00:00+00:00"),
        "{pretty}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&demo(&["--format", "json"]).stdout).expect("json");
    assert_eq!(v["window"]["from"], "2026-02-28T15:00:00Z");
    let out = demo(&["--timezone", "Asia/Soeul"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("did you mean `Asia/Seoul`?"));
}

#[test]
fn percentiles_are_rounded_to_the_unit_shown() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest("").replace("10m", "15m"));
    // Runs start at :00:01 and end at :05:00: 299 s long, ended 300 s after the slot.
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    let shown = text(&out.stdout);
    let row = shown
        .lines()
        .find(|l| l.starts_with("hourly"))
        .unwrap_or_default();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[cols.len() - 3..], ["5m", "4m59s", "0"], "{row}");
    let html = text(
        &audit(&l, &m)
            .args(["--format", "html"])
            .output()
            .expect("runs")
            .stdout,
    );
    assert!(html.contains(">p95 5m</text>"), "{html}");
}

#[test]
fn html_labels_fit_and_code_spans_are_code() {
    let html = text(&demo(&["--format", "html"]).stdout);
    for part in html.split("<text ").skip(1) {
        let Some(body) = part.split('>').nth(1) else {
            continue;
        };
        let label = body.split('<').next().unwrap_or("");
        if !label.starts_with("p95") {
            continue;
        }
        let x: f64 = part
            .split("x=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|n| n.parse().ok())
            .expect("x");
        let fits = if part.contains("text-anchor=\"end\"") {
            x - label.len() as f64 * 6.5 >= 0.0
        } else {
            x + label.len() as f64 * 6.5 <= 1000.0
        };
        assert!(fits, "p95 label at {x} clipped: {label}");
    }
    assert!(html.contains("<code>settle-payments</code>"));
    let body = html.split("<body>").nth(1).unwrap_or("");
    assert!(!body.contains('`'), "raw backticks in the HTML");
}

#[test]
fn markdown_parses_with_balanced_code_spans_and_whole_tables() {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let md = text(&demo(&["--format", "markdown"]).stdout);
    let mut in_code_block = false;
    let mut cells = 0usize;
    let mut widths: Vec<usize> = Vec::new();
    let mut tables = 0;
    for ev in Parser::new_ext(&md, Options::ENABLE_TABLES) {
        match ev {
            Event::Text(t) if !in_code_block => {
                assert!(!t.contains('`'), "a code span broke: {t:?}");
            }
            Event::Start(Tag::CodeBlock(_)) => in_code_block = true,
            Event::End(TagEnd::CodeBlock) => in_code_block = false,
            Event::Start(Tag::Table(aligns)) => {
                tables += 1;
                widths.clear();
                widths.push(aligns.len());
            }
            Event::Start(Tag::TableHead | Tag::TableRow) => cells = 0,
            Event::Start(Tag::TableCell) => cells += 1,
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                assert_eq!(Some(&cells), widths.first(), "a table row lost its cells");
            }
            _ => {}
        }
    }
    assert!(tables >= 3, "{md}");
    assert!(
        md.contains("- `fixtures/demo/events.csv:22`: column `scheduled_at`: "),
        "{md}"
    );
}

// ---- exit-2 messages a newcomer understands ----

/// Each way the audit cannot run, in a folder of its own with relative paths, so the
/// messages are stable: stderr of each, separated by the command.
#[test]
fn exit_2_messages() {
    let d = Dir::new();
    d.write(
        "typo.batchguard.yaml",
        &manifest("").replace("timezone: UTC", "timezone: Asia/Soeul"),
    );
    d.write("svc.batchguard.yaml", &manifest(""));
    d.write("events.csv", &clean_events(5));
    d.write(
        "no-offsets.csv",
        &clean_events(5).replace(":00:00Z,", ":00:00,"),
    );
    d.write(
        "unclosed.csv",
        &format!(
            "{HEADER}r1,hourly,\"2026-03-01T00:00:00Z,start,2026-03-01T00:00:01Z,pod-a,1,,,,\n"
        ),
    );
    d.write("empty.db", "");
    d.write(
        "twice.toml",
        "[rules]\nAU106 = \"off\"\nlatency-breach = \"error\"\n",
    );
    let cases: &[&[&str]] = &[
        &[
            "--ledger",
            "events.csv",
            "--manifest",
            "typo.batchguard.yaml",
        ],
        &[
            "--ledger",
            "no-offsets.csv",
            "--manifest",
            "svc.batchguard.yaml",
        ],
        &["--ledger", "unclosed.csv"],
        &["--ledger", "events.csv", "--from", "2026-02-29T00:00:00Z"],
        &["--ledger", "events.csv", "--to", "9999-12-31T23:59:59Z"],
        &["--ledger", "sqlite:nope.db"],
        &[
            "--ledger",
            "events.csv",
            "--manifest",
            "svc.batchguard.yaml",
            "--job",
            "hourlly",
        ],
        &["--ledger", "events.csv", "--timezone", "Asia/Soeul"],
        &["--ledger", "events.csv", "--config", "twice.toml"],
        &["--ledger", "-"],
        &["--ledger", "events.txt"],
    ];
    let mut all = String::new();
    for args in cases {
        let mut c = Command::cargo_bin("batchguard").expect("binary");
        c.current_dir(d.path())
            .env("NO_COLOR", "1")
            .arg("audit")
            .args(*args);
        if !args.contains(&"--from") {
            c.args(["--from", FROM]);
        }
        if !args.contains(&"--to") {
            c.args(["--to", TO]);
        }
        let out = c.write_stdin("").output().expect("runs");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stdout)
        );
        let err = text(&out.stderr);
        for bad in [
            "batchguard::",
            " at line ",
            "sqlite:nope.db: sqlite:nope.db",
        ] {
            assert!(!err.contains(bad), "{args:?}: {err}");
        }
        all.push_str(&format!("$ audit {}\n{err}\n", args.join(" ")));
    }
    insta::assert_snapshot!(all);
}
