//! A real Redis server for the store's tests: a key prefix of its own per test (so parallel
//! tests never see each other's keys, and its keys are deleted at the end), and a counting
//! proxy that sees every command `batchguard` sends.
//!
//! `BATCHGUARD_TEST_REDIS` (default `redis://127.0.0.1:6379/0`) names the server. When it is
//! unreachable the tests print why and pass, except under `CI=true`, where they fail.
#![allow(dead_code)]

use super::{proxy, server};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

pub fn server_url() -> String {
    std::env::var("BATCHGUARD_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into())
}

/// `host:port` of the URL (default port 6379).
pub fn host_port(url: &str) -> String {
    server::host_port(url, 6379)
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

/// A fresh prefix; `None` (with a printed reason) when the server is unreachable outside CI.
pub fn fresh(tag: &str) -> Option<TestRedis> {
    match connect().and_then(|mut c| {
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(|e| e.to_string())
    }) {
        Ok(_) => Some(TestRedis {
            prefix: server::unique("bgtest", '-', tag),
        }),
        Err(why) => server::unreachable("Redis", &server_url(), "BATCHGUARD_TEST_REDIS", &why),
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
    server::with_param(url, &format!("prefix={prefix}"))
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

/// What the proxy logs of each round trip: the names (upper-cased) of the commands the
/// client sent together (a pipeline is one round trip).
pub type Proxy = proxy::Proxy<Wire>;

impl Proxy {
    /// `url` through this proxy.
    pub fn url(&self, url: &str) -> String {
        self.through(url, &host_port(url))
    }
}

/// RESP: commands as arrays of bulk strings.
#[derive(Default)]
pub struct Wire;

impl proxy::Protocol for Wire {
    type Msg = Vec<String>;

    fn read(&mut self, client: &mut BufReader<TcpStream>) -> Option<(Vec<u8>, Option<Self::Msg>)> {
        let (name, mut out) = read_command(client)?;
        let mut group = vec![name];
        // Whatever the client sent in the same write is part of the same round trip.
        while !client.buffer().is_empty() {
            let Some((name, raw)) = read_command(client) else {
                break;
            };
            group.push(name);
            out.extend_from_slice(&raw);
        }
        Some((out, Some(group)))
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
