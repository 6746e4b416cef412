//! What the `watch`, `metrics` and `audit --since` tests share: a manifest and a store in
//! a folder of their own, the store made by `batchguard store migrate` (SQLite or a fresh
//! PostgreSQL or MySQL / MariaDB database), rows written into it by hand for the crafted ledgers, and the
//! commands run against it. Times are the host's clock, rounded to the minute where a
//! slot is meant, with minutes of margin around every boundary a test relies on.
#![allow(dead_code)]

#[path = "stores.rs"]
pub mod stores;

pub use stores::{Kind, bin, ok};

use jiff::{SignedDuration, Timestamp};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The host's clock now.
pub fn now() -> Timestamp {
    Timestamp::now()
}

pub fn mins(n: i64) -> SignedDuration {
    SignedDuration::from_mins(n)
}

/// `t` rounded down to its minute.
pub fn minute(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second() - t.as_second().rem_euclid(60)).expect("in range")
}

/// RFC 3339 in UTC, microseconds, as `run` writes times.
pub fn ts(t: Timestamp) -> String {
    Timestamp::from_microsecond(t.as_microsecond())
        .expect("in range")
        .to_string()
}

/// The minute of the hour of `t` (for an hourly schedule whose slot is `t`'s minute).
pub fn minute_of_hour(t: Timestamp) -> i64 {
    t.as_second().rem_euclid(3600) / 60
}

pub enum Db {
    Sqlite(PathBuf),
    /// A fresh database on a real server.
    Server(stores::Db),
}

/// A manifest and a store, in a folder of their own.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub db: Db,
}

/// One event row.
#[derive(Clone, Debug, Default)]
pub struct Ev {
    pub run_id: String,
    pub job: String,
    pub scheduled_at: String,
    pub event: &'static str,
    pub at: String,
    pub instance: Option<String>,
    pub attempt: Option<i64>,
    pub status: Option<&'static str>,
    pub error_code: Option<String>,
    pub fence: Option<i64>,
    pub detail: Option<String>,
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn qo(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "NULL".to_owned(), q)
}

impl Case {
    fn migrated(manifest: &str, db: impl FnOnce(&Path) -> Db) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("m.batchguard.yaml"), manifest).expect("manifest");
        let c = Case {
            db: db(dir.path()),
            dir,
        };
        ok(&c.bg(&["store", "migrate", "--store", &c.url()]));
        c
    }

    /// A SQLite store made by `store migrate`, beside the manifest.
    pub fn sqlite(manifest: &str) -> Case {
        Case::migrated(manifest, |dir| Db::Sqlite(dir.join("store.db")))
    }

    /// A fresh database of `kind`, migrated; `None` when the server is unreachable outside
    /// CI (the test then says it skipped).
    pub fn on(kind: Kind, manifest: &str, tag: &str) -> Option<Case> {
        let db = kind.fresh(tag)?;
        Some(Case::migrated(manifest, |_| Db::Server(db)))
    }

    /// [`Case::on`] PostgreSQL.
    pub fn pg(manifest: &str, tag: &str) -> Option<Case> {
        Case::on(Kind::Pg, manifest, tag)
    }

    /// [`Case::on`] MySQL / MariaDB.
    pub fn mysql(manifest: &str, tag: &str) -> Option<Case> {
        Case::on(Kind::MySql, manifest, tag)
    }

    pub fn url(&self) -> String {
        match &self.db {
            Db::Sqlite(p) => format!("sqlite:{}", p.display()),
            Db::Server(d) => d.url(),
        }
    }

    fn kind(&self) -> Option<Kind> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Server(d) => Some(d.kind()),
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .args(args)
            .stdin(Stdio::null());
        c
    }

    pub fn bg(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("batchguard runs")
    }

    /// Runs SQL on the store.
    pub fn exec(&self, sql: &str) {
        match &self.db {
            Db::Sqlite(p) => sqlite_exec(p, sql),
            Db::Server(d) => d.exec(sql),
        }
    }

    pub fn event(&self, e: &Ev) {
        let trigger = self.kind().unwrap_or(Kind::Pg).trigger_column();
        self.exec(&format!(
            "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, attempt, \
             status, error_code, {trigger}, fence, detail) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, 'schedule', {}, {})",
            q(&e.run_id),
            q(&e.job),
            q(&e.scheduled_at),
            q(e.event),
            q(&e.at),
            qo(&e.instance),
            e.attempt.map_or("NULL".into(), |a| a.to_string()),
            e.status.map_or("NULL".into(), q),
            qo(&e.error_code),
            e.fence.map_or("NULL".into(), |a| a.to_string()),
            qo(&e.detail),
        ));
    }

    /// A run of `job` for `slot`: its `start` and, when `end` is given, a successful `end`.
    pub fn run(
        &self,
        run_id: &str,
        job: &str,
        slot: Timestamp,
        start: Timestamp,
        end: Option<Timestamp>,
    ) {
        let base = Ev {
            run_id: run_id.into(),
            job: job.into(),
            scheduled_at: ts(slot),
            instance: Some("host-a".into()),
            attempt: Some(1),
            ..Ev::default()
        };
        self.event(&Ev {
            event: "start",
            at: ts(start),
            fence: Some(1),
            ..base.clone()
        });
        if let Some(end) = end {
            self.event(&Ev {
                event: "end",
                at: ts(end),
                status: Some("success"),
                ..base
            });
        }
    }

    /// A lease row: `held` (or `released`), taken at `acquired` for `ttl`.
    pub fn lease(
        &self,
        job: &str,
        slot: Timestamp,
        (holder, run_id): (&str, &str),
        (acquired, until): (Timestamp, Timestamp),
        held: bool,
    ) {
        let state = if held { "held" } else { "released" };
        let key = format!("{job}:{}", ts(slot));
        // PostgreSQL keeps lease times as timestamptz, the others as microseconds.
        let (kind, time): (_, fn(Timestamp) -> String) = match self.kind() {
            Some(Kind::Pg) => (Kind::Pg, |t| q(&ts(t))),
            k => (k.unwrap_or(Kind::Pg), |t| t.as_microsecond().to_string()),
        };
        let key_column = if kind == Kind::MySql { "`key`" } else { "key" };
        self.exec(&format!(
            "INSERT INTO batchguard_leases ({key_column}, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until, state) \
             VALUES ({}, {}, {}, {}, {}, 1, {}, {}, '{state}')",
            q(&key),
            q(job),
            q(&ts(slot)),
            q(holder),
            q(run_id),
            time(acquired),
            time(until)
        ));
    }

    /// `batchguard watch --once --format json` over the store, parsed.
    pub fn watch_json(&self, extra: &[&str]) -> (serde_json::Value, Output) {
        let url = self.url();
        let mut args = vec![
            "watch",
            "--store",
            &url,
            "--manifest",
            "m.batchguard.yaml",
            "--once",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = self.bg(&args);
        let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "watch prints JSON ({e}); exit {:?}\nstdout: {}\nstderr: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (v, o)
    }
}

pub fn sqlite_exec(db: &Path, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
            .await
            .expect("open the SQLite file");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    });
}

/// A manifest of jobs, each `(name, schedule, expected_duration, ttl, extra YAML lines
/// of the job)`.
pub fn manifest(jobs: &[(&str, &str, &str, &str, &str)]) -> String {
    let mut s = String::from("version: 1\nservice: billing\njobs:\n");
    for (name, schedule, expected, ttl, extra) in jobs {
        s.push_str(&format!(
            "  - name: {name}\n    schedule: \"{schedule}\"\n    expected_duration: {expected}\n    command: [\"true\"]\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n{extra}"
        ));
    }
    s
}
