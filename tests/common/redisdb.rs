//! A real Redis server for the store's tests: a key prefix of its own per test (so parallel
//! tests never see each other's keys, and its keys are deleted at the end), and a counting
//! proxy that sees every command `batchguard` sends.
//!
//! `BATCHGUARD_TEST_REDIS` (default `redis://127.0.0.1:6379/0`) names the server. When it is
//! unreachable the tests print why and pass, except under `CI=true`, where they fail.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

pub fn server_url() -> String {
    std::env::var("BATCHGUARD_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into())
}

/// `host:port` of the URL (default port 6379).
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:6379")
    }
}

fn connect() -> Result<redis::Connection, String> {
    let client = redis::Client::open(server_url()).map_err(|e| e.to_string())?;
    client
        .get_connection_with_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| e.to_string())
}

/// A prefix of its own on the test server.
pub struct TestRedis {
    pub prefix: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh prefix; `None` (with a printed reason) when the server is unreachable outside CI.
pub fn fresh(tag: &str) -> Option<TestRedis> {
    match connect().and_then(|mut c| {
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(|e| e.to_string())
    }) {
        Ok(_) => Some(TestRedis {
            prefix: format!(
                "bgtest-{}-{tag}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::SeqCst)
            ),
        }),
        Err(why) => {
            let url = server_url();
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("Redis at {url} is unreachable under CI=true: {why}");
            }
            eprintln!("skipping: Redis at {url} is unreachable ({why}); set BATCHGUARD_TEST_REDIS");
            None
        }
    }
}

impl TestRedis {
    /// The store URL: the server's, with this test's prefix.
    pub fn url(&self) -> String {
        with_prefix(&server_url(), &self.prefix)
    }

    /// One command against the test server.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = connect().expect("connect");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// This test's keys.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.cmd(&["KEYS", &format!("{}:*", self.prefix)]);
        keys.sort();
        keys
    }
}

/// `url` with `prefix=` added to its query.
pub fn with_prefix(url: &str, prefix: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}prefix={prefix}")
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        if let Ok(mut c) = connect() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}:*", self.prefix))
                .query(&mut c)
                .unwrap_or_default();
            for k in keys {
                let _: Result<i64, _> = redis::cmd("DEL").arg(k).query(&mut c);
            }
        }
    }
}

/// A TCP proxy in front of the server that records every command a client sends (its name,
/// upper-cased). Commands sent together (a pipeline) are one round trip: the proxy counts
/// those as one group.
pub struct Proxy {
    pub port: u16,
    log: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Proxy {
    pub fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let target = target.to_string();
        let l2 = Arc::clone(&log);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let log = Arc::clone(&l2);
                std::thread::spawn(move || pump_client(client, server, log));
                std::thread::spawn(move || {
                    let (mut s, mut c) = (s2, c2);
                    let _ = std::io::copy(&mut s, &mut c);
                    let _ = c.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, log }
    }

    /// `url` through this proxy.
    pub fn url(&self, url: &str) -> String {
        url.replacen(&host_port(url), &format!("127.0.0.1:{}", self.port), 1)
    }

    /// Takes the round trips seen so far: each the commands sent together.
    pub fn take(&self) -> Vec<Vec<String>> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }
}

/// Reads one RESP command (an array of bulk strings) and returns its name and raw bytes.
fn read_command(r: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    if line.is_empty() {
        return None;
    }
    raw.extend_from_slice(line.as_bytes());
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut name = String::new();
    for i in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        raw.extend_from_slice(line.as_bytes());
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut buf = vec![0u8; len + 2];
        r.read_exact(&mut buf).ok()?;
        if i == 0 {
            name = String::from_utf8_lossy(&buf[..len]).to_uppercase();
        }
        raw.extend_from_slice(&buf);
    }
    Some((name, raw))
}

fn pump_client(client: TcpStream, mut server: TcpStream, log: Arc<Mutex<Vec<Vec<String>>>>) {
    let mut r = BufReader::new(client);
    while let Some((name, raw)) = read_command(&mut r) {
        let mut group = vec![name];
        let mut out = raw;
        // Whatever the client sent in the same write is part of the same round trip.
        while !r.buffer().is_empty() {
            let Some((name, raw)) = read_command(&mut r) else {
                break;
            };
            group.push(name);
            out.extend_from_slice(&raw);
        }
        // Logged before it is sent: once the reply can reach the client, `take` sees it.
        log.lock().expect("log").push(group);
        if server.write_all(&out).is_err() {
            break;
        }
    }
    let _ = server.shutdown(std::net::Shutdown::Both);
}
