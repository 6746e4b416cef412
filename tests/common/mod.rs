//! What every integration test shares: the binary without colour, the fixed "now" that
//! makes look-ahead rules reproducible, and whether node (which evaluates `.js` PM2
//! ecosystem files) is here. Each test binary uses a part of it.
#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The `--now` of every lint test: look-ahead rules (BG102, BG103) count from it.
pub const NOW: &str = "2026-03-01T00:00:00Z";

/// `batchguard` as built for this test run, with colour off.
pub fn bg() -> Command {
    let mut c = Command::cargo_bin("batchguard").expect("binary builds");
    c.env("NO_COLOR", "1");
    c
}

/// `lint --format json` of `dir` at [`NOW`], which must run (exit 0 or 1).
pub fn lint_json(dir: &Path) -> serde_json::Value {
    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(dir)
        .output()
        .expect("lint runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("lint prints JSON")
}

/// The major version of the `node` on PATH; 0 when there is none.
pub fn node_major() -> u32 {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
        })
        .unwrap_or(0)
}

pub fn has_node() -> bool {
    node_major() > 0
}

/// Whether a test that evaluates `.js` files can run: node `min_major`+ must be there in
/// CI (`CI=true` fails without it); elsewhere the test says it skipped.
pub fn need_node(min_major: u32) -> bool {
    if node_major() >= min_major {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "node {min_major}+ is required in CI"
    );
    eprintln!("skipped: node {min_major}+ is not on PATH");
    false
}

/// The `batchguard` binary this test run built, for tests that spawn it as a scheduler
/// would (`std::process::Command`, signals, process groups).
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_batchguard"))
}

/// A manifest `command:` value that runs `script` under `sh -c`, as a YAML flow list.
pub fn sh(script: &str) -> String {
    format!(
        "[\"sh\", \"-c\", {}]",
        serde_json::to_string(script).expect("json")
    )
}

/// The rows of `sql` in the SQLite file `db`: how a test reads what `run` wrote.
pub fn sqlite_rows<T>(db: &Path, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
            .await
            .expect("open the SQLite file");
        sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&mut c)
            .await
            .expect("query")
    })
}
