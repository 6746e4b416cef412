//! The MySQL / MariaDB store and ledger (`mysql://user:pass@host:port/db`): several hosts
//! share one database (SPEC 7.2).
//!
//! Round trips are the budget, as for PostgreSQL: every operation is ONE `COM_QUERY` packet
//! holding a multi-statement transaction (the server runs the statements in order and
//! answers them in one flight), sent with the text protocol — sqlx's prepared statements
//! cost a `COM_STMT_PREPARE` round trip per new statement in every fresh process. Values
//! are written in as hex literals (`_utf8mb4 X'…'`), which mean the same whatever the
//! server's `sql_mode` (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`) says. The session set-up
//! sqlx sends after connecting (`SET sql_mode…, time_zone…, NAMES…`) is switched off: the
//! handshake already chooses utf8mb4, and every time here is `UTC_TIMESTAMP(6)`.
//!
//! The acquire locks the fence counter's one row first (`SELECT … FOR UPDATE`), then the
//! slot row and the lease row: acquires are serialised, so the gap locks InnoDB takes for a
//! slot or key that has no row yet never meet another acquire's insert (no deadlock among
//! fifty contenders on a new slot), and the time it reads is taken after it waited.
//! Finishes lock the slot row, then the lease row: the same order (after the run's own
//! `GET_LOCK`, which only finishes of that run take: see `sql::finish_statements`). The
//! acquire also checks a named slot against the database's clock and reads the job's
//! unfinished slots (SPEC 7.1 items 22, 27), in the same packet.
//!
//! Ledger times are RFC 3339 text (see `schemas/ledger.mysql.sql`), written with six
//! fractional digits so text order is time order.

use super::ledger::{Batch, Ledger};
use super::url::Conn;
use super::{
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, Finished, HeldLease,
    LeaseRow, OutputRow, Refusal, SlotRow, Store, StoreError, StoreUrl, Unfinished,
};
use jiff::Timestamp;
use sqlx::mysql::MySqlConnection;
use sqlx::{AssertSqlSafe, ConnectOptions, Row};
use std::time::{Duration, Instant};

mod sql;
use sql::{
    EVENT_COLUMNS, NOW_US, UNFINISHED_COLUMNS, acquire_sql, batch_statements, event_values,
    finish_statements, outputs_inserts, packets, release_run_lock, ts, unfinished_from,
};
pub use sql::{lit, text_time};

/// The DDL `store migrate` runs: the ledger tables and the store's own.
pub const DDL: [&str; 2] = [
    include_str!("../../schemas/ledger.mysql.sql"),
    include_str!("../../schemas/store.mysql.sql"),
];

/// The stored function `batchguard_claim` (SPEC 7.5): one statement, created by `store
/// migrate` after the tables (dropped first: MySQL has no `CREATE OR REPLACE FUNCTION`).
pub const CLAIM_FUNCTION: &str = include_str!("../../schemas/claims.mysql.sql");

/// How long one operation may take before the store counts as unreachable.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest rendered `lock.key` the lease table holds.
pub const MAX_KEY_CHARS: usize = 512;

/// ER_LOCK_DEADLOCK, and ER_AUTOINC_READ_FAILED (what InnoDB answers when the deadlock was
/// on a table's auto-increment lock): the transaction was rolled back; it is sent again.
const DEADLOCKS: [u16; 2] = [1213, 1467];

pub struct MysqlStore {
    rt: tokio::runtime::Runtime,
    conn: MySqlConnection,
    url: StoreUrl,
    shown: String,
    /// The database's clock at the last answer, and when (monotonic) it arrived.
    clock: Option<(Timestamp, Instant)>,
}

type Rows = Vec<Vec<Option<String>>>;

fn parse_us(v: Option<&str>) -> Option<Timestamp> {
    v.and_then(|s| s.parse::<i64>().ok())
        .and_then(|u| Timestamp::from_microsecond(u).ok())
}

