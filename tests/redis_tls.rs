//! `rediss://` against a real Redis that speaks only TLS: a `redis-server` of this test's
//! own on a free port, with a CA and a server certificate made by `openssl`. The guard runs
//! a job through it when the CA is trusted, refuses (exit 125, the job not run) when it is
//! not, and `#insecure` skips the check, as the README says.

mod common;

use common::bin;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1m\n    lock:\n      ttl: 10m\n    retry:\n      max_attempts: 1\n";

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
}

/// `ca.pem` (a CA), `server.pem`/`server.key` (127.0.0.1, signed by it) and `stranger.pem`
/// (a CA that signed nothing here).
fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "1",
        "-subj",
        "/CN=batchguard test CA",
    ];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    let mut stranger = vec!["req", "-x509", "-days", "1", "-subj", "/CN=a stranger CA"];
    stranger.extend(ec);
    stranger.extend(["-keyout", "stranger.key", "-out", "stranger.pem"]);
    openssl(dir, &stranger);
    let mut csr = vec!["req", "-new", "-subj", "/CN=127.0.0.1"];
    csr.extend(ec);
    csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
}

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

fn tls_redis(dir: &Path) -> Option<TlsRedis> {
    let here = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let openssl_here = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here || !openssl_here {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "redis-server and openssl are required in CI"
        );
        eprintln!("skipped: redis-server or openssl is not on PATH");
        return None;
    }
    certificates(dir);
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
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
    // Up when it accepts a connection on its port.
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

/// `run` of one slot through `store`, with `roots` the only CAs the process trusts.
fn run(dir: &Path, store: &str, roots: &Path, slot: &str) -> Output {
    let no_dir = dir.join("no-certs");
    let _ = std::fs::create_dir(&no_dir);
    Command::new(bin())
        .current_dir(dir)
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
        .env("SSL_CERT_FILE", roots)
        .env("SSL_CERT_DIR", &no_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run")
}

fn ran(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran.txt")).map_or(0, |t| t.lines().count())
}

#[test]
fn rediss_runs_when_the_ca_is_trusted_and_refuses_when_it_is_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let Some(server) = tls_redis(dir) else {
        return;
    };
    std::fs::write(dir.join("m.batchguard.yaml"), MANIFEST).expect("manifest");
    // Slots of March: markers kept a year, so they are within the retention.
    let url = format!("rediss://127.0.0.1:{}/0?retention=400d", server.port);
    let (ca, stranger): (PathBuf, PathBuf) = (dir.join("ca.pem"), dir.join("stranger.pem"));

    let trusted = run(dir, &url, &ca, "2026-03-01T02:00:00Z");
    assert!(trusted.status.success(), "{}", text(&trusted));
    assert_eq!(ran(dir), 1);
    let ledger = std::fs::read_to_string(dir.join("ledger.jsonl")).expect("ledger");
    assert!(ledger.contains("\"event\":\"end\""), "{ledger}");

    // The same slot again: the succeeded marker, read over TLS, skips it.
    let again = run(dir, &url, &ca, "2026-03-01T02:00:00Z");
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(ran(dir), 1, "a succeeded slot does not run again");

    let refused = run(dir, &url, &stranger, "2026-03-01T03:00:00Z");
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
        &stranger,
        "2026-03-01T03:00:00Z",
    );
    assert!(insecure.status.success(), "{}", text(&insecure));
    assert_eq!(ran(dir), 2);

    let plain = run(
        dir,
        &format!("redis://127.0.0.1:{}/0?retention=400d", server.port),
        &ca,
        "2026-03-01T04:00:00Z",
    );
    assert_eq!(plain.status.code(), Some(125), "{}", text(&plain));
    assert_eq!(ran(dir), 2);
}
