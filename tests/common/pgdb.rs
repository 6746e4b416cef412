//! A real PostgreSQL server for the store's tests: a fresh database per test (so parallel
//! tests and runs never see each other's rows), and a counting proxy that sees every
//! protocol message `batchguard` sends.
//!
//! `BATCHGUARD_TEST_PG` (default `postgres://postgres@127.0.0.1:5432/test`) names the
//! server and a database to connect to for `CREATE DATABASE`. When it is unreachable the
//! tests print why and pass, except under `CI=true`, where they fail: CI runs them for real.
#![allow(dead_code)]

use super::{proxy, server};
use server::rt;
use sqlx::{AssertSqlSafe, Connection};
use std::io::{BufReader, Read};
use std::net::TcpStream;

pub fn admin_url() -> String {
    std::env::var("BATCHGUARD_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// `host:port` of the URL (default port 5432).
pub fn host_port(url: &str) -> String {
    server::host_port(url, 5432)
}

async fn admin_exec(sql: String) -> Result<(), String> {
    let url = admin_url();
    let conn = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sqlx::PgConnection::connect(&url),
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

/// A fresh, empty database; `None` (with a printed reason) when the server is unreachable
/// outside CI.
pub fn fresh(tag: &str) -> Option<TestDb> {
    let name = server::unique("bg_test", '_', tag);
    match rt().block_on(admin_exec(format!("CREATE DATABASE {name}"))) {
        Ok(()) => Some(TestDb {
            url: server::with_database(&admin_url(), &name),
            name,
        }),
        Err(why) => server::unreachable("PostgreSQL", &admin_url(), "BATCHGUARD_TEST_PG", &why),
    }
}

impl TestDb {
    /// Rows of a query, every column as text.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        rt().block_on(async {
            use sqlx::Row;
            let mut c = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect");
            let rows = sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
                .fetch_all(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            rows.iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| r.try_get::<Option<String>, _>(i).expect("text column"))
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
            .block_on(sqlx::PgConnection::connect(&self.url))
            .expect("connect");
        Session { rt, conn }
    }
}

/// One connection to the test database.
pub struct Session {
    rt: tokio::runtime::Runtime,
    conn: sqlx::PgConnection,
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
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )));
    }
}

/// What the proxy logs of each client→server message: its type byte and, for a simple
/// `Query`, the start of its text. A round trip is a `Query` or a `Sync` (each is answered
/// by one `ReadyForQuery`).
pub type Proxy = proxy::Proxy<Wire>;

impl Proxy {
    /// The URL of `db` through this proxy (TLS off, so the messages can be read).
    pub fn url(&self, db: &TestDb) -> String {
        let u = self.through(&db.url, &host_port(&db.url));
        server::with_param(&u, "sslmode=disable")
    }
}

/// Round trips among messages: `Query` and `Sync`.
pub fn round_trips(msgs: &[(char, String)]) -> usize {
    msgs.iter().filter(|(t, _)| *t == 'Q' || *t == 'S').count()
}

/// The frontend protocol: an untyped startup message (after any SSLRequest or
/// GSSENCRequest), then messages of a type byte and a length.
pub struct Wire {
    startup: bool,
}

impl Default for Wire {
    fn default() -> Wire {
        Wire { startup: true }
    }
}

impl proxy::Protocol for Wire {
    type Msg = (char, String);

    fn read(&mut self, client: &mut BufReader<TcpStream>) -> Option<(Vec<u8>, Option<Self::Msg>)> {
        let head_len = if self.startup { 4 } else { 5 };
        let mut head = vec![0u8; head_len];
        client.read_exact(&mut head).ok()?;
        let len = u32::from_be_bytes(head[head_len - 4..].try_into().expect("4 bytes")) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        client.read_exact(&mut body).ok()?;
        let msg = if self.startup {
            let code = body
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            // SSLRequest / GSSENCRequest come before the real startup message.
            self.startup = matches!(code, Some(80_877_103) | Some(80_877_104));
            None
        } else {
            let kind = head[0] as char;
            let text = if kind == 'Q' {
                String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
            } else {
                String::new()
            };
            Some((kind, text))
        };
        head.extend_from_slice(&body);
        Some((head, msg))
    }
}
