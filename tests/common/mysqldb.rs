//! A real MySQL / MariaDB server for the store's tests: a fresh database per test, and a
//! counting proxy that sees every command packet `batchguard` sends.
//!
//! `BATCHGUARD_TEST_MYSQL` (default `mysql://root@127.0.0.1:3306/test`) names the server and
//! a database to connect to for `CREATE DATABASE`. When it is unreachable the tests print
//! why and pass, except under `CI=true`, where they fail: CI runs them for real.
#![allow(dead_code)]

use sqlx::{AssertSqlSafe, Connection};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

pub fn admin_url() -> String {
    std::env::var("BATCHGUARD_TEST_MYSQL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_string())
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The URL with its database (path) replaced, query kept.
pub fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let base = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => head,
    };
    format!("{base}/{db}{query}")
}

/// `host:port` of the URL (default port 3306).
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:3306")
    }
}

async fn admin_exec(sql: String) -> Result<(), String> {
    let url = admin_url();
    let conn = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sqlx::MySqlConnection::connect(&url),
    )
    .await;
    let mut c = match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("timed out".into()),
    };
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A database of its own, dropped at the end of the test.
pub struct TestDb {
    pub url: String,
    pub name: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Whether the server answers; `false` (with a printed reason) outside CI, a panic in CI.
pub fn reachable() -> bool {
    match rt().block_on(admin_exec("SELECT 1".into())) {
        Ok(()) => true,
        Err(why) => unreachable(&why),
    }
}

fn unreachable(why: &str) -> bool {
    let url = admin_url();
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("MySQL at {url} is unreachable under CI=true: {why}");
    }
    eprintln!("skipping: MySQL at {url} is unreachable ({why}); set BATCHGUARD_TEST_MYSQL");
    false
}

/// A fresh, empty database; `None` (with a printed reason) when the server is unreachable
/// outside CI.
pub fn fresh(tag: &str) -> Option<TestDb> {
    let name = format!(
        "bg_test_{}_{}_{}",
        std::process::id(),
        tag,
        SEQ.fetch_add(1, Ordering::SeqCst)
    );
    match rt().block_on(admin_exec(format!("CREATE DATABASE `{name}`"))) {
        Ok(()) => Some(TestDb {
            url: with_database(&admin_url(), &name),
            name,
        }),
        Err(why) => {
            unreachable(&why);
            None
        }
    }
}

impl TestDb {
    /// Rows of a query, every column as text.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        rt().block_on(async {
            use sqlx::Row;
            let mut c = sqlx::MySqlConnection::connect(&self.url)
                .await
                .expect("connect");
            let rows = sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
                .fetch_all(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            rows.iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| {
                            r.try_get_unchecked::<Option<String>, _>(i)
                                .expect("text column")
                        })
                        .collect()
                })
                .collect()
        })
    }

    pub fn exec(&self, sql: &str) {
        rt().block_on(async {
            let mut c = sqlx::MySqlConnection::connect(&self.url)
                .await
                .expect("connect");
            sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
                .execute(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        });
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = rt().block_on(admin_exec(format!(
            "DROP DATABASE IF EXISTS `{}`",
            self.name
        )));
    }
}

/// A TCP proxy in front of the server that records every client command: its command
/// byte and, for `COM_QUERY`, the start of its text. A command is a client packet with
/// sequence number 0 (the handshake's packets count from 1); each one is answered before
/// the next is sent, so each is a round trip (`COM_QUIT`, 0x01, is answered by nothing).
pub struct Proxy {
    pub port: u16,
    log: Arc<Mutex<Vec<(u8, String)>>>,
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

    /// The URL of `db` through this proxy (TLS off, so the packets can be read).
    pub fn url(&self, db: &TestDb) -> String {
        let target = host_port(&db.url);
        let u = db
            .url
            .replacen(&target, &format!("127.0.0.1:{}", self.port), 1);
        let sep = if u.contains('?') { '&' } else { '?' };
        format!("{u}{sep}ssl-mode=disabled")
    }

    /// Takes the commands seen so far.
    pub fn take(&self) -> Vec<(u8, String)> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }
}

/// `COM_QUERY`, `COM_STMT_PREPARE`, `COM_STMT_EXECUTE`.
pub const COM_QUERY: u8 = 0x03;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
const COM_QUIT: u8 = 0x01;

/// Round trips among commands: all but `COM_QUIT`.
pub fn round_trips(cmds: &[(u8, String)]) -> usize {
    cmds.iter().filter(|(c, _)| *c != COM_QUIT).count()
}

fn pump_client(mut client: TcpStream, mut server: TcpStream, log: Arc<Mutex<Vec<(u8, String)>>>) {
    // A command longer than one packet (16 MiB) continues in packets numbered 1, 2, …
    let mut continuing = false;
    loop {
        let mut head = [0u8; 4];
        if client.read_exact(&mut head).is_err() {
            break;
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        let seq = head[3];
        let mut body = vec![0u8; len];
        if client.read_exact(&mut body).is_err() {
            break;
        }
        // Logged before it is sent: once the reply can reach the client, `take` sees it.
        if seq == 0 && !continuing && !body.is_empty() {
            let text = if body[0] == COM_QUERY {
                String::from_utf8_lossy(&body[1..body.len().min(300)]).into_owned()
            } else {
                String::new()
            };
            log.lock().expect("log").push((body[0], text));
        }
        if server.write_all(&head).is_err() || server.write_all(&body).is_err() {
            break;
        }
        continuing = len == 0xff_ffff;
    }
    let _ = server.shutdown(std::net::Shutdown::Both);
}
