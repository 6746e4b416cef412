//! The real servers the store tests run on (PostgreSQL, MySQL / MariaDB, Redis), one
//! module each, with what they share: the counting proxy and the server helpers.
#![allow(dead_code)]

#[path = "mysqldb.rs"]
pub mod mysqldb;
#[path = "pgdb.rs"]
pub mod pgdb;
#[path = "proxy.rs"]
pub mod proxy;
#[path = "redisdb.rs"]
pub mod redisdb;
#[path = "server.rs"]
pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Which server a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pg,
    MySql,
    Redis,
}

/// A database (or, on Redis, a key prefix) of its own on a real server, gone at the end.
pub enum Db {
    Pg(pgdb::TestDb),
    My(mysqldb::TestDb),
    Redis(redisdb::TestRedis),
}

impl Kind {
    /// A fresh, empty store; `None` (with a printed reason) when the server is unreachable
    /// outside CI, a panic under `CI=true`.
    pub fn fresh(self, tag: &str) -> Option<Db> {
        match self {
            Kind::Pg => pgdb::fresh(tag).map(Db::Pg),
            Kind::MySql => mysqldb::fresh(tag).map(Db::My),
            Kind::Redis => redisdb::fresh(tag).map(Db::Redis),
        }
    }

    /// Whether the store keeps its own ledger; a Redis store needs `--ledger` apart.
    pub fn keeps_ledger(self) -> bool {
        self != Kind::Redis
    }

    /// The `i`th minutely slot of a scenario: 02:00 on 2026-03-01 onwards on a database;
    /// on Redis, from two hours ago (it refuses slots older than its markers' retention).
    pub fn slot(self, i: i64) -> String {
        let base = match self {
            Kind::Redis => {
                let now = jiff::Timestamp::now().as_second();
                now - now.rem_euclid(60) - 7200
            }
            _ => 1_772_330_400,
        };
        jiff::Timestamp::from_second(base + 60 * i)
            .expect("in range")
            .to_string()
    }

    /// `trigger` as a column name (a reserved word: MySQL quotes it with backquotes).
    pub fn trigger_column(self) -> &'static str {
        match self {
            Kind::MySql => "`trigger`",
            _ => "\"trigger\"",
        }
    }

    /// A time `secs` from the database's now, as the leases table keeps it.
    pub fn db_time(self, secs: i64) -> String {
        match self {
            Kind::Pg => format!("now() + interval '{secs} seconds'"),
            Kind::MySql => format!(
                "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {}",
                secs * 1_000_000
            ),
            Kind::Redis => panic!("Redis keeps no tables"),
        }
    }

    /// A slot as the tables keep it (MySQL: RFC 3339 text with six fractional digits).
    pub fn db_slot(self, slot: &str) -> String {
        match self {
            Kind::MySql if !slot.contains('.') => {
                format!("{}.000000Z", slot.trim_end_matches('Z'))
            }
            _ => slot.to_owned(),
        }
    }
}

impl Db {
    pub fn kind(&self) -> Kind {
        match self {
            Db::Pg(_) => Kind::Pg,
            Db::My(_) => Kind::MySql,
            Db::Redis(_) => Kind::Redis,
        }
    }

    /// The store URL.
    pub fn url(&self) -> String {
        match self {
            Db::Pg(d) => d.url.clone(),
            Db::My(d) => d.url.clone(),
            Db::Redis(r) => r.url(),
        }
    }

    /// Runs SQL on the database.
    pub fn exec(&self, sql: &str) {
        match self {
            Db::Pg(d) => d.exec(sql),
            Db::My(d) => d.exec(sql),
            Db::Redis(_) => panic!("Redis runs no SQL: {sql}"),
        }
    }

    /// Rows of a query, every column as text.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        match self {
            Db::Pg(d) => d.rows(sql),
            Db::My(d) => d.rows(sql),
            Db::Redis(_) => panic!("Redis runs no SQL: {sql}"),
        }
    }

    /// A connection kept open, for a transaction left open while others commit.
    pub fn session(&self) -> Session {
        match self {
            Db::Pg(d) => Session::Pg(d.session()),
            Db::My(d) => Session::My(d.session()),
            Db::Redis(_) => panic!("Redis runs no SQL"),
        }
    }

    /// The Redis prefix of its own.
    pub fn redis(&self) -> &redisdb::TestRedis {
        match self {
            Db::Redis(r) => r,
            _ => panic!("not Redis"),
        }
    }

    /// A counting proxy in front of the database.
    pub fn proxy(&self) -> Counter {
        match self {
            Db::Pg(d) => {
                let p = pgdb::Proxy::start(&pgdb::host_port(&d.url));
                let url = p.url(d);
                Counter::Pg(p, url)
            }
            Db::My(d) => {
                let p = mysqldb::Proxy::start(&mysqldb::host_port(&d.url));
                let url = p.url(d);
                Counter::My(p, url)
            }
            Db::Redis(_) => panic!("Redis counts its round trips as pipelines"),
        }
    }
}

