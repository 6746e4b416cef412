//! `batchguard run` as teams wire it (SPEC 7.1 items 13–20): which store, a host's own
//! failure, every outcome said, who held it, and the catch-up of a slot a deploy cut short.
//! Real processes and signals; "hosts" are working directories sharing one SQLite store
//! file, synchronised on ledger rows and exits.

mod common;
use common::{bin, sqlite_rows};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const S0: &str = "2026-03-01T02:00:00Z";
const S1: &str = "2026-03-01T02:01:00Z";

/// A service folder with a manifest of one job `j` (every minute) and a shared store file.
struct Case {
    dir: tempfile::TempDir,
}

fn manifest(lock_store: Option<&str>, command: &str, retry: &str) -> String {
    let store = lock_store.map_or_else(String::new, |s| format!("      store: {s}\n"));
    format!(
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 30s\n{store}    retry:\n{retry}"
    )
}

const RETRY3: &str = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n";

impl Case {
    fn new(lock_store: Option<&str>, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("m.batchguard.yaml"),
            manifest(lock_store, command, RETRY3),
        )
        .expect("manifest");
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A host: its own working directory (its `.batchguard/`), the service's manifest.
    fn host(&self, name: &str) -> PathBuf {
        let h = self.path(name);
        std::fs::create_dir_all(&h).expect("host dir");
        h
    }

    fn store_url(&self) -> String {
        format!("sqlite:{}", self.path("shared.db").display())
    }

    fn cmd(&self, cwd: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(cwd)
            .env_remove("BATCHGUARD_STORE")
            .env_remove("BATCHGUARD_INSTANCE")
            .env_remove("NODE_APP_INSTANCE")
            .arg("run")
            .arg("--manifest")
            .arg(self.path("m.batchguard.yaml"))
            .args(["--job", "j"])
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, cwd: &Path, extra: &[&str]) -> Output {
        self.cmd(cwd, extra).output().expect("run")
    }

    /// Events of the shared store: (event, scheduled_at, error_code, trigger, instance, detail).
    fn events(&self) -> Vec<Ev> {
        sqlite_rows::<Ev>(
            &self.path("shared.db"),
            "SELECT event, scheduled_at, error_code, \"trigger\", instance, detail \
             FROM batchguard_events ORDER BY rowid",
        )
    }
}

type Ev = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
);

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn kinds(ev: &[Ev]) -> Vec<&str> {
    ev.iter().map(|e| e.0.as_str()).collect()
}

// ------------------------------------------------------------------ which store (item 13)