fn secs_until(until_us: Option<&str>, now: Timestamp) -> i64 {
    let until = until_us.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    ((until - now.as_microsecond()).max(0) + 999_999) / 1_000_000
}

/// Splits `DELIMITER`-free DDL into statements: `;` at a line's end ends one.
pub(super) fn ddl_statements(ddl: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in ddl.lines() {
        let t = line.trim();
        if t.starts_with("--") || t.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if t.ends_with(';') {
            out.push(cur.trim().trim_end_matches(';').to_owned());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

impl MysqlStore {
    pub fn open(url: &StoreUrl) -> Result<MysqlStore, StoreError> {
        Self::open_with(url, false)
    }

    /// `migrate`: create the tables (idempotent) before anything else.
    pub fn open_with(url: &StoreUrl, migrate: bool) -> Result<MysqlStore, StoreError> {
        let shown = url.shown().to_owned();
        let rt = crate::db::runtime().map_err(StoreError::failed)?;
        let Conn::Mysql(options) = url.conn() else {
            return Err(StoreError::bad_url(format!("{shown}: not a MySQL URL")));
        };
        let options = options
            .as_ref()
            .clone()
            .pipes_as_concat(false)
            .no_engine_substitution(false)
            .timezone(None)
            .set_names(false)
            .disable_statement_logging();
        let conn = rt.block_on(async {
            match tokio::time::timeout(crate::db::CONNECT_TIMEOUT, options.connect()).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(e)) => Err(StoreError::unreachable(format!(
                    "{shown}: cannot connect: {}",
                    url.scrub(crate::db::driver_message(&e))
                ))),
                Err(_) => Err(StoreError::unreachable(format!(
                    "{shown}: cannot connect: no answer within {} s",
                    crate::db::CONNECT_TIMEOUT.as_secs()
                ))),
            }
        })?;
        let mut st = MysqlStore {
            rt,
            conn,
            url: url.clone(),
            shown,
            clock: None,
        };
        if migrate {
            st.migrate()?;
        }
        Ok(st)
    }

    /// The batchguard tables this database has (`store migrate` says which it created).
    pub fn tables(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name LIKE 'batchguard\\_%' ORDER BY 1"
                .into(),
            "cannot list the tables",
        )?;
        Ok(super::repair::first_column(rows))
    }

    /// The highest fence per job in the ledger tables.
    pub fn max_fences(&mut self) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
        let rows = self.query(
            "SELECT job, CAST(max(fence) AS CHAR) FROM batchguard_events WHERE fence IS NOT NULL GROUP BY job".into(),
            "cannot read the fences",
        )?;
        Ok(super::repair::fences_of_rows(rows))
    }

    /// Moves the fencing counter past `fence` (never back); answers its next value.
    pub fn raise_fence(&mut self, fence: i64) -> Result<i64, StoreError> {
        let rows = self.query(
            format!(
                "START TRANSACTION;
UPDATE batchguard_fence SET value = GREATEST(value, {fence}) WHERE id = 1;
COMMIT;
SELECT CAST(value + 1 AS CHAR) FROM batchguard_fence WHERE id = 1"
            ),
            "cannot move the fencing counter",
        )?;
        rows.last()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| self.unexpected("cannot move the fencing counter"))
    }

    /// The DDL, statement by statement (MySQL commits each DDL statement), under a named
    /// lock so two migrates do not interleave.
    pub fn migrate(&mut self) -> Result<(), StoreError> {
        const WHAT: &str = "cannot create the tables";
        let got = self.query(
            "SELECT CAST(GET_LOCK('batchguard_migrate', 60) AS CHAR)".into(),
            WHAT,
        )?;
        if got
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .as_deref()
            != Some("1")
        {
            return Err(StoreError::failed(format!(
                "{}: {WHAT}: another `store migrate` holds the lock",
                self.shown
            )));
        }
        let mut result = Ok(());
        for ddl in DDL {
            for stmt in ddl_statements(ddl) {
                if let Err(e) = self.query(stmt, WHAT) {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = self.widen_trigger_check();
        }
        if result.is_ok() {
            result = self.widen_status_check();
        }
        if result.is_ok() {
            result = self.create_claim_function();
        }
        let _ = self.query("DO RELEASE_LOCK('batchguard_migrate')".into(), WHAT);
        result
    }

    /// The claim's stored function, replaced by the current one. A server with binary
    /// logging refuses a function that writes unless the creator may (`SUPER`, or
    /// `log_bin_trust_function_creators = 1`): the message says so.
    fn create_claim_function(&mut self) -> Result<(), StoreError> {
        const WHAT: &str = "cannot create the function batchguard_claim";
        self.query("DROP FUNCTION IF EXISTS batchguard_claim".into(), WHAT)?;
        self.query(CLAIM_FUNCTION.to_owned(), WHAT).map_err(|e| {
            if e.0.contains("log_bin_trust_function_creators") || e.0.contains("DETERMINISTIC") {
                StoreError::failed(format!(
                    "{} (binary logging is on: set `log_bin_trust_function_creators = 1` on the server, or migrate as a user with SUPER; the function writes only batchguard's own tables)",
                    e.0
                ))
            } else {
                e
            }
        })?;
        Ok(())
    }

    /// `catch_up` joined the triggers after the first release, and `CREATE TABLE IF NOT
    /// EXISTS` leaves an older table's check as it was. MariaDB keeps a column's check with
    /// the column, so `MODIFY` replaces it; MySQL 8 keeps it as a table constraint of its
    /// own (`…_chk_N`), dropped by name when it still lacks `catch_up`.
    fn widen_trigger_check(&mut self) -> Result<(), StoreError> {
        const WHAT: &str = "cannot widen the `trigger` check";
        const TRIGGERS: &str = "('schedule', 'retry', 'manual', 'replay', 'catch_up')";
        self.query(
            format!(
                "ALTER TABLE batchguard_events MODIFY `trigger` VARCHAR(16) NOT NULL DEFAULT 'schedule' CHECK (`trigger` IN {TRIGGERS})"
            ),
            WHAT,
        )?;
        let old = self.query(
            "SELECT c.CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS t \
             JOIN information_schema.CHECK_CONSTRAINTS c \
               ON c.CONSTRAINT_SCHEMA = t.CONSTRAINT_SCHEMA AND c.CONSTRAINT_NAME = t.CONSTRAINT_NAME \
             WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = 'batchguard_events' \
               AND t.CONSTRAINT_TYPE = 'CHECK' AND c.CHECK_CLAUSE LIKE '%replay%' \
               AND c.CHECK_CLAUSE NOT LIKE '%catch_up%'"
                .into(),
            WHAT,
        )?;
        for name in old
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
        {
            let name = name.replace('`', "``");
            self.query(
                format!("ALTER TABLE batchguard_events DROP CHECK `{name}`"),
                WHAT,
            )?;
        }
        Ok(())
    }

    /// `superseded` joined the statuses in round 4 (SPEC 7.1 item 24). Unlike the trigger's,
    /// this check is only rewritten when a check on `status` still lacks it (the `MODIFY`
    /// may copy the table): on MariaDB the `MODIFY` replaces the column's check; on MySQL 8
    /// it adds a constraint, and the old one is then dropped by name.
    fn widen_status_check(&mut self) -> Result<(), StoreError> {
        const WHAT: &str = "cannot widen the `status` check";
        let narrow = "SELECT c.CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS t \
             JOIN information_schema.CHECK_CONSTRAINTS c \
               ON c.CONSTRAINT_SCHEMA = t.CONSTRAINT_SCHEMA AND c.CONSTRAINT_NAME = t.CONSTRAINT_NAME \
             WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = 'batchguard_events' \
               AND c.TABLE_NAME = 'batchguard_events' \
               AND t.CONSTRAINT_TYPE = 'CHECK' AND c.CHECK_CLAUSE LIKE '%failure%' \
               AND c.CHECK_CLAUSE NOT LIKE '%superseded%'";
        if self.query(narrow.into(), WHAT)?.is_empty() {
            return Ok(());
        }
        self.query(
            "ALTER TABLE batchguard_events MODIFY status VARCHAR(16) \
             CHECK (status IN ('success', 'failure', 'superseded'))"
                .into(),
            WHAT,
        )?;
        for name in self
            .query(narrow.into(), WHAT)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
        {
            let name = name.replace('`', "``");
            self.query(
                format!("ALTER TABLE batchguard_events DROP CHECK `{name}`"),
                WHAT,
            )?;
        }
        Ok(())
    }

    /// One round trip: the statements of `sql` in one `COM_QUERY`. A deadlock (which
    /// InnoDB resolves by rolling one transaction back) is sent again, twice at most; any
    /// other failure rolls back what the packet left open. A missing table is named as an
    /// unmigrated store.
    fn query(&mut self, sql: String, what: &str) -> Result<Rows, StoreError> {
        let mut tries = 0;
        loop {
            match self.query_once(&sql) {
                Ok(rows) => return Ok(rows),
                Err(Some(e)) => {
                    let number = e
                        .as_database_error()
                        .and_then(|d| d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
                        .map(|m| m.number());
                    let _ = self.query_once("ROLLBACK");
                    if number.is_some_and(|n| DEADLOCKS.contains(&n)) && tries < 3 {
                        tries += 1;
                        continue;
                    }
                    let message = self.url.scrub(crate::db::driver_message(&e));
                    if crate::db::is_connection_error(&e) {
                        return Err(StoreError::unreachable(format!(
                            "{}: {what}: {message}",
                            self.shown
                        )));
                    }
                    // ER_SIGNAL_EXCEPTION from batchguard_claim: a refused claim.
                    if number == Some(1644)
                        && let Some(at) = message.find("batchguard: run ")
                    {
                        return Err(StoreError(
                            message[at..].to_owned(),
                            super::ErrorKind::ClaimRefused,
                        ));
                    }
                    // ER_SP_DOES_NOT_EXIST: a database migrated before claims.
                    if number == Some(1305) && message.contains("batchguard_claim") {
                        return Err(StoreError::not_migrated(format!(
                            "{}: the function batchguard_claim is missing: create it with `batchguard store migrate --store '{}'`",
                            self.shown, self.shown
                        )));
                    }
                    // ER_NO_SUCH_TABLE.
                    if number == Some(1146) {
                        return Err(super::not_migrated(
                            &self.url,
                            crate::db::missing_table(&message),
                        ));
                    }
                    return Err(StoreError::failed(format!(
                        "{}: {what}: {message}",
                        self.shown
                    )));
                }
                Err(None) => {
                    return Err(StoreError::unreachable(format!(
                        "{}: {what}: no answer within {} s",
                        self.shown,
                        QUERY_TIMEOUT.as_secs()
                    )));
                }
            }
        }
    }

    /// `Err(None)`: no answer in time.
    fn query_once(&mut self, sql: &str) -> Result<Rows, Option<sqlx::Error>> {
        let result = self.rt.block_on(async {
            let q = sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).fetch_all(&mut self.conn);
            tokio::time::timeout(QUERY_TIMEOUT, q).await
        });
        let rows = match result {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => return Err(Some(e)),
            Err(_) => return Err(None),
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut vals = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                let v: Option<String> = row.try_get_unchecked(i).map_err(Some)?;
                vals.push(v);
            }
            out.push(vals);
        }
        Ok(out)
    }

    /// Several packets (a finish with very many outputs): all but the last answer nothing.
    fn query_all(&mut self, stmts: Vec<String>, what: &str) -> Result<Rows, StoreError> {
        let mut rows = Vec::new();
        for p in packets(stmts) {
            rows = self.query(p, what)?;
        }
        Ok(rows)
    }

    /// Records the database's clock from the last column of an answer's last row.
    fn tick(&mut self, rows: &Rows) -> Option<Timestamp> {
        let t = parse_us(
            rows.last()
                .and_then(|r| r.last())
                .and_then(|v| v.as_deref()),
        )?;
        self.clock = Some((t, Instant::now()));
        Some(t)
    }

    /// Another process kept the run's lock (item 23) longer than a finish waits: nothing
    /// was written; the write is spooled and sent again.
    fn run_lock_not_granted(&self, what: &str, run_id: &str) -> StoreError {
        StoreError::failed(format!(
            "{}: {what}: another process has been writing the end of run {run_id} for too long (its lock was not granted)",
            self.shown
        ))
    }

    fn unexpected(&self, what: &str) -> StoreError {
        StoreError::failed(format!("{}: {what}: unexpected answer", self.shown))
    }

    /// `sql` (statements, no answer wanted) in one round trip, for the drill records.
    pub(super) fn execute(&mut self, sql: String, what: &str) -> Result<(), StoreError> {
        self.query(sql, what).map(|_| ())
    }
}