impl Db {
    /// How many sessions of this database wait for a lock (a row's, or a named or
    /// advisory lock): what a test that holds a lock waits for before letting go.
    pub fn lock_waiters(&self) -> usize {
        let sql = match self {
            Db::Pg(_) => {
                "SELECT count(*)::text FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'"
            }
            // A statement still running in a session of this database: the flushes are
            // quick, so one that runs on is waiting (InnoDB's lock tables do not name the
            // session on MariaDB).
            Db::My(_) => {
                "SELECT CAST(COUNT(*) AS CHAR) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND COMMAND = 'Query' AND ID <> CONNECTION_ID()"
            }
            Db::Redis(_) => panic!("Redis runs one script at a time: nothing waits"),
        };
        self.rows(sql)[0][0]
            .as_deref()
            .and_then(|n| n.parse().ok())
            .expect("a count")
    }

    /// A relay in front of the server that the test can cut, and the store URL through it.
    pub fn relay(&self) -> (Relay, String) {
        let url = self.url();
        let target = match self {
            Db::Pg(_) => pgdb::host_port(&url),
            Db::My(_) => mysqldb::host_port(&url),
            Db::Redis(_) => redisdb::host_port(&url),
        };
        let relay = Relay::start(&target);
        let through = url.replacen(&target, &format!("127.0.0.1:{}", relay.port), 1);
        (relay, through)
    }
}

/// A plain TCP relay to a server, cut on demand: every connection through it is closed
/// and new ones are refused, as a store restart or a network cut does to a client.
pub struct Relay {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(target: &str) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c2, k2, target) = (cut.clone(), conns.clone(), target.to_owned());
        // The listener is polled so that `cut` can close it: refused from then on.
        let accepting = std::thread::spawn(move || {
            while !c2.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        continue;
                    }
                    Err(_) => break,
                };
                let _ = client.set_nonblocking(false);
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let mut kept = k2.lock().expect("conns");
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut r, mut w) = (
                        from.try_clone().expect("clone"),
                        to.try_clone().expect("clone"),
                    );
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut r, &mut w);
                        let _ = w.shutdown(std::net::Shutdown::Both);
                    });
                }
                kept.push(client);
                kept.push(server);
            }
        });
        Relay {
            port,
            cut,
            conns,
            accepting: Some(accepting),
        }
    }

    /// Closes every connection and refuses new ones; returns once that is so.
    pub fn cut(&mut self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.accepting.take() {
            let _ = t.join();
        }
        for c in self.conns.lock().expect("conns").drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}

/// One connection to a database.
pub enum Session {
    Pg(pgdb::Session),
    My(mysqldb::Session),
}

impl Session {
    pub fn exec(&mut self, sql: &str) {
        match self {
            Session::Pg(s) => s.exec(sql),
            Session::My(s) => s.exec(sql),
        }
    }
}

/// A database's counting proxy and the URL through it.
pub enum Counter {
    Pg(pgdb::Proxy, String),
    My(mysqldb::Proxy, String),
}

/// What a client sent since the last look.
pub struct Trips {
    pub round_trips: usize,
    /// The texts of its simple queries, in order.
    pub queries: Vec<String>,
    /// Whether it sent only simple queries (no prepared statement, no extended protocol).
    pub only_simple: bool,
    /// Every message, to show when an assertion fails.
    pub all: String,
}

impl Counter {
    pub fn url(&self) -> &str {
        match self {
            Counter::Pg(_, u) | Counter::My(_, u) => u,
        }
    }

