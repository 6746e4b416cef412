//! A real MySQL / MariaDB server for the store's tests: a fresh database per test, and a
//! counting proxy that sees every command packet `batchguard` sends.
//!
//! `BATCHGUARD_TEST_MYSQL` (default `mysql://root@127.0.0.1:3306/test`) names the server and
//! a database to connect to for `CREATE DATABASE`. When it is unreachable the tests print
//! why and pass, except under `CI=true`, where they fail: CI runs them for real.
#![allow(dead_code)]

use super::{proxy, server};
use server::rt;
pub use server::with_database;
use sqlx::{AssertSqlSafe, Connection};
use std::io::{BufReader, Read};
use std::net::TcpStream;

pub fn admin_url() -> String {
    std::env::var("BATCHGUARD_TEST_MYSQL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_string())
}

/// `host:port` of the URL (default port 3306).
pub fn host_port(url: &str) -> String {
    server::host_port(url, 3306)
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

/// Whether the server answers; `false` (with a printed reason) outside CI, a panic in CI.
pub fn reachable() -> bool {
    match rt().block_on(admin_exec("SELECT 1".into())) {
        Ok(()) => true,
        Err(why) => unreachable::<()>(&why).is_some(),
    }
}

fn unreachable<T>(why: &str) -> Option<T> {
    server::unreachable("MySQL", &admin_url(), "BATCHGUARD_TEST_MYSQL", why)
}

/// A fresh, empty database; `None` (with a printed reason) when the server is unreachable
/// outside CI.
pub fn fresh(tag: &str) -> Option<TestDb> {
    let name = server::unique("bg_test", '_', tag);
    match rt().block_on(admin_exec(format!("CREATE DATABASE `{name}`"))) {
        Ok(()) => Some(TestDb {
            url: with_database(&admin_url(), &name),
            name,
        }),
        Err(why) => unreachable(&why),
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
        self.session().exec(sql);
    }

    /// A connection kept open, for a transaction left open while others commit.
    pub fn session(&self) -> Session {
        let rt = rt();
        let conn = rt
            .block_on(sqlx::MySqlConnection::connect(&self.url))
            .expect("connect");
        Session { rt, conn }
    }
}

/// One connection to the test database.
pub struct Session {
    rt: tokio::runtime::Runtime,
    conn: sqlx::MySqlConnection,
}

impl Session {
    pub fn exec(&mut self, sql: &str) {
        self.rt
            .block_on(sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).execute(&mut self.conn))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
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

/// What the proxy logs of each client command: its command byte and, for `COM_QUERY`, the
/// start of its text. A command is a client packet with sequence number 0 (the handshake's
/// packets count from 1); each one is answered before the next is sent, so each is a round
/// trip (`COM_QUIT`, 0x01, is answered by nothing).
pub type Proxy = proxy::Proxy<Wire>;

impl Proxy {
    /// The URL of `db` through this proxy (TLS off, so the packets can be read).
    pub fn url(&self, db: &TestDb) -> String {
        let u = self.through(&db.url, &host_port(&db.url));
        server::with_param(&u, "ssl-mode=disabled")
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

/// Client packets: a 3-byte length and a sequence number.
#[derive(Default)]
pub struct Wire {
    /// A command longer than one packet (16 MiB) continues in packets numbered 1, 2, …
    continuing: bool,
}

impl proxy::Protocol for Wire {
    type Msg = (u8, String);

    fn read(&mut self, client: &mut BufReader<TcpStream>) -> Option<(Vec<u8>, Option<Self::Msg>)> {
        let mut head = [0u8; 4];
        client.read_exact(&mut head).ok()?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        let seq = head[3];
        let mut body = vec![0u8; len];
        client.read_exact(&mut body).ok()?;
        let msg = (seq == 0 && !self.continuing && !body.is_empty()).then(|| {
            let text = if body[0] == COM_QUERY {
                String::from_utf8_lossy(&body[1..body.len().min(300)]).into_owned()
            } else {
                String::new()
            };
            (body[0], text)
        });
        self.continuing = len == 0xff_ffff;
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(&body);
        Some((bytes, msg))
    }
}
