//! TLS to PostgreSQL, as managed servers require it (a server with `ssl = on`: RDS forces
//! it by default): the URL's `sslmode` is honoured by `run`, `store` and `audit`, the
//! guard's connection really is encrypted (the server's `pg_stat_ssl` says so while the job
//! runs), and `verify-ca` checks the certificate against `sslrootcert`. The server here has
//! a self-signed certificate; a test that needs it and finds TLS off says it skipped.

mod common;
#[path = "common/stores.rs"]
mod stores;
#[path = "common/tls.rs"]
mod tls;

use common::bin;
use pgdb::TestDb;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use stores::pgdb;
use tls::{certificates, text, trusting};

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1m\n    lock:\n      ttl: 10m\n    retry:\n      max_attempts: 1\n";

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

fn bg(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).args(args).stdin(Stdio::null());
    c
}

/// A fresh database on a server with TLS on, or `None` (said) when it has TLS off.
fn tls_db(tag: &str) -> Option<TestDb> {
    let db = pgdb::fresh(tag)?;
    if db.rows("SHOW ssl")[0][0].as_deref() != Some("on") {
        eprintln!("skipped: this PostgreSQL server has ssl = off");
        return None;
    }
    Some(db)
}

/// Whether the guard's connection to `db` is encrypted, asked of the server while a `run`
/// holds the slot: the job waits for a file the test writes once it has looked.
fn guard_connection_is_tls(db: &TestDb, sslmode: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("m.batchguard.yaml"), MANIFEST).expect("manifest");
    let store = with_param(&db.url, &format!("sslmode={sslmode}"));
    let migrated = bg(dir.path(), &["store", "migrate", "--store", &store])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{}", text(&migrated));
    let go = dir.path().join("go");
    let wait = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let run = bg(
        dir.path(),
        &[
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "j",
            "--store",
            &store,
            "--scheduled-at",
            "2026-03-01T02:00:00Z",
            "--",
            "sh",
            "-c",
            &wait,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.rows("SELECT count(*)::text FROM batchguard_events WHERE event = 'start'")[0][0]
        .as_deref()
        != Some("1")
    {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ssl = db.rows(&format!(
        "SELECT s.ssl::text FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.datname = '{}' AND a.application_name = 'batchguard' AND a.pid <> pg_backend_pid()",
        db.name
    ));
    std::fs::write(&go, "").expect("go");
    let out = run.wait_with_output().expect("run ends");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        ssl.len(),
        1,
        "one guard connection while the job runs: {ssl:?}"
    );
    ssl[0][0].as_deref() == Some("true")
}

#[test]
fn the_guard_connection_is_encrypted_as_sslmode_says() {
    let Some(db) = tls_db("tls_require") else {
        return;
    };
    assert!(guard_connection_is_tls(&db, "require"), "sslmode=require");
    let Some(db) = tls_db("tls_disable") else {
        return;
    };
    assert!(!guard_connection_is_tls(&db, "disable"), "sslmode=disable");
}

#[test]
fn verify_ca_checks_the_server_certificate_against_sslrootcert() {
    let Some(db) = tls_db("tls_verify") else {
        return;
    };
    let server_cert = PathBuf::from(
        db.rows("SHOW ssl_cert_file")[0][0]
            .clone()
            .expect("ssl_cert_file"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    if !tls::need(&["openssl"]) {
        return;
    }
    let stranger = certificates(dir.path()).stranger;
    // The system's roots are the stranger alone, so only `sslrootcert` can vouch for the
    // server.
    let migrate = |root: &Path| {
        let url = with_param(
            &db.url,
            &format!("sslmode=verify-ca&sslrootcert={}", root.display()),
        );
        trusting(
            &mut bg(dir.path(), &["store", "migrate", "--store", &url]),
            dir.path(),
            &stranger,
        )
        .output()
        .unwrap()
    };
    let refused = migrate(&stranger);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("UnknownIssuer"), "{err}");
    if std::fs::read(&server_cert).is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the server's certificate {} must be readable in CI",
            server_cert.display()
        );
        eprintln!("skipped: {} is not readable", server_cert.display());
        return;
    }
    let trusted = migrate(&server_cert);
    assert!(trusted.status.success(), "{}", text(&trusted));

    // The audit reads the ledger over the same verified connection.
    let ledger = with_param(
        &db.url,
        &format!("sslmode=verify-ca&sslrootcert={}", server_cert.display()),
    );
    let mut audit = bg(
        dir.path(),
        &[
            "audit",
            "--ledger",
            &ledger,
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
            "--format",
            "json",
        ],
    );
    let audited = trusting(&mut audit, dir.path(), &stranger)
        .output()
        .unwrap();
    assert!(
        matches!(audited.status.code(), Some(0 | 1)),
        "{}",
        text(&audited)
    );
}