    pub fn take(&self) -> Trips {
        match self {
            Counter::Pg(p, _) => {
                let msgs = p.take();
                Trips {
                    round_trips: pgdb::round_trips(&msgs),
                    queries: queries(&msgs, 'Q'),
                    only_simple: msgs.iter().all(|(t, _)| matches!(t, 'Q' | 'X')),
                    all: format!("{msgs:#?}"),
                }
            }
            Counter::My(p, _) => {
                let msgs = p.take();
                Trips {
                    round_trips: mysqldb::round_trips(&msgs),
                    queries: queries(&msgs, mysqldb::COM_QUERY),
                    only_simple: msgs.iter().all(|(t, _)| {
                        *t != mysqldb::COM_STMT_PREPARE && *t != mysqldb::COM_STMT_EXECUTE
                    }),
                    all: format!("{msgs:#?}"),
                }
            }
        }
    }
}

fn queries<K: PartialEq>(msgs: &[(K, String)], query: K) -> Vec<String> {
    msgs.iter()
        .filter(|(t, _)| *t == query)
        .map(|(_, q)| q.clone())
        .collect()
}

/// (event, attempt, fence, status, error_code, detail) in order of writing.
pub type Ev = (
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// A manifest of one job `j` (every minute, keyed by its slot) in a folder of its own, and
/// a store of its own: what the `run` tests run.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub db: Db,
}

/// `retry:` of a job that is never retried.
pub const NO_RETRY: &str = "      max_attempts: 1\n";

impl Case {
    /// A fresh store made by `store migrate`, and job `j` with `ttl`, `retry` (YAML lines)
    /// and `command` (a YAML flow list); `None` when the server is unreachable outside CI.
    pub fn new(kind: Kind, tag: &str, ttl: &str, retry: &str, command: &str) -> Option<Case> {
        let c = Case::unmigrated(kind, tag, ttl, retry, command)?;
        ok(&c.migrate());
        Some(c)
    }

    /// [`Case::new`] without the migrate.
    pub fn unmigrated(
        kind: Kind,
        tag: &str,
        ttl: &str,
        retry: &str,
        command: &str,
    ) -> Option<Case> {
        let db = kind.fresh(tag)?;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = if kind == Kind::Redis {
            "      store: redis\n"
        } else {
            ""
        };
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n{store}    retry:\n{retry}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Some(Case { dir, db })
    }

    pub fn kind(&self) -> Kind {
        self.db.kind()
    }

    pub fn url(&self) -> String {
        self.db.url()
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn migrate(&self) -> Output {
        self.bg(&["store", "migrate", "--store", &self.url()])
    }

    /// `batchguard ARGS` in the case's folder.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// [`Case::command`], run to its end.
    pub fn bg(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("batchguard runs")
    }

    /// `run` of `j` on `store`, as it is (no ledger added).
    pub fn cmd_on(&self, store: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--store", store])
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    /// `run` of `j` on `store` (the case's, or a proxy in front of it), with the JSONL
    /// ledger beside the manifest where the store keeps none.
    pub fn run_on(&self, store: &str, extra: &[&str]) -> Output {
        self.cmd_ledger(store, extra).output().expect("run")
    }

    /// [`Case::run_on`] the case's store.
    pub fn run(&self, extra: &[&str]) -> Output {
        self.run_on(&self.url(), extra)
    }

    /// The command of [`Case::run`], to spawn.
    pub fn cmd(&self, extra: &[&str]) -> Command {
        self.cmd_ledger(&self.url(), extra)
    }

    /// `run` of `j` on `store`, with the ledger apart where the store keeps none.
    pub fn cmd_ledger(&self, store: &str, extra: &[&str]) -> Command {
        let mut args = self.ledger_apart();
        args.extend_from_slice(extra);
        self.cmd_on(store, &args)
    }

    fn ledger_apart(&self) -> Vec<&'static str> {
        self.ledger_apart_file()
            .map_or(vec![], |l| vec!["--ledger", l])
    }

    /// The JSONL ledger beside the manifest, where the store keeps none.
    pub fn ledger_apart_file(&self) -> Option<&'static str> {
        (!self.kind().keeps_ledger()).then_some("ledger.jsonl")
    }

    /// The run ids of the ledger's `event` rows, in order.
    pub fn run_ids(&self, event: &str) -> Vec<String> {
        if self.kind().keeps_ledger() {
            return self
                .db
                .rows(&format!(
                    "SELECT run_id FROM batchguard_events WHERE event = '{event}'"
                ))
                .into_iter()
                .map(|r| r[0].clone().expect("run_id"))
                .collect();
        }
        std::fs::read_to_string(self.path("ledger.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json line"))
            .filter(|v| v["event"] == event)
            .map(|v| v["run_id"].as_str().expect("run_id").to_owned())
            .collect()
    }

