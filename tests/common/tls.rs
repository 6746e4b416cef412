//! What the TLS tests share: certificates made by `openssl` (a CA, a server certificate
//! for 127.0.0.1 signed by it, and a stranger CA that signed nothing), a free port, waiting
//! for a server to listen, and a command that trusts only the CAs it is given.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A command's exit code and both streams, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether every program is on PATH; under `CI=true` a missing one fails the test.
pub fn need(programs: &[&str]) -> bool {
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "required in CI (.ci/run installs them): {missing:?}"
    );
    eprintln!("skipped: not on PATH: {missing:?}");
    false
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
}

/// The files [`certificates`] writes.
pub struct Certs {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub stranger: PathBuf,
}

/// In `dir`: `ca.pem`, `server.pem`/`server.key` (127.0.0.1, signed by the CA) and
/// `stranger.pem` (a CA that signed nothing here).
pub fn certificates(dir: &Path) -> Certs {
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
        openssl(dir, &a);
    }
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
    Certs {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        stranger: dir.join("stranger.pem"),
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until a server accepts connections on `port`.
pub fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} never listened on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `cmd` trusting `roots` alone: `SSL_CERT_FILE`, and an empty `SSL_CERT_DIR` (a host's
/// environment may name its CA directory, which would be trusted too).
pub fn trusting<'c>(cmd: &'c mut Command, dir: &Path, roots: &Path) -> &'c mut Command {
    let no_dir = dir.join("no-certs");
    let _ = std::fs::create_dir(&no_dir);
    cmd.env("SSL_CERT_FILE", roots).env("SSL_CERT_DIR", no_dir)
}
