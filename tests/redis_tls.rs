//! `rediss://` against a real Redis that speaks only TLS: a `redis-server` of this test's
//! own on a free port, with a CA and a server certificate made by `openssl`. The guard runs
//! a job through it when the CA is trusted, refuses (exit 125, the job not run) when it is
//! not, and `#insecure` skips the check, as docs/stores.md says.

mod common;
#[path = "common/tls.rs"]
mod tls;

use common::bin;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use tls::{certificates, free_port, need, text, trusting, wait_listening};

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1m\n    lock:\n      ttl: 10m\n    retry:\n      max_attempts: 1\n";

/// A TLS-only `redis-server`, killed when dropped.
struct TlsRedis {
    child: Child,
    port: u16,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_redis(dir: &Path) -> Option<(TlsRedis, tls::Certs)> {
    if !need(&["redis-server", "openssl"]) {
        return None;
    }
    let certs = certificates(dir);
    let port = free_port();
    let child = Command::new("redis-server")
        .current_dir(dir)
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-cert-file",
            "server.pem",
            "--tls-key-file",
            "server.key",
        ])
        .args(["--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no"])
        .args(["--save", "", "--appendonly", "no", "--dir", "."])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let server = TlsRedis { child, port };
    wait_listening(port, "redis-server");
    Some((server, certs))
}

/// `run` of one slot through `store`, with `roots` the only CAs the process trusts.
fn run(dir: &Path, store: &str, roots: &Path, slot: &str) -> Output {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
        .args([
            "--store",
            store,
            "--ledger",
            "ledger.jsonl",
            "--scheduled-at",
            slot,
        ])
        .args(["--", "sh", "-c", "echo ran >> ran.txt"])
        .stdin(Stdio::null());
    trusting(&mut c, dir, roots).output().expect("run")
}

fn ran(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran.txt")).map_or(0, |t| t.lines().count())
}

#[test]
fn rediss_runs_when_the_ca_is_trusted_and_refuses_when_it_is_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let Some((server, certs)) = tls_redis(dir) else {
        return;
    };
    std::fs::write(dir.join("m.batchguard.yaml"), MANIFEST).expect("manifest");
    // Slots of March: markers kept a year, so they are within the retention.
    let url = format!("rediss://127.0.0.1:{}/0?retention=400d", server.port);
    let (ca, stranger) = (&certs.ca, &certs.stranger);

    let mut migrate = Command::new(bin());
    migrate
        .current_dir(dir)
        .args(["store", "migrate", "--store", &url])
        .stdin(Stdio::null());
    let migrated = trusting(&mut migrate, dir, ca).output().expect("migrate");
    assert!(migrated.status.success(), "{}", text(&migrated));

    let trusted = run(dir, &url, ca, "2026-03-01T02:00:00Z");
    assert!(trusted.status.success(), "{}", text(&trusted));
    assert_eq!(ran(dir), 1);
    let ledger = std::fs::read_to_string(dir.join("ledger.jsonl")).expect("ledger");
    assert!(ledger.contains("\"event\":\"end\""), "{ledger}");

    // The same slot again: the succeeded marker, read over TLS, skips it.
    let again = run(dir, &url, ca, "2026-03-01T02:00:00Z");
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(ran(dir), 1, "a succeeded slot does not run again");

    let refused = run(dir, &url, stranger, "2026-03-01T03:00:00Z");
    assert_eq!(refused.status.code(), Some(125), "{}", text(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert_eq!(
        ran(dir),
        1,
        "the job does not run when the store cannot be trusted"
    );

    let insecure = run(
        dir,
        &format!("{url}#insecure"),
        stranger,
        "2026-03-01T03:00:00Z",
    );
    assert!(insecure.status.success(), "{}", text(&insecure));
    assert_eq!(ran(dir), 2);

    let plain = run(
        dir,
        &format!("redis://127.0.0.1:{}/0?retention=400d", server.port),
        ca,
        "2026-03-01T04:00:00Z",
    );
    assert_eq!(plain.status.code(), Some(125), "{}", text(&plain));
    assert_eq!(ran(dir), 2);
}
