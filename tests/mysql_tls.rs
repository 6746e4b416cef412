//! TLS to MySQL/MariaDB, as managed servers require it: a MariaDB of this test's own (its
//! own data directory, a free port, a CA and a server certificate made by `openssl`), since
//! the shared test server has TLS off. The URL's `ssl-mode` is honoured: `REQUIRED`
//! encrypts the guard's session (the server's count of finished TLS handshakes grows) and
//! `DISABLED` does not, `VERIFY_IDENTITY` with `ssl-ca` accepts the server, and a CA that
//! signed nothing here is refused before anything is written.

mod common;
#[path = "common/tls.rs"]
mod tls;

use common::bin;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use tls::{certificates, free_port, need, text, trusting, wait_listening};

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1m\n    lock:\n      ttl: 10m\n    retry:\n      max_attempts: 1\n";

fn tool(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn ok(o: Output, what: &str) {
    assert!(o.status.success(), "{what}: {}", text(&o));
}

/// A MariaDB with TLS on, shut down when dropped.
struct TlsMariadb {
    child: Child,
    port: u16,
}

impl Drop for TlsMariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_mariadb(dir: &Path) -> Option<(TlsMariadb, tls::Certs)> {
    if !need(&["mariadb-install-db", "mariadbd", "mariadb", "openssl"]) {
        return None;
    }
    let certs = certificates(dir);
    let data = dir.join("data");
    let abs = |p: &str| dir.join(p).display().to_string();
    ok(
        tool(
            dir,
            "mariadb-install-db",
            &[
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ],
        ),
        "mariadb-install-db",
    );
    let port = free_port();
    let child = Command::new("mariadbd")
        .current_dir(dir)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", abs("mysqld.sock")))
        .arg(format!("--pid-file={}", abs("mysqld.pid")))
        .arg("--user=root")
        .arg("--skip-log-bin")
        .arg(format!("--ssl-cert={}", abs("server.pem")))
        .arg(format!("--ssl-key={}", abs("server.key")))
        .arg(format!("--ssl-ca={}", abs("ca.pem")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mariadbd starts");
    let server = TlsMariadb { child, port };
    wait_listening(port, "mariadbd");
    Some((server, certs))
}

/// Every column of a query's rows, through the `mariadb` client over the server's socket.
fn sql(dir: &Path, query: &str) -> String {
    let o = tool(
        dir,
        "mariadb",
        &[
            "--no-defaults",
            // In the clear, so that the server's TLS counters count batchguard only.
            "--skip-ssl",
            &format!("--socket={}", dir.join("mysqld.sock").display()),
            "-uroot",
            "-N",
            "-B",
            "-e",
            query,
        ],
    );
    assert!(o.status.success(), "{query}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn bg(dir: &Path, args: &[&str], roots: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).args(args).stdin(Stdio::null());
    trusting(&mut c, dir, roots);
    c
}

#[test]
fn ssl_mode_encrypts_verifies_and_refuses_a_stranger_ca() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let Some((server, certs)) = tls_mariadb(dir) else {
        return;
    };
    std::fs::write(dir.join("m.batchguard.yaml"), MANIFEST).expect("manifest");
    sql(dir, "CREATE DATABASE ops");
    let base = format!("mysql://root@127.0.0.1:{}/ops", server.port);
    let (ca, stranger) = (&certs.ca, &certs.stranger);

    // A CA that signed nothing here: refused, and nothing was created.
    let refused_url = format!(
        "{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        stranger.display()
    );
    let refused = bg(
        dir,
        &["store", "migrate", "--store", &refused_url],
        stranger,
    )
    .output()
    .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("UnknownIssuer"),
        "{}",
        text(&refused)
    );
    assert_eq!(sql(dir, "SHOW TABLES FROM ops"), "");

    let verified_url = format!("{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}", ca.display());
    ok(
        bg(
            dir,
            &["store", "migrate", "--store", &verified_url],
            stranger,
        )
        .output()
        .unwrap(),
        "migrate over a verified connection",
    );

    // What the server says it encrypted: sessions it finished a TLS handshake with.
    let accepted = || -> u64 {
        let row = sql(dir, "SHOW GLOBAL STATUS LIKE 'Ssl_finished_accepts'");
        row.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("Ssl_finished_accepts: {row}"))
    };
    let before = accepted();
    let disabled = format!("{base}?ssl-mode=DISABLED");
    ok(
        bg(dir, &["store", "migrate", "--store", &disabled], stranger)
            .output()
            .unwrap(),
        "migrate without TLS",
    );
    assert_eq!(
        accepted(),
        before,
        "ssl-mode=DISABLED connects in the clear"
    );
    let store = format!("{base}?ssl-mode=REQUIRED");
    let run = bg(
        dir,
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
            "true",
        ],
        stranger,
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    assert!(
        accepted() > before,
        "ssl-mode=REQUIRED encrypts the guard's session"
    );
    assert_eq!(
        sql(dir, "SELECT event FROM ops.batchguard_events ORDER BY id"),
        "start\nend\n"
    );

    // The audit reads the ledger over the same verified connection.
    let audited = bg(
        dir,
        &[
            "audit",
            "--ledger",
            &verified_url,
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
            "--format",
            "json",
        ],
        stranger,
    )
    .output()
    .unwrap();
    assert!(
        matches!(audited.status.code(), Some(0 | 1)),
        "{}",
        text(&audited)
    );

    // Without TLS asked for, the stranger roots do not matter: the default prefers TLS
    // but does not verify, so it connects.
    let plain = bg(dir, &["store", "migrate", "--store", &base], stranger)
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain));
}
