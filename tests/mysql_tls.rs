//! TLS to MySQL/MariaDB, as managed servers require it: a MariaDB of this test's own (its
//! own data directory, a free port, a CA and a server certificate made by `openssl`), since
//! the shared test server has TLS off. The URL's `ssl-mode` is honoured: `REQUIRED`
//! encrypts the guard's session (the server's count of finished TLS handshakes grows) and
//! `DISABLED` does not, `VERIFY_IDENTITY` with `ssl-ca` accepts the server, and a CA that
//! signed nothing here is refused before anything is written.

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

/// `ca.pem`, `server.pem`/`server.key` (127.0.0.1, signed by it), `stranger.pem`.
fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for (name, cn) in [("ca", "batchguard test CA"), ("stranger", "a stranger CA")] {
        let (key, pem, subj) = (
            format!("{name}.key"),
            format!("{name}.pem"),
            format!("/CN={cn}"),
        );
        let mut a = vec!["req", "-x509", "-days", "1", "-subj", &subj];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &pem]);
        ok(tool(dir, "openssl", &a), "openssl req");
    }
    let mut csr = vec!["req", "-new", "-subj", "/CN=127.0.0.1"];
    csr.extend(ec);
    csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
    ok(tool(dir, "openssl", &csr), "openssl csr");
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    ok(
        tool(
            dir,
            "openssl",
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
        ),
        "openssl x509",
    );
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

fn tls_mariadb(dir: &Path) -> Option<TlsMariadb> {
    let here = ["mariadb-install-db", "mariadbd", "mariadb", "openssl"]
        .iter()
        .all(|p| {
            Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if !here {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "mariadb-install-db, mariadbd, mariadb and openssl are required in CI"
        );
        eprintln!("skipped: mariadb-install-db, mariadbd, mariadb or openssl is not on PATH");
        return None;
    }
    certificates(dir);
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
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
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
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "mariadbd never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
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
    let no_dir = dir.join("no-certs");
    let _ = std::fs::create_dir(&no_dir);
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(args)
        .env("SSL_CERT_FILE", roots)
        .env("SSL_CERT_DIR", &no_dir)
        .stdin(Stdio::null());
    c
}

#[test]
fn ssl_mode_encrypts_verifies_and_refuses_a_stranger_ca() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let Some(server) = tls_mariadb(dir) else {
        return;
    };
    std::fs::write(dir.join("m.batchguard.yaml"), MANIFEST).expect("manifest");
    sql(dir, "CREATE DATABASE ops");
    let base = format!("mysql://root@127.0.0.1:{}/ops", server.port);
    let (ca, stranger): (PathBuf, PathBuf) = (dir.join("ca.pem"), dir.join("stranger.pem"));

    // A CA that signed nothing here: refused, and nothing was created.
    let refused_url = format!(
        "{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        stranger.display()
    );
    let refused = bg(
        dir,
        &["store", "migrate", "--store", &refused_url],
        &stranger,
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
            &stranger,
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
        bg(dir, &["store", "migrate", "--store", &disabled], &stranger)
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
        &stranger,
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
        &stranger,
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
    let plain = bg(dir, &["store", "migrate", "--store", &base], &stranger)
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain));
}