#[test]
fn a_job_with_a_shared_lock_store_never_falls_back_to_a_local_file() {
    let c = Case::new(Some("postgres"), r#"["touch", "ran"]"#);
    let h = c.host("a");
    let o = c.run(&h, &["--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("`lock.store: postgres`"), "{e}");
    for way in [
        "--store URL",
        "BATCHGUARD_STORE",
        "[run] in batchguard.toml",
    ] {
        assert!(e.contains(way), "{way} not named: {e}");
    }
    assert!(!h.join("ran").exists(), "the command ran");
    assert!(!h.join(".batchguard").exists(), "a local store was made");
}

#[test]
fn a_url_of_another_kind_than_lock_store_is_refused() {
    let c = Case::new(Some("postgres"), r#"["touch", "ran"]"#);
    let h = c.host("a");
    let o = c.run(
        &h,
        &["--store", "redis://127.0.0.1:6379/0", "--ledger", "l.jsonl"],
    );
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("declares `lock.store: postgres`, but the store redis://127.0.0.1:6379/0 (--store) is redis"),
        "{}",
        err(&o)
    );
    assert!(!h.join("ran").exists());
}

#[test]
fn a_string_that_is_no_store_url_is_a_usage_error_not_unreachable() {
    let c = Case::new(None, r#"["touch", "ran"]"#);
    let h = c.host("a");
    for url in ["postgress://u:hunter2@db/x", "sqlite.db"] {
        let o = c.run(&h, &["--store", url, "--scheduled-at", S0]);
        assert_eq!(o.status.code(), Some(125), "{}", err(&o));
        let e = err(&o);
        assert!(e.contains("is not a store URL"), "{e}");
        assert!(!e.contains("unreachable") && !e.contains("replay"), "{e}");
        assert!(!e.contains("hunter2"), "password shown: {e}");
    }
    assert!(!h.join("ran").exists());
}

#[test]
fn the_store_comes_from_the_environment_then_the_config_then_the_default() {
    let c = Case::new(Some("sqlite"), r#"["touch", "ran"]"#);
    let h = c.host("a");
    // BATCHGUARD_STORE.
    let env_db = c.path("from-env.db");
    let o = c
        .cmd(&h, &["--scheduled-at", S0])
        .env("BATCHGUARD_STORE", format!("sqlite:{}", env_db.display()))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(env_db.is_file(), "BATCHGUARD_STORE not used");
    // [run] store in the batchguard.toml beside the manifest; the flag still wins over it.
    let cfg_db = c.path("from-config.db");
    std::fs::write(
        c.path("batchguard.toml"),
        format!("[run]\nstore = \"sqlite:{}\"\n", cfg_db.display()),
    )
    .expect("config");
    let o = c.run(&h, &["--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(cfg_db.is_file(), "[run] store not used");
    let flag_db = c.path("from-flag.db");
    let o = c.run(
        &h,
        &[
            "--store",
            &format!("sqlite:{}", flag_db.display()),
            "--scheduled-at",
            S1,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(flag_db.is_file(), "--store not used");
    // The start event says which kind of store took the lease.
    let detail: Vec<(Option<String>,)> = sqlite_rows(
        &flag_db,
        "SELECT detail FROM batchguard_events WHERE event = 'start'",
    );
    assert_eq!(detail, [(Some("store: sqlite".to_owned()),)]);
    // No config, no env, a sqlite job: the local file.
    std::fs::remove_file(c.path("batchguard.toml")).expect("rm");
    let o = c.run(&h, &["--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(h.join(".batchguard/store.db").is_file());
}

// ------------------------------------------------------- a host's failure (items 14, 18)

/// Makes a host unable to create its run directory: `.batchguard/runs` is a file. (As
/// root, permissions would not stop it; a file in the way does, for every user.)
fn break_host(h: &Path) {
    std::fs::create_dir_all(h.join(".batchguard")).expect("mkdir");
    std::fs::write(h.join(".batchguard/runs"), b"not a directory").expect("file");
}

#[test]
fn a_host_that_cannot_prepare_releases_the_slot_for_another_and_says_why() {
    let c = Case::new(
        None,
        r#"["sh", "-c", "echo k1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );
    let (a, b) = (c.host("a"), c.host("b"));
    break_host(&a);
    let store = c.store_url();
    let o = c.run(&a, &["--store", &store, "--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("could not start on this host"), "{e}");
    assert!(e.contains("cannot prepare its run directory"), "{e}");
    assert!(e.contains("(os error"), "no OS error: {e}");
    assert!(
        e.contains("replay it with: batchguard run")
            && e.contains("--scheduled-at 2026-03-01T02:00:00Z"),
        "{e}"
    );
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end"], "{ev:#?}");
    assert_eq!(ev[1].2.as_deref(), Some("SPAWN_FAILED"));
    // The other host takes the slot: it was released, never dead-lettered.
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let ev = c.events();
    assert_eq!(kinds(&ev), ["start", "end", "start", "end"], "{ev:#?}");
    assert!(ev.iter().all(|e| e.0 != "dead_letter"));
    // And the report of the failed host was written although it ended 125.
    let o = c.run(
        &a,
        &[
            "--store",
            &store,
            "--scheduled-at",
            S1,
            "--report",
            "r.json",
        ],
    );
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("r.json")).expect("report")).expect("json");
    assert_eq!(r["exit_code"], 125, "{r}");
    assert_eq!(r["attempts"][0]["error_code"], "SPAWN_FAILED", "{r}");
}

#[test]
fn every_failed_outcome_is_one_line_on_stderr() {
    let c = Case::new(None, r#"["true"]"#);
    let h = c.host("a");
    let store = c.store_url();
    let script = h.join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("script");
    let cases: [(&[&str], i32, &str); 4] = [
        (&["/nonexistent/cmd"], 127, "could not start on this host"),
        (
            &[script.to_str().expect("utf-8")],
            126,
            "could not start on this host",
        ),
        (&["false"], 1, "failed: EXIT_1"),
        (
            &["sh", "-c", "echo 'connection refused by bank' >&2; exit 3"],
            3,
            "failed: EXIT_3 (last stderr line: connection refused by bank)",
        ),
    ];
    for (i, (argv, code, said)) in cases.iter().enumerate() {
        let slot = format!("2026-03-01T03:{i:02}:00Z");
        let mut args = vec!["--store", &store, "--scheduled-at", &slot, "--"];
        args.extend(argv.iter());
        let o = c.run(&h, &args);
        assert_eq!(o.status.code(), Some(*code), "{argv:?}: {}", err(&o));
        let e = err(&o);
        assert!(e.contains(said), "{argv:?}: {e}");
        assert!(e.contains(&format!("slot {slot} attempt 1 of 3")), "{e}");
    }
}

// ------------------------------------------------------------------ who held it (item 17)

#[test]
fn the_default_instance_tells_pm2_workers_and_processes_apart() {
    let c = Case::new(None, r#"["touch", "ran"]"#);
    let h = c.host("a");
    let store = c.store_url();
    let o = c
        .cmd(&h, &["--store", &store, "--scheduled-at", S0])
        .env("NODE_APP_INSTANCE", "2")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let o = c
        .cmd(&h, &["--store", &store, "--scheduled-at", S1])
        .env("BATCHGUARD_INSTANCE", "billing-7f9c")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let inst: Vec<String> = c
        .events()
        .into_iter()
        .filter(|e| e.0 == "start")
        .filter_map(|e| e.4)
        .collect();
    assert_eq!(inst.len(), 2);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let (head, pid) = inst[0].rsplit_once('/').expect("a pid");
    assert_eq!(head, format!("{}/pm2:2", host.trim()));
    assert!(pid.parse::<u32>().is_ok(), "{}", inst[0]);
    assert_eq!(inst[1], "billing-7f9c");
}

// ------------------------------------------------------------ a deploy's TERM (item 20)

/// Waits (bounded) until the store has a row the predicate accepts.
fn wait_for_event(c: &Case, what: &str, pred: impl Fn(&[Ev]) -> bool) -> Vec<Ev> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let made: Vec<(i64,)> = if c.path("shared.db").is_file() {
            sqlite_rows(
                &c.path("shared.db"),
                "SELECT count(*) FROM sqlite_master WHERE name = 'batchguard_events'",
            )
        } else {
            vec![]
        };
        if made.first().is_some_and(|m| m.0 == 1) {
            let ev = c.events();
            if pred(&ev) {
                return ev;
            }
        }
        assert!(Instant::now() < until, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slot_interrupted_by_a_deploy_is_caught_up_by_the_next_tick_on_any_host() {
    // The job waits for a file the test never writes, so only the signal ends it.
    let c = Case::new(
        None,
        r#"["sh", "-c", "echo \"k-$BATCHGUARD_SCHEDULED_AT\" >> \"$BATCHGUARD_OUTPUTS\"; [ \"$BATCHGUARD_TRIGGER_HOLD\" = 1 ] && exec sleep 600; exit 0"]"#,
    );
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let child = c
        .cmd(&a, &["--store", &store, "--scheduled-at", S0])
        .env("BATCHGUARD_TRIGGER_HOLD", "1")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for_event(&c, "the start", |ev| ev.iter().any(|e| e.0 == "start"));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(143), "{}", err(&o));
    assert!(
        err(&o).contains("was interrupted (SIGTERM)") && err(&o).contains("catches it up"),
        "{}",
        err(&o)
    );
    let ev = c.events();
    assert_eq!(ev.last().and_then(|e| e.2.as_deref()), Some("INTERRUPTED"));

    // The next tick, on another host: slot S0 first (trigger catch_up), then its own.
    let o = c.run(
        &b,
        &[
            "--store",
            &store,
            "--scheduled-at",
            S1,
            "--report",
            "r.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("slot 2026-03-01T02:00:00Z was interrupted (attempt 1 of 3): catching it up before slot 2026-03-01T02:01:00Z"),
        "{}",
        err(&o)
    );
    let ev = c.events();
    let worked: Vec<(&str, &str, &str)> = ev
        .iter()
        .filter(|e| e.0 == "end")
        .map(|e| (e.1.as_str(), e.3.as_str(), e.2.as_deref().unwrap_or("ok")))
        .collect();
    assert_eq!(
        worked,
        [
            (S0, "schedule", "INTERRUPTED"),
            (S0, "catch_up", "ok"),
            (S1, "schedule", "ok")
        ],
        "{ev:#?}"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("r.json")).expect("report")).expect("json");
    assert_eq!(r["scheduled_at"], S1, "{r}");
    assert_eq!(r["caught_up"]["scheduled_at"], S0, "{r}");
    assert_eq!(r["caught_up"]["outcome"], "succeeded", "{r}");

    // Caught up once: a later tick finds nothing left behind.
    let o = c.run(&a, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("already succeeded"), "{}", err(&o));
    assert!(!err(&o).contains("catching"), "{}", err(&o));
}

#[test]
fn a_slot_whose_holder_died_is_caught_up_once_its_lease_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A short lease, so its end comes soon; the job holds until killed.
    let text = manifest(
        None,
        r#"["sh", "-c", "[ \"$BATCHGUARD_TRIGGER_HOLD\" = 1 ] && exec sleep 600; exit 0"]"#,
        RETRY3,
    )
    .replace("ttl: 30s", "ttl: 3s");
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    let c = Case { dir };
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let mut child = c
        .cmd(&a, &["--store", &store, "--scheduled-at", S0])
        .env("BATCHGUARD_TRIGGER_HOLD", "1")
        .spawn()
        .expect("spawn");
    wait_for_event(&c, "the start", |ev| ev.iter().any(|e| e.0 == "start"));
    child.kill().expect("kill -9");
    let _ = child.wait();
    // Lost: the lease ends by itself (a fact of the store, read until it is so).
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Vec<(i64,)> = sqlite_rows(
            &c.path("shared.db"),
            "SELECT lease_until - CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) FROM batchguard_leases",
        );
        if left.iter().all(|l| l.0 < 0) {
            break;
        }
        assert!(Instant::now() < until, "the lease never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("lost its holder"), "{}", err(&o));
    let ends: Vec<(String, String)> = c
        .events()
        .into_iter()
        .filter(|e| e.0 == "end")
        .map(|e| (e.1, e.3))
        .collect();
    assert_eq!(
        ends,
        [
            (S0.to_owned(), "catch_up".to_owned()),
            (S1.to_owned(), "schedule".to_owned())
        ]
    );
}

#[test]
fn catch_up_reaches_back_one_interval_by_default_and_can_be_turned_off() {
    let c = Case::new(None, r#"["true"]"#);
    let h = c.host("a");
    let store = c.store_url();
    // S0 fails to start here (a missing program): unfinished, attempts left.
    let o = c.run(
        &h,
        &[
            "--store",
            &store,
            "--scheduled-at",
            S0,
            "--",
            "/nonexistent/x",
        ],
    );
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    // Two intervals later: too far back for the default window of one interval.
    let o = c.run(
        &h,
        &["--store", &store, "--scheduled-at", "2026-03-01T02:02:00Z"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!err(&o).contains("catching"), "{}", err(&o));
    // With `retry.catch_up: 0s` the next tick does not catch it up either.
    let text = manifest(
        None,
        r#"["true"]"#,
        &format!("{RETRY3}      catch_up: 0s\n"),
    );
    std::fs::write(c.path("m.batchguard.yaml"), text).expect("manifest");
    let o = c.run(&h, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!err(&o).contains("catching"), "{}", err(&o));
    // And with the default again, the slot just before is caught up (before a skip of
    // the current slot, which succeeded above).
    let text = manifest(None, r#"["true"]"#, RETRY3);
    std::fs::write(c.path("m.batchguard.yaml"), text).expect("manifest");
    let o = c.run(&h, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("catching it up"), "{}", err(&o));
    assert!(err(&o).contains("already succeeded"), "{}", err(&o));
    let caught: Vec<String> = c
        .events()
        .into_iter()
        .filter(|e| e.0 == "end" && e.3 == "catch_up")
        .map(|e| e.1)
        .collect();
    assert_eq!(caught, [S0]);
}

/// Runs statements on a SQLite file (created when absent).
fn sqlite_exec(db: &Path, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}?mode=rwc", db.display()))
            .await
            .expect("open the SQLite file");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .expect("execute");
    });
}

#[test]
fn a_store_file_of_the_first_release_is_upgraded_for_catch_up_and_keeps_its_rows() {
    let c = Case::new(None, r#"["true"]"#);
    let h = c.host("a");
    // The first release's tables: a `trigger` check without `catch_up`, version 1.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ledger = std::fs::read_to_string(root.join("schemas/ledger.sqlite.sql"))
        .expect("ddl")
        .replace(", 'catch_up')", ")");
    let store = std::fs::read_to_string(root.join("schemas/store.sqlite.sql")).expect("ddl");
    assert!(!ledger.contains("catch_up"));
    sqlite_exec(
        &c.path("shared.db"),
        &format!(
            "{ledger}\n{store}\nINSERT INTO batchguard_events (run_id, job, scheduled_at, event, at) \
             VALUES ('old-run', 'j', '2026-01-01T00:00:00Z', 'skip', '2026-01-01T00:00:01Z');\n\
             PRAGMA user_version = 1;"
        ),
    );
    let url = c.store_url();
    let o = c.run(
        &h,
        &[
            "--store",
            &url,
            "--scheduled-at",
            S0,
            "--",
            "/nonexistent/x",
        ],
    );
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    let o = c.run(&h, &["--store", &url, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let ev = c.events();
    assert_eq!(ev[0].0, "skip", "the old row is kept first: {ev:#?}");
    assert!(
        ev.iter()
            .any(|e| e.0 == "end" && e.3 == "catch_up" && e.1 == S0),
        "{ev:#?}"
    );
    let v: Vec<(i64,)> = sqlite_rows(&c.path("shared.db"), "PRAGMA user_version");
    assert_eq!(v[0].0, 4);
}

#[test]
fn store_and_watch_take_the_store_as_run_does() {
    let c = Case::new(Some("sqlite"), r#"["true"]"#);
    let h = c.host("a");
    let url = c.store_url();
    let o = c
        .cmd(&h, &["--scheduled-at", S0])
        .env("BATCHGUARD_STORE", &url)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let bg = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(bin());
        cmd.current_dir(&h)
            .args(args)
            .env_remove("BATCHGUARD_STORE");
        if let Some(v) = env {
            cmd.env("BATCHGUARD_STORE", v);
        }
        cmd.output().expect("batchguard")
    };
    // BATCHGUARD_STORE: the same store `run` wrote to.
    let st = bg(&["store", "status"], Some(&url));
    assert_eq!(st.status.code(), Some(0), "{}", err(&st));
    assert!(
        String::from_utf8_lossy(&st.stdout).contains(S0),
        "{}",
        String::from_utf8_lossy(&st.stdout)
    );
    let w = bg(&["watch", "--once", "--format", "json"], Some(&url));
    assert_eq!(w.status.code(), Some(0), "{}", err(&w));
    let v: serde_json::Value = serde_json::from_slice(&w.stdout).expect("json");
    assert_eq!(v["source"], url.as_str(), "{v}");
    // `[run] store` in the batchguard.toml above the working directory.
    std::fs::write(
        h.join("batchguard.toml"),
        format!("[run]\nstore = \"{url}\"\n"),
    )
    .expect("config");
    let st = bg(&["store", "status"], None);
    assert!(
        String::from_utf8_lossy(&st.stdout).contains(S0),
        "{}",
        String::from_utf8_lossy(&st.stdout)
    );
    // A value that is no store URL, wherever it comes from, is a usage error.
    let st = bg(&["store", "status"], Some("postgress://x"));
    assert_eq!(st.status.code(), Some(2), "{}", err(&st));
    assert!(err(&st).contains("not a store URL"), "{}", err(&st));
}

// ------------------------------------------------- nothing ends silent (item 29)

/// Waits (bounded) until every lease of the shared store has ended: a fact of the store.
fn wait_for_leases_to_end(c: &Case) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Vec<(i64,)> = sqlite_rows(
            &c.path("shared.db"),
            "SELECT lease_until - CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) FROM batchguard_leases",
        );
        if left.iter().all(|l| l.0 < 0) {
            return;
        }
        assert!(Instant::now() < until, "the lease never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `audit --format json` of the shared store over the first five minutes.
fn audit_json(c: &Case, store: &str) -> serde_json::Value {
    let out = Command::new(bin())
        .current_dir(c.path(""))
        .args([
            "audit",
            "--ledger",
            store,
            "--manifest",
            "m.batchguard.yaml",
        ])
        .args([
            "--from",
            S0,
            "--to",
            "2026-03-01T02:05:00Z",
            "--format",
            "json",
        ])
        .output()
        .expect("audit");
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn a_lost_last_attempt_is_dead_lettered_by_the_next_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One attempt, a short lease; the job holds until killed.
    let text = manifest(
        None,
        r#"["sh", "-c", "[ \"$BATCHGUARD_TRIGGER_HOLD\" = 1 ] && exec sleep 600; exit 0"]"#,
        "      max_attempts: 1\n",
    )
    .replace("ttl: 30s", "ttl: 3s");
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    let c = Case { dir };
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let mut child = c
        .cmd(&a, &["--store", &store, "--scheduled-at", S0])
        .env("BATCHGUARD_TRIGGER_HOLD", "1")
        .spawn()
        .expect("spawn");
    wait_for_event(&c, "the start", |ev| ev.iter().any(|e| e.0 == "start"));
    child.kill().expect("kill -9");
    let _ = child.wait();
    wait_for_leases_to_end(&c);
    // The next tick finds S0 lost with its one attempt used: dead-lettered, said, and
    // its own slot worked.
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("slot 2026-03-01T02:00:00Z lost its holder with no attempt left (1 of 1): dead-lettering it"),
        "{}",
        err(&o)
    );
    let ev = c.events();
    let dl: Vec<(&str, Option<&str>)> = ev
        .iter()
        .filter(|e| e.0 == "dead_letter")
        .map(|e| (e.1.as_str(), e.2.as_deref()))
        .collect();
    assert_eq!(dl, [(S0, Some("ATTEMPTS_EXHAUSTED"))], "{ev:#?}");
    assert!(
        !ev.iter().any(|e| e.0 == "skip"),
        "dead-lettering is no skip: {ev:#?}"
    );
    let state: Vec<(String,)> = sqlite_rows(
        &c.path("shared.db"),
        "SELECT state FROM batchguard_slots WHERE scheduled_at = '2026-03-01T02:00:00Z'",
    );
    assert_eq!(state, [("dead_lettered".to_owned(),)]);
    assert!(
        ev.iter().any(|e| e.0 == "end" && e.1 == S1),
        "S1 worked: {ev:#?}"
    );
    // The audit of the window: the lost run and the dead letter, nothing silent.
    let r = audit_json(&c, &store);
    assert_eq!(r["totals"]["dead_lettered"], 1, "{r}");
}

#[test]
fn a_process_whose_retry_finds_the_slot_succeeded_elsewhere_exits_0() {
    // Attempt 1 on host a fails retryably (exit 75); while it waits to retry (stopped, so
    // the order is a fact, not a race), host b works the slot; a's retry then finds it
    // succeeded.
    let c = Case::new(
        None,
        r#"["sh", "-c", "[ \"$BATCHGUARD_TRIGGER_FAIL\" = 1 ] && exit 75; exit 0"]"#,
    );
    let text = manifest(
        None,
        r#"["sh", "-c", "[ \"$BATCHGUARD_TRIGGER_FAIL\" = 1 ] && exit 75; exit 0"]"#,
        "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 2s\n",
    );
    std::fs::write(c.path("m.batchguard.yaml"), text).expect("manifest");
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let child = c
        .cmd(&a, &["--store", &store, "--scheduled-at", S0])
        .env("BATCHGUARD_TRIGGER_FAIL", "1")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    wait_for_event(&c, "the failed end", |ev| {
        ev.iter()
            .any(|e| e.0 == "end" && e.2.as_deref() == Some("EX_TEMPFAIL"))
    });
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = child.wait_with_output().expect("wait");
    assert!(err(&o).contains("already succeeded"), "{}", err(&o));
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

// --------------------------------------------- a superseded holder (items 24, 28)

/// Host `a`'s guard on slot S0, its job held at a gate (a FIFO): once the job has started,
/// the guard is stopped (SIGSTOP), the job let through to succeed, and the lease left to
/// run out. The guard's child and pid, to continue it.
fn frozen_after_success(c: &Case, a: &Path, extra: &[&str]) -> (std::process::Child, i32) {
    let gate = c.path("gate");
    let made = Command::new("mkfifo").arg(&gate).status().expect("mkfifo");
    assert!(made.success());
    let store = c.store_url();
    let mut args = vec!["--store", store.as_str(), "--scheduled-at", S0];
    args.extend_from_slice(extra);
    let child = c
        .cmd(a, &args)
        .env("GATE", &gate)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let until = Instant::now() + Duration::from_secs(60);
    while !a.join("ready").exists() {
        assert!(Instant::now() < until, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::fs::write(&gate, "go\n").expect("open the gate");
    wait_for_leases_to_end(c);
    (child, pid)
}

#[test]
fn a_guard_frozen_after_its_job_succeeded_writes_no_verdict_once_superseded() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Host a's job applies, says so, and exits when the test opens its gate; host b's job
    // applies and exits. A short lease, so it runs out while host a's guard is stopped.
    let text = manifest(
        None,
        r#"["sh", "-c", "echo \"k-$BATCHGUARD_FENCE\" >> \"$BATCHGUARD_OUTPUTS\"; if [ -n \"$GATE\" ]; then touch ready; read x < \"$GATE\"; fi; exit 0"]"#,
        RETRY3,
    )
    .replace("ttl: 30s", "ttl: 3s");
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    let c = Case { dir };
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let (child, pid) = frozen_after_success(&c, &a, &["--report", "r.json"]);
    // Another host takes the slot as the lease ran out, and succeeds.
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S0]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("superseded by run"), "{}", err(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("r.json")).expect("report")).expect("json");
    assert_eq!(r["outcome"], "skipped", "{r}");
    assert!(
        r["skip_reason"]
            .as_str()
            .is_some_and(|s| s.starts_with("superseded by run")),
        "{r}"
    );
    // The ledger: a's end is `superseded`, b's `success`; no dead letter; the slot stays
    // succeeded; a's output is recorded (it was applied), so the audit sees it twice.
    let ends: Vec<(Option<String>, Option<String>)> = sqlite_rows(
        &c.path("shared.db"),
        "SELECT status, detail FROM batchguard_events WHERE event = 'end' ORDER BY rowid",
    );
    assert_eq!(ends.len(), 2, "{:#?}", c.events());
    assert_eq!(ends[0].0.as_deref(), Some("success"));
    assert_eq!(ends[1].0.as_deref(), Some("superseded"));
    assert!(
        ends[1]
            .1
            .as_deref()
            .is_some_and(|d| d.starts_with("superseded by run ") && d.ends_with("(fence 2)")),
        "{:#?}",
        c.events()
    );
    assert!(!c.events().iter().any(|e| e.0 == "dead_letter"));
    let state: Vec<(String,)> =
        sqlite_rows(&c.path("shared.db"), "SELECT state FROM batchguard_slots");
    assert_eq!(state, [("succeeded".to_owned(),)]);
    let r = audit_json(&c, &store);
    let codes: Vec<&str> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(
        !codes.contains(&"AU102"),
        "one holder at a time held: {r:#}"
    );
    assert_eq!(r["totals"]["superseded"], 1, "{r:#}");
}

#[test]
fn a_last_attempt_dead_lettered_while_frozen_writes_no_success_when_it_wakes() {
    // Found by the hour-long chaos run: the last attempt is frozen past its lease, the next
    // tick dead-letters its slot (lost, no attempt left), then it wakes up having succeeded.
    let dir = tempfile::tempdir().expect("tempdir");
    let text = manifest(
        None,
        r#"["sh", "-c", "if [ -n \"$GATE\" ]; then touch ready; read x < \"$GATE\"; fi; exit 0"]"#,
        "      max_attempts: 1\n",
    )
    .replace("ttl: 30s", "ttl: 3s");
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    let c = Case { dir };
    let (a, b) = (c.host("a"), c.host("b"));
    let store = c.store_url();
    let (child, pid) = frozen_after_success(&c, &a, &[]);
    let o = c.run(&b, &["--store", &store, "--scheduled-at", S1]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("dead-lettering it"), "{}", err(&o));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("superseded by run"), "{}", err(&o));
    let ends: Vec<(String, Option<String>)> = sqlite_rows(
        &c.path("shared.db"),
        "SELECT scheduled_at, status FROM batchguard_events WHERE event = 'end' ORDER BY rowid",
    );
    assert_eq!(
        ends,
        [
            (S1.to_owned(), Some("success".to_owned())),
            (S0.to_owned(), Some("superseded".to_owned()))
        ],
        "{:#?}",
        c.events()
    );
    let state: Vec<(String,)> = sqlite_rows(
        &c.path("shared.db"),
        "SELECT state FROM batchguard_slots WHERE scheduled_at = '2026-03-01T02:00:00Z'",
    );
    assert_eq!(state, [("dead_lettered".to_owned(),)]);
}
