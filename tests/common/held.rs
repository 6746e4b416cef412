//! A real held lease on any store: `batchguard run` whose command marks that it started and
//! waits until the test lets it go, and the leases `watch --once --format json` and
//! `metrics --textfile` show meanwhile. The waits are for files (the command's mark, the
//! run's exit), with a deadline only to fail instead of hanging.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The command: marks `held`, then waits for `go`.
const WAIT: &str = "touch held; while [ ! -e go ]; do sleep 0.05; done";

/// A `batchguard run` holding its lease until [`Paused::release`].
pub struct Paused {
    child: Option<Child>,
    dir: PathBuf,
}

/// Starts `run` of `job` (of `m.batchguard.yaml` in `dir`) for `slot` on `store` (with
/// `--ledger` when given) and returns once its command runs: the lease is taken.
pub fn paused_run(dir: &Path, job: &str, slot: &str, store: &str, ledger: Option<&str>) -> Paused {
    let mut c = Command::new(env!("CARGO_BIN_EXE_batchguard"));
    c.current_dir(dir)
        .args(["run", "--manifest", "m.batchguard.yaml", "--job", job])
        .args([
            "--store",
            store,
            "--scheduled-at",
            slot,
            "--instance",
            "host-a",
        ]);
    if let Some(l) = ledger {
        c.args(["--ledger", l]);
    }
    c.args(["--", "sh", "-c", WAIT])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("run starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("held").exists() {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("run ended before its command started: {status}\n{err}");
        }
        assert!(
            Instant::now() < deadline,
            "the run never started its command"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Paused {
        child: Some(child),
        dir: dir.to_path_buf(),
    }
}

impl Paused {
    /// Lets the command end and waits for the run's exit (its lease released).
    pub fn release(mut self) -> Output {
        std::fs::write(self.dir.join("go"), "").expect("go");
        self.child
            .take()
            .expect("running")
            .wait_with_output()
            .expect("run ends")
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = std::fs::write(self.dir.join("go"), "");
            let _ = c.wait();
        }
    }
}

/// `watch --once --format json` of `store` (and `ledger`) over the manifest in `dir`.
pub fn watch(dir: &Path, store: &str, ledger: Option<&str>) -> serde_json::Value {
    let mut c = Command::new(env!("CARGO_BIN_EXE_batchguard"));
    c.current_dir(dir)
        .args(["watch", "--store", store, "--manifest", "m.batchguard.yaml"])
        .args(["--since", "3h", "--once", "--format", "json"]);
    if let Some(l) = ledger {
        c.args(["--ledger", l]);
    }
    let o = c.stdin(Stdio::null()).output().expect("watch runs");
    assert!(
        o.status.success(),
        "watch: exit {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("watch prints JSON")
}

/// The pretty `watch --once` table (to see that no "cannot list leases" line is there).
pub fn watch_text(dir: &Path, store: &str, ledger: Option<&str>) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_batchguard"));
    c.current_dir(dir)
        .env("NO_COLOR", "1")
        .args(["watch", "--store", store, "--manifest", "m.batchguard.yaml"])
        .args(["--since", "3h", "--once"]);
    if let Some(l) = ledger {
        c.args(["--ledger", l]);
    }
    let o = c.stdin(Stdio::null()).output().expect("watch runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `metrics --textfile` of `store` (and `ledger`): the exposition written.
pub fn metrics(dir: &Path, store: &str, ledger: Option<&str>) -> String {
    let file = dir.join("held.prom");
    let mut c = Command::new(env!("CARGO_BIN_EXE_batchguard"));
    c.current_dir(dir)
        .args([
            "metrics",
            "--store",
            store,
            "--manifest",
            "m.batchguard.yaml",
        ])
        .args(["--since", "3h", "--textfile"])
        .arg(&file);
    if let Some(l) = ledger {
        c.args(["--ledger", l]);
    }
    let o = c.stdin(Stdio::null()).output().expect("metrics runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(file).expect("textfile")
}

/// The run ids of the leases `watch` listed.
pub fn lease_runs(v: &serde_json::Value) -> Vec<String> {
    v["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["run_id"].as_str().expect("run_id").to_owned())
        .collect()
}

/// The run id of `job`'s `start` that `watch` shows running.
pub fn running(v: &serde_json::Value, job: &str) -> Vec<serde_json::Value> {
    v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["job"] == job)
        .map(|j| j["running"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}