    /// Where `audit` reads what `run` wrote: `--ledger` (and `--outputs`).
    pub fn ledger_args(&self) -> Vec<String> {
        if self.kind().keeps_ledger() {
            vec!["--ledger".into(), self.url()]
        } else {
            [
                "--ledger",
                "ledger.jsonl",
                "--outputs",
                "ledger.outputs.jsonl",
            ]
            .map(String::from)
            .to_vec()
        }
    }

    /// The events `run` wrote, in order.
    pub fn events(&self) -> Vec<Ev> {
        let sql = match self.kind() {
            Kind::Pg => {
                "SELECT event, attempt::text, fence::text, status, error_code, detail \
                 FROM batchguard_events ORDER BY at, ctid"
            }
            Kind::MySql => {
                "SELECT event, CAST(attempt AS CHAR), CAST(fence AS CHAR), status, error_code, detail \
                 FROM batchguard_events ORDER BY id"
            }
            Kind::Redis => return self.jsonl_events(),
        };
        self.db
            .rows(sql)
            .into_iter()
            .map(|r| {
                let n = |i: usize| r[i].as_deref().and_then(|s| s.parse().ok());
                (
                    r[0].clone().expect("event"),
                    n(1),
                    n(2),
                    r[3].clone(),
                    r[4].clone(),
                    r[5].clone(),
                )
            })
            .collect()
    }

    /// Each event's kind and time, in the order written.
    pub fn event_times(&self) -> Vec<(String, jiff::Timestamp)> {
        let sql = match self.kind() {
            Kind::Pg => {
                "SELECT event, (floor(extract(epoch from at) * 1000000))::bigint::text \
                 FROM batchguard_events ORDER BY ctid"
            }
            Kind::MySql => "SELECT event, at FROM batchguard_events ORDER BY id",
            Kind::Redis => {
                let text = std::fs::read_to_string(self.path("ledger.jsonl")).unwrap_or_default();
                return text
                    .lines()
                    .map(|l| {
                        let v: serde_json::Value = serde_json::from_str(l).expect("json line");
                        (
                            v["event"].as_str().expect("event").to_owned(),
                            v["at"].as_str().expect("at").parse().expect("time"),
                        )
                    })
                    .collect();
            }
        };
        self.db
            .rows(sql)
            .into_iter()
            .map(|r| {
                let at = r[1].clone().expect("at");
                let t = match at.parse::<i64>() {
                    Ok(us) => jiff::Timestamp::from_microsecond(us).expect("time"),
                    Err(_) => at.parse().expect("time"),
                };
                (r[0].clone().expect("event"), t)
            })
            .collect()
    }