impl Store for MysqlStore {
    fn now(&mut self) -> Result<Timestamp, StoreError> {
        if let Some((t, at)) = self.clock {
            let d = jiff::SignedDuration::try_from(at.elapsed()).unwrap_or_default();
            return Ok(t.checked_add(d).unwrap_or(t));
        }
        let rows = self.query(
            format!("SELECT CAST({NOW_US} AS CHAR)"),
            "cannot read the clock",
        )?;
        self.tick(&rows)
            .ok_or_else(|| self.unexpected("cannot read the clock"))
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<AcquireResult, StoreError> {
        const WHAT: &str = "cannot acquire the lease";
        if req.key.chars().count() > MAX_KEY_CHARS {
            return Err(StoreError::refused(format!(
                "{}: the lock key is {} characters long; a MySQL store keeps keys of at most {MAX_KEY_CHARS}: shorten `lock.key`",
                self.shown,
                req.key.chars().count()
            )));
        }
        let rows = self.query(acquire_sql(req), WHAT)?;
        let now = self.tick(&rows).ok_or_else(|| self.unexpected(WHAT))?;
        // The unfinished slots' rows (marked `u`), then the summary row.
        let Some((r, slots)) = rows.split_last() else {
            return Err(self.unexpected(WHAT));
        };
        let get = |i: usize| r.get(i).cloned().flatten();
        if get(11).as_deref() == Some("0") {
            return Ok(AcquireResult::OutOfClock { now });
        }
        let behind = slots
            .iter()
            .filter(|u| u.len() == 5 && u[0].as_deref() == Some("u"))
            .filter_map(|u| {
                let at = u[1].as_deref().and_then(|t| t.parse().ok());
                let n = u[2].as_deref().and_then(|n| n.parse().ok());
                Some((at, n, u[3].clone()?, u[4].clone()?))
            });
        let behind = Unfinished::oldest_first(behind);
        if !behind.is_empty() {
            return Ok(AcquireResult::Behind {
                unfinished: behind,
                now,
            });
        }
        if get(12).is_some_and(|n| n != "0") {
            // The gate closed on slots behind that do not read back (a table edited by
            // hand): nothing was written; asked again without the catch-up, as a store
            // that cannot read them would.
            let mut again = req.clone();
            again.catch_up_from = None;
            return self.acquire(&again);
        }
        let get = |i: usize| r.get(i).cloned().flatten();
        let num = |i: usize| get(i).and_then(|s| s.parse::<i64>().ok());
        if get(0).as_deref() == Some("1") {
            let (Some(fence), Some(attempt)) = (num(2), num(3)) else {
                return Err(self.unexpected(WHAT));
            };
            return Ok(AcquireResult::Acquired(Acquired {
                fence,
                attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                at: now,
            }));
        }
        if get(1).as_deref() == Some("1") {
            let attempts = num(10).and_then(|a| u32::try_from(a).ok()).unwrap_or(0);
            return Ok(AcquireResult::Refused(Refusal::Exhausted { attempts }));
        }
        let refusal = match get(8).as_deref() {
            Some("succeeded") => Refusal::Succeeded {
                run_id: get(9).unwrap_or_default(),
            },
            Some("dead_lettered") if !req.manual => Refusal::DeadLettered,
            _ => Refusal::Held {
                holder: get(4).unwrap_or_default(),
                run_id: get(5).unwrap_or_default(),
                fence: num(6).unwrap_or(0),
                ends_in_secs: secs_until(get(7).as_deref(), now),
            },
        };
        Ok(AcquireResult::Refused(refusal))
    }

    fn finish(&mut self, fin: &Finish) -> Result<Finished, StoreError> {
        const WHAT: &str = "cannot write the end of the run";
        let rows = match self.query_all(finish_statements(fin), WHAT) {
            Ok(rows) => rows,
            Err(e) => {
                // The session must not keep the run's lock (a failure mid-packet).
                let _ = self.query_once(&release_run_lock(&fin.run_id));
                return Err(e);
            }
        };
        self.tick(&rows);
        let r = rows.last().ok_or_else(|| self.unexpected(WHAT))?;
        let get = |i: usize| r.get(i).cloned().flatten();
        if get(0).as_deref() != Some("1") {
            return Err(self.run_lock_not_granted(WHAT, &fin.run_id));
        }
        Ok(Finished::from_answer(
            get(1).as_deref() == Some("1"),
            get(2).as_deref() == Some("1"),
            get(3),
            get(4),
        ))
    }

    fn folds_checks(&self) -> bool {
        true
    }

    fn claim(
        &mut self,
        job: &str,
        key: &str,
        run_id: &str,
        fence: i64,
    ) -> Result<bool, StoreError> {
        const WHAT: &str = "cannot claim the output";
        let sql = format!(
            "SELECT CAST(batchguard_claim({}, {}, {}, {fence}) AS CHAR), CAST({NOW_US} AS CHAR)",
            lit(job),
            lit(key),
            lit(run_id),
        );
        let rows = match self.query(sql, WHAT) {
            Ok(rows) => rows,
            // The server's message is cut at 128 characters: the whole one here.
            Err(e) if e.kind() == super::ErrorKind::ClaimRefused => {
                return Err(StoreError::claim_refused(run_id, fence, key));
            }
            Err(e) => return Err(e),
        };
        self.tick(&rows);
        match rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .as_deref()
        {
            Some("1") => Ok(true),
            Some("0") => Ok(false),
            _ => Err(self.unexpected(WHAT)),
        }
    }

    fn claimed(&mut self, run_id: &str) -> Result<Vec<OutputRow>, StoreError> {
        let sql = format!(
            "SELECT output_key, at FROM batchguard_claims WHERE run_id = {} ORDER BY at, output_key",
            lit(run_id)
        );
        let rows = self.query(sql, "cannot read the claims")?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(OutputRow {
                    key: r.first()?.clone()?,
                    at: r.get(1)?.as_deref()?.parse().ok()?,
                })
            })
            .collect())
    }

    fn append(&mut self, ev: &EventRow) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO batchguard_events ({EVENT_COLUMNS}) VALUES ({})",
            event_values(ev)
        );
        self.query(sql, "cannot write an event").map(|_| ())
    }

    fn ingest_abandoned(&mut self, run: &Abandoned, keys: &[OutputRow]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let (j, s, r) = (lit(&run.job), ts(run.scheduled_at), lit(&run.run_id));
        let mut stmts = vec![
            "START TRANSACTION".to_owned(),
            format!(
                "SELECT EXISTS (SELECT 1 FROM batchguard_outputs o WHERE o.run_id = {r} AND NOT EXISTS \
                 (SELECT 1 FROM batchguard_claims c WHERE c.job = o.job \
                  AND c.key_digest = UNHEX(SHA2(o.output_key, 256)) AND c.run_id = o.run_id)) INTO @bg_done"
            ),
        ];
        let when = format!("NOT @bg_done AND {}", sql::unclaimed(&j, &r));
        stmts.extend(outputs_inserts(&j, &s, &r, keys, &when));
        stmts.push("COMMIT".to_owned());
        stmts.push("SELECT CAST(@bg_done AS CHAR)".to_owned());
        let rows = self.query_all(stmts, "cannot write the outputs of an abandoned run")?;
        let done = rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .as_deref()
            == Some("1");
        Ok(if done { 0 } else { keys.len() as u64 })
    }

    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        // The clock rides along (last column), so the slot needs no round trip of its own.
        let sql = format!(
            "SELECT s.run_id, s.job, s.scheduled_at, CAST({NOW_US} AS CHAR) FROM batchguard_events s
WHERE s.event = 'start'
  AND NOT EXISTS (SELECT 1 FROM batchguard_events e WHERE e.run_id = s.run_id AND e.event = 'end')
  AND NOT EXISTS (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > {NOW_US})
UNION ALL SELECT NULL, NULL, NULL, CAST({NOW_US} AS CHAR)"
        );
        let rows = self.query(sql, "cannot read the runs")?;
        self.tick(&rows);
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Abandoned {
                    run_id: r.first()?.clone()?,
                    job: r.get(1)?.clone()?,
                    scheduled_at: r.get(2)?.as_deref()?.parse().ok()?,
                })
            })
            .collect())
    }

    fn live(&mut self, run_id: &str) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT CAST(EXISTS (SELECT 1 FROM batchguard_leases WHERE run_id = {} AND state = 'held' AND lease_until > {NOW_US}) AS CHAR), CAST({NOW_US} AS CHAR)",
            lit(run_id)
        );
        let rows = self.query(sql, "cannot read the leases")?;
        self.tick(&rows);
        Ok(rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .is_some_and(|v| v == "1"))
    }

    fn as_ledger(&mut self) -> &mut dyn Ledger {
        self
    }

    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let filter = job.map_or_else(String::new, |j| format!(" AND job = {}", lit(j)));
        let sql = format!(
            "SELECT `key`, job, scheduled_at, holder, run_id, CAST(fence AS CHAR), CAST(lease_until AS CHAR), CAST({NOW_US} AS CHAR)
FROM batchguard_leases WHERE state = 'held' AND lease_until > {NOW_US}{filter} ORDER BY `key`"
        );
        let rows = self.query(sql, "cannot read the leases")?;
        let now = self.tick(&rows).unwrap_or_else(Timestamp::now);
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(LeaseRow {
                    key: r[0].clone()?,
                    job: r[1].clone()?,
                    scheduled_at: super::rfc3339(r[2].as_deref()?.parse().ok()?),
                    holder: r[3].clone()?,
                    run_id: r[4].clone()?,
                    fence: r[5].as_deref()?.parse().ok()?,
                    secs_left: secs_until(r[6].as_deref(), now),
                })
            })
            .collect())
    }

    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        const WHAT: &str = "cannot read the leases";
        // Every row carries the clock, and a row of its own (keyless, so it is no lease)
        // gives it when the table is empty: which row comes last does not matter.
        let sql = format!(
            "SELECT `key`, job, scheduled_at, holder, run_id, CAST(fence AS CHAR), CAST(acquired_at AS CHAR),
  CAST(lease_until AS CHAR), CAST({NOW_US} AS CHAR) FROM batchguard_leases WHERE state = 'held'
UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, CAST({NOW_US} AS CHAR)"
        );
        let rows = self.query(sql, WHAT)?;
        let now = self.tick(&rows).ok_or_else(|| self.unexpected(WHAT))?;
        let mut leases: Vec<HeldLease> = rows
            .iter()
            .filter_map(|r| {
                Some(HeldLease {
                    key: r[0].clone()?,
                    job: r[1].clone()?,
                    scheduled_at: r[2].as_deref()?.parse().ok()?,
                    holder: r[3].clone()?,
                    run_id: r[4].clone()?,
                    fence: r[5].as_deref()?.parse().ok()?,
                    acquired_at: parse_us(r[6].as_deref())?,
                    lease_until: parse_us(r[7].as_deref())?,
                })
            })
            .collect();
        leases.sort_by(|a, b| a.key.cmp(&b.key));
        Ok((leases, now))
    }

    fn unfinished(
        &mut self,
        job: &str,
        from: Timestamp,
    ) -> Result<(Vec<Unfinished>, Timestamp), StoreError> {
        const WHAT: &str = "cannot read the unfinished slots";
        // The last row carries the clock alone, so an empty answer still has it.
        let sql = format!(
            "(SELECT {UNFINISHED_COLUMNS}, NULL {})
UNION ALL SELECT NULL, NULL, NULL, NULL, CAST({NOW_US} AS CHAR)",
            unfinished_from(&lit(job), &ts(from), None, NOW_US),
        );
        let rows = self.query(sql, WHAT)?;
        let now = self.tick(&rows).ok_or_else(|| self.unexpected(WHAT))?;
        // The last row is the clock's alone (no state): not a slot.
        let rows = rows.iter().filter_map(|r| {
            let at = r[0].as_deref().and_then(|t| t.parse().ok());
            let n = r[1].as_deref().and_then(|n| n.parse().ok());
            Some((at, n, r[2].clone()?, r[3].clone()?))
        });
        Ok((Unfinished::oldest_first(rows), now))
    }

    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError> {
        let filter = job.map_or_else(String::new, |j| format!(" WHERE s.job = {}", lit(j)));
        // Window functions need MySQL 8 / MariaDB 10.2; a correlated count works everywhere.
        let sql = format!(
            "SELECT s.job, s.scheduled_at, CAST(s.attempts AS CHAR), s.state, s.run_id FROM batchguard_slots s{filter}
{} (SELECT COUNT(*) FROM batchguard_slots t WHERE t.job = s.job AND t.scheduled_at > s.scheduled_at) < {per_job}
ORDER BY s.job, s.scheduled_at DESC",
            if filter.is_empty() { "WHERE" } else { "AND" }
        );
        let rows = self.query(sql, "cannot read the slots")?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(SlotRow {
                    job: r[0].clone()?,
                    scheduled_at: super::rfc3339(r[1].as_deref()?.parse().ok()?),
                    attempts: r[2].as_deref()?.parse().ok()?,
                    state: r[3].clone()?,
                    run_id: r[4].clone()?,
                })
            })
            .collect())
    }
}

impl Ledger for MysqlStore {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        const WHAT: &str = "cannot write to the ledger";
        let once = batch.has_end();
        let stmts = batch_statements(
            &batch.job,
            batch.scheduled_at,
            &batch.run_id,
            &batch.events,
            &batch.outputs,
            once,
        );
        let rows = match self.query_all(stmts, WHAT) {
            Ok(rows) => rows,
            Err(e) => {
                if once {
                    let _ = self.query_once(&release_run_lock(&batch.run_id));
                }
                return Err(e);
            }
        };
        self.tick(&rows);
        let granted = rows.last().and_then(|r| r.first().cloned().flatten());
        if granted.as_deref() != Some("1") {
            return Err(self.run_lock_not_granted(WHAT, &batch.run_id));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ddl_splits_into_statements() {
        let n: usize = DDL.iter().map(|d| ddl_statements(d).len()).sum();
        assert_eq!(n, 7, "{:#?}", DDL.map(ddl_statements));
        assert!(ddl_statements(DDL[1]).iter().all(|s| !s.ends_with(';')));
    }
}