    fn jsonl_events(&self) -> Vec<Ev> {
        let text = std::fs::read_to_string(self.path("ledger.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json line");
                let s = |k: &str| v[k].as_str().map(str::to_owned);
                (
                    s("event").expect("event"),
                    v["attempt"].as_i64(),
                    v["fence"].as_i64(),
                    s("status"),
                    s("error_code"),
                    s("detail"),
                )
            })
            .collect()
    }

    /// The output keys the ledger holds, sorted.
    pub fn output_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = if self.kind().keeps_ledger() {
            self.db
                .rows("SELECT output_key FROM batchguard_outputs")
                .into_iter()
                .map(|r| r[0].clone().expect("output_key"))
                .collect()
        } else {
            std::fs::read_to_string(self.path("ledger.outputs.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).expect("json line");
                    v["output_key"].as_str().expect("output_key").to_owned()
                })
                .collect()
        };
        keys.sort();
        keys
    }

    /// A lease of `j` for `slot` held by `ghost` (run `r-ghost`, fence 1) for a minute of
    /// the store's time, its slot `running` at attempt 1: what a holder that died leaves.
    pub fn plant_ghost(&self, slot: &str) {
        let kind = self.kind();
        if let Db::Redis(r) = &self.db {
            let p = &r.prefix;
            let _: i64 = r.cmd(&["INCR", &format!("{p}:fence:j")]);
            let _: String = r.cmd(&[
                "SET",
                &format!("{p}:lease:j:{slot}"),
                &format!(
                    r#"{{"holder":"ghost","run_id":"r-ghost","fence":1,"job":"j","scheduled_at":"{slot}"}}"#
                ),
                "PX",
                "60000",
            ]);
            let _: i64 = r.cmd(&[
                "HSET",
                &format!("{p}:slot:j:{slot}"),
                "attempts",
                "1",
                "state",
                "running",
                "run_id",
                "r-ghost",
            ]);
            let _: String = r.cmd(&[
                "SET",
                &format!("{p}:run:r-ghost"),
                &format!("{p}:lease:j:{slot}"),
            ]);
            let at: jiff::Timestamp = slot.parse().expect("slot");
            let _: i64 = r.cmd(&[
                "ZADD",
                &format!("{p}:slots:j"),
                &at.as_second().to_string(),
                slot,
            ]);
            return;
        }
        self.db.exec(match kind {
            Kind::Pg => "SELECT nextval('batchguard_fence')",
            _ => "UPDATE batchguard_fence SET value = value + 1 WHERE id = 1",
        });
        self.insert_lease(
            &format!("j:{slot}"),
            slot,
            ("ghost", "r-ghost", 1),
            (0, 60),
            "held",
        );
        self.db.exec(&format!(
            "INSERT INTO batchguard_slots VALUES ('j', '{}', 1, 'running', 'r-ghost')",
            kind.db_slot(slot)
        ));
    }

    /// A row of the leases table: `(holder, run, fence)`, taken and ending `secs` from the
    /// database's now.
    pub fn insert_lease(
        &self,
        key: &str,
        slot: &str,
        (holder, run, fence): (&str, &str, i64),
        (acquired, until): (i64, i64),
        state: &str,
    ) {
        let kind = self.kind();
        self.db.exec(&format!(
            "INSERT INTO batchguard_leases VALUES ('{key}', 'j', '{}', '{holder}', '{run}', {fence}, {}, {}, '{state}')",
            kind.db_slot(slot),
            kind.db_time(acquired),
            kind.db_time(until)
        ));
    }

    /// Ends every lease in the store's time, and waits until the store says so.
    pub fn expire_leases(&self) {
        match &self.db {
            Db::Redis(r) => {
                for lease in r.keys().iter().filter(|k| k.contains(":lease:")) {
                    let _: i64 = r.cmd(&["PEXPIRE", lease, "1"]);
                    while r.cmd::<i64>(&["EXISTS", lease]) == 1 {
                        std::thread::yield_now();
                    }
                }
            }
            db => db.exec(&format!(
                "UPDATE batchguard_leases SET lease_until = {}",
                db.kind().db_time(-1)
            )),
        }
    }

    /// Deletes every lease the store keeps.
    pub fn delete_leases(&self) {
        match &self.db {
            Db::Redis(r) => {
                for lease in r.keys().iter().filter(|k| k.contains(":lease:")) {
                    let _: i64 = r.cmd(&["DEL", lease]);
                }
            }
            db => db.exec("DELETE FROM batchguard_leases"),
        }
    }

    /// Forgets every slot and lease the store keeps (the ledger stays).
    pub fn forget_slots(&self) {
        match &self.db {
            Db::Redis(r) => {
                for k in r.keys().iter().filter(|k| !k.contains(":fence:")) {
                    let _: i64 = r.cmd(&["DEL", k]);
                }
            }
            db => {
                db.exec("DELETE FROM batchguard_slots");
                db.exec("DELETE FROM batchguard_leases");
            }
        }
    }

    /// What a run of `slot` killed after its `start` leaves: its folder `run` with its
    /// `outputs`, and (where the store keeps the ledger) the `start` row, or (a ledger
    /// apart) the `run.json` that names the ledger.
    pub fn plant_dead_run(&self, run: &str, slot: &str, outputs: &str) {
        let dir = self.path(".batchguard/runs").join(run);
        std::fs::create_dir_all(&dir).expect("run folder");
        std::fs::write(dir.join("outputs"), outputs).expect("outputs");
        let kind = self.kind();
        if kind.keeps_ledger() {
            self.db.exec(&format!(
                "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, {}) \
                 VALUES ('{run}', 'j', '{}', 'start', '{}', 'schedule')",
                kind.trigger_column(),
                kind.db_slot(slot),
                kind.db_slot(&slot.replace(":00Z", ":01Z"))
            ));
        } else {
            let json = serde_json::json!({
                "store": self.url(), "ledger": "ledger.jsonl", "job": "j", "scheduled_at": slot
            });
            std::fs::write(dir.join("run.json"), json.to_string()).expect("run.json");
        }
    }
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_batchguard"))
}

pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The finding codes of an `audit --format json`.
pub fn audit_codes(audit: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).expect("audit json");
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

/// What a command said on stderr.
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether `dir` is empty (or gone).
pub fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}
