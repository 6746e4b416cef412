//! The PostgreSQL store (`postgres://…`): several hosts share one database.
//!
//! Round trips are the budget (SPEC 10): the acquire is one, a whole successful run at most
//! three after connecting. So every operation is ONE statement sent with the simple query
//! protocol (one `Query` message, one `ReadyForQuery` back): the extended protocol sqlx
//! uses for bound parameters costs a second round trip per new statement (Parse/Describe,
//! then Bind/Execute), and every `run` is a new process with a cold statement cache. Values
//! are therefore written into the SQL as literals by [`lit`] (escape-string syntax, which
//! does not depend on `standard_conforming_strings`), and every result column is text.
//!
//! Times that decide a lease are the database's `now()`. Every answer also carries the
//! database's clock; [`Store::now`] extends the last one by the monotonic time elapsed
//! since, so the slot and the `end` time are in database time without a round trip of
//! their own. Only a `now()` before any statement costs one.
//!
//! `run` does not create the tables: a missing table is refused with a message naming
//! `batchguard store migrate` (DDL on a shared database is the operator's decision).

use super::ledger::{Batch, Ledger};
use super::url::Conn;
use super::{
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, Finished, HeldLease,
    LeaseRow, OutputRow, Refusal, SlotRow, Store, StoreError, StoreUrl, Unfinished, rfc3339,
};
use jiff::Timestamp;
use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, ConnectOptions, Row};
use std::time::{Duration, Instant};

mod sql;
pub use sql::lit;
use sql::{
    EVENT_COLUMNS, acquire_sql, batch_sql, event_values, finish_sql, outputs_insert, ts, us,
};

/// The DDL `store migrate` runs: the ledger tables and the store's own.
pub const DDL: [&str; 2] = [
    include_str!("../../schemas/ledger.postgres.sql"),
    include_str!("../../schemas/store.postgres.sql"),
];

/// Serialises concurrent `store migrate`s (`CREATE … IF NOT EXISTS` alone can race).
const MIGRATE_LOCK: i64 = 0x6267_5f6d_6967;

/// How long one statement may take before the store counts as unreachable.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct PgStore {
    rt: tokio::runtime::Runtime,
    conn: PgConnection,
    url: StoreUrl,
    shown: String,
    /// The database's clock at the last answer, and when (monotonic) it arrived.
    clock: Option<(Timestamp, Instant)>,
}

fn parse_us(v: &Option<String>) -> Option<Timestamp> {
    v.as_deref()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|u| Timestamp::from_microsecond(u).ok())
}

fn secs_until(until_us: Option<&str>, now: Timestamp) -> i64 {
    let until = until_us.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    ((until - now.as_microsecond()).max(0) + 999_999) / 1_000_000
}

type Rows = Vec<Vec<Option<String>>>;

impl PgStore {
    pub fn open(url: &StoreUrl) -> Result<PgStore, StoreError> {
        Self::open_with(url, false)
    }

    /// `migrate`: create the tables (idempotent) before anything else.
    pub fn open_with(url: &StoreUrl, migrate: bool) -> Result<PgStore, StoreError> {
        let shown = url.shown().to_owned();
        let rt = crate::db::runtime().map_err(StoreError::failed)?;
        let Conn::Postgres(options) = url.conn() else {
            return Err(StoreError::bad_url(format!(
                "{shown}: not a PostgreSQL URL"
            )));
        };
        let options = options.as_ref().clone().disable_statement_logging();
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
        let mut st = PgStore {
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

    /// Creates the tables (idempotent), serialised with other migrates.
    pub fn migrate(&mut self) -> Result<(), StoreError> {
        let sql = format!(
            "BEGIN; SELECT pg_advisory_xact_lock({MIGRATE_LOCK})::text; {} {} COMMIT",
            DDL[0], DDL[1]
        );
        self.query(sql, "cannot create the tables").map(|_| ())
    }

    /// The batchguard tables this database has (`store migrate` says which it created).
    pub fn tables(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relname LIKE 'batchguard\\_%' \
             AND (c.relkind IN ('r', 'p') OR c.relname = 'batchguard_fence') ORDER BY 1"
                .into(),
            "cannot list the tables",
        )?;
        Ok(super::repair::first_column(rows))
    }

    /// The highest fence per job in the ledger tables.
    pub fn max_fences(&mut self) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
        let rows = self.query(
            "SELECT job, max(fence)::text FROM batchguard_events WHERE fence IS NOT NULL GROUP BY job".into(),
            "cannot read the fences",
        )?;
        Ok(super::repair::fences_of_rows(rows))
    }

    /// Moves the fencing sequence past `fence` (never back); answers its next value.
    pub fn raise_fence(&mut self, fence: i64) -> Result<i64, StoreError> {
        let rows = self.query(
            format!(
                "SELECT setval('batchguard_fence', GREATEST({fence}, \
                 (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM batchguard_fence)), true)::text"
            ),
            "cannot move the fencing counter",
        )?;
        rows.first()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|v| v.parse::<i64>().ok())
            .map(|v| v + 1)
            .ok_or_else(|| self.unexpected("cannot move the fencing counter"))
    }

    /// One round trip: the statements of `sql` in one `Query` message.
    fn query(&mut self, sql: String, what: &str) -> Result<Rows, StoreError> {
        let result = self.rt.block_on(async {
            let q = sqlx::raw_sql(AssertSqlSafe(sql)).fetch_all(&mut self.conn);
            tokio::time::timeout(QUERY_TIMEOUT, q).await
        });
        let rows = match result {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => return Err(self.error(what, &e)),
            Err(_) => {
                return Err(StoreError::unreachable(format!(
                    "{}: {what}: no answer within {} s",
                    self.shown,
                    QUERY_TIMEOUT.as_secs()
                )));
            }
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut vals = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                let v: Option<String> = row.try_get(i).map_err(|e| {
                    StoreError::failed(format!("{}: {what}: unexpected answer: {e}", self.shown))
                })?;
                vals.push(v);
            }
            out.push(vals);
        }
        Ok(out)
    }

    /// A driver error as a store error: a lost connection is unreachable, a missing table
    /// is an unmigrated store (named, with the command that creates it), anything else the
    /// server's own words.
    fn error(&self, what: &str, e: &sqlx::Error) -> StoreError {
        let message = self.url.scrub(crate::db::driver_message(e));
        if crate::db::is_connection_error(e) {
            return StoreError::unreachable(format!("{}: {what}: {message}", self.shown));
        }
        let undefined = e
            .as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|c| c == "42P01");
        if undefined {
            return super::not_migrated(&self.url, crate::db::missing_table(&message));
        }
        let code = e.as_database_error().and_then(|d| d.code());
        if code.as_deref() == Some("P0001")
            && let Some(at) = message.find("batchguard: run ")
        {
            return StoreError(message[at..].to_owned(), super::ErrorKind::ClaimRefused);
        }
        if code.as_deref() == Some("42883") && message.contains("batchguard_claim") {
            return StoreError::not_migrated(format!(
                "{}: the function batchguard_claim is missing: create it with `batchguard store migrate --store '{}'`",
                self.shown, self.shown
            ));
        }
        StoreError::failed(format!("{}: {what}: {message}", self.shown))
    }

    /// Records the database's clock from the last column of an answer's last row.
    fn tick(&mut self, rows: &Rows) -> Option<Timestamp> {
        let t = rows.last().and_then(|r| r.last()).and_then(parse_us)?;
        self.clock = Some((t, Instant::now()));
        Some(t)
    }

    fn unexpected(&self, what: &str) -> StoreError {
        StoreError::failed(format!("{}: {what}: unexpected answer", self.shown))
    }
}

impl Store for PgStore {
    fn now(&mut self) -> Result<Timestamp, StoreError> {
        if let Some((t, at)) = self.clock {
            let d = jiff::SignedDuration::try_from(at.elapsed()).unwrap_or_default();
            return Ok(t.checked_add(d).unwrap_or(t));
        }
        let rows = self.query(format!("SELECT {}", us("now()")), "cannot read the clock")?;
        self.tick(&rows)
            .ok_or_else(|| self.unexpected("cannot read the clock"))
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<AcquireResult, StoreError> {
        const WHAT: &str = "cannot acquire the lease";
        let rows = self.query(acquire_sql(req), WHAT)?;
        let now = self.tick(&rows).ok_or_else(|| self.unexpected(WHAT))?;
        // The first statement's rows: its summary, then one row per unfinished slot (marked
        // `u`); the second statement's one row (the fence) has two columns.
        let marked =
            |r: &&Vec<Option<String>>| r.first().cloned().flatten().as_deref() == Some("u");
        let (Some(r), Some(granted)) = (
            rows.iter().find(|r| r.len() > 2 && !marked(r)),
            rows.iter().find(|r| r.len() == 2),
        ) else {
            return Err(self.unexpected(WHAT));
        };
        if r.get(10).cloned().flatten().as_deref() == Some("false") {
            return Ok(AcquireResult::OutOfClock { now });
        }
        let behind =
            Unfinished::oldest_first(rows.iter().filter(|r| r.len() > 2 && marked(r)).filter_map(
                |u| {
                    let n = u[2].as_deref().and_then(|n| n.parse().ok());
                    Some((parse_us(&u[1]), n, u[3].clone()?, u[4].clone()?))
                },
            ));
        if !behind.is_empty() {
            return Ok(AcquireResult::Behind {
                unfinished: behind,
                now,
            });
        }
        let get = |i: usize| r.get(i).cloned().flatten();
        let won = get(0).as_deref() == Some("true");
        let lease_state = get(4);
        if won {
            if lease_state.as_deref() == Some("dead_lettered") {
                let attempts = get(9).and_then(|s| s.parse().ok()).unwrap_or(0);
                return Ok(AcquireResult::Refused(Refusal::Exhausted { attempts }));
            }
            let fence = granted
                .first()
                .cloned()
                .flatten()
                .and_then(|s| s.parse().ok());
            let attempt = get(6).and_then(|s| s.parse().ok());
            let (Some(fence), Some(attempt)) = (fence, attempt) else {
                return Err(self.unexpected(WHAT));
            };
            return Ok(AcquireResult::Acquired(Acquired {
                fence,
                attempt,
                at: now,
            }));
        }
        let refusal = match (lease_state.as_deref(), get(7).as_deref()) {
            // The lease row says this slot settled while the statement waited for it.
            (Some("succeeded"), _) => Refusal::Succeeded {
                run_id: get(2).unwrap_or_default(),
            },
            (Some("dead_lettered"), _) => Refusal::DeadLettered,
            (Some(_), _) => Refusal::Held {
                holder: get(1).unwrap_or_default(),
                run_id: get(2).unwrap_or_default(),
                fence: get(3).and_then(|s| s.parse().ok()).unwrap_or(0),
                ends_in_secs: secs_until(get(5).as_deref(), now),
            },
            (None, Some("succeeded")) => Refusal::Succeeded {
                run_id: get(8).unwrap_or_default(),
            },
            (None, _) => Refusal::DeadLettered,
        };
        Ok(AcquireResult::Refused(refusal))
    }

    fn finish(&mut self, fin: &Finish) -> Result<Finished, StoreError> {
        const WHAT: &str = "cannot write the end of the run";
        let rows = self.query(finish_sql(fin), WHAT)?;
        self.tick(&rows);
        let r = rows.last().ok_or_else(|| self.unexpected(WHAT))?;
        let get = |i: usize| r.get(i).cloned().flatten();
        Ok(Finished::from_answer(
            get(0).as_deref() == Some("true"),
            get(1).as_deref() == Some("true"),
            get(2).filter(|n| *n != fin.run_id),
            get(3),
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
            "SELECT batchguard_claim({}, {}, {}, {fence})::text, {}",
            lit(job),
            lit(key),
            lit(run_id),
            us("now()")
        );
        let rows = self.query(sql, WHAT)?;
        self.tick(&rows);
        match rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .as_deref()
        {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            _ => Err(self.unexpected(WHAT)),
        }
    }

    fn claimed(&mut self, run_id: &str) -> Result<Vec<OutputRow>, StoreError> {
        let sql = format!(
            "SELECT output_key, {} FROM batchguard_claims WHERE run_id = {} ORDER BY at, output_key",
            us("at"),
            lit(run_id)
        );
        let rows = self.query(sql, "cannot read the claims")?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(OutputRow {
                    key: r.first()?.clone()?,
                    at: parse_us(r.get(1)?)?,
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
        // Two runs catching up at once may both find the same abandoned run: the run's
        // advisory lock (held to the end of this implicit transaction) makes the second
        // wait, and its insert, a statement of its own, then sees the first one's rows.
        let sql = format!(
            "SELECT count(*)::text FROM (SELECT pg_advisory_xact_lock(hashtextextended({r}, 0))) l;
WITH done AS (
  SELECT EXISTS (SELECT 1 FROM batchguard_outputs o WHERE o.run_id = {r} AND NOT EXISTS
    (SELECT 1 FROM batchguard_claims c WHERE c.job = o.job AND c.output_key = o.output_key AND c.run_id = o.run_id)) AS d
), outs AS ({} RETURNING 1)
SELECT count(*)::text FROM outs",
            outputs_insert(&j, &s, &r, keys, true)
        );
        let rows = self.query(sql, "cannot write the outputs of an abandoned run")?;
        Ok(rows
            .last()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        // The clock rides along (last column), so the slot needs no round trip of its own.
        let sql = format!(
            "SELECT s.run_id, s.job, {sched}, {now} FROM batchguard_events s
WHERE s.event = 'start'
  AND NOT EXISTS (SELECT 1 FROM batchguard_events e WHERE e.run_id = s.run_id AND e.event = 'end')
  AND NOT EXISTS (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > now())
UNION ALL SELECT NULL, NULL, NULL, {now}",
            sched = us("s.scheduled_at"),
            now = us("now()"),
        );
        let rows = self.query(sql, "cannot read the runs")?;
        self.tick(&rows);
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Abandoned {
                    run_id: r.first()?.clone()?,
                    job: r.get(1)?.clone()?,
                    scheduled_at: parse_us(r.get(2)?)?,
                })
            })
            .collect())
    }

    fn live(&mut self, run_id: &str) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM batchguard_leases WHERE run_id = {} AND state = 'held' AND lease_until > now())::text, {}",
            lit(run_id),
            us("now()")
        );
        let rows = self.query(sql, "cannot read the leases")?;
        self.tick(&rows);
        Ok(rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .is_some_and(|v| v == "true"))
    }

    fn as_ledger(&mut self) -> &mut dyn Ledger {
        self
    }

    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let filter = job.map_or_else(String::new, |j| format!(" AND job = {}", lit(j)));
        let sql = format!(
            "SELECT key, job, {}, holder, run_id, fence::text, {}, {} FROM batchguard_leases
WHERE state = 'held' AND lease_until > now(){filter} ORDER BY key",
            us("scheduled_at"),
            us("lease_until"),
            us("now()"),
        );
        let rows = self.query(sql, "cannot read the leases")?;
        let now = self.tick(&rows).unwrap_or_else(Timestamp::now);
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(LeaseRow {
                    key: r[0].clone()?,
                    job: r[1].clone()?,
                    scheduled_at: rfc3339(parse_us(&r[2])?),
                    holder: r[3].clone()?,
                    run_id: r[4].clone()?,
                    fence: r[5].as_deref()?.parse().ok()?,
                    secs_left: secs_until(r[6].as_deref(), now),
                })
            })
            .collect())
    }

    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        // Every row carries the clock, and a row of its own (keyless, so it is no lease)
        // gives it when the table is empty: which row comes last does not matter.
        let sql = format!(
            "SELECT key, job, {}, holder, run_id, fence::text, {}, {}, {} FROM batchguard_leases
WHERE state = 'held'
UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, {}",
            us("scheduled_at"),
            us("acquired_at"),
            us("lease_until"),
            us("now()"),
            us("now()"),
        );
        let rows = self.query(sql, "cannot read the leases")?;
        let now = self
            .tick(&rows)
            .ok_or_else(|| self.unexpected("cannot read the leases"))?;
        let mut leases: Vec<HeldLease> = rows
            .iter()
            .filter_map(|r| {
                Some(HeldLease {
                    key: r[0].clone()?,
                    job: r[1].clone()?,
                    scheduled_at: parse_us(&r[2])?,
                    holder: r[3].clone()?,
                    run_id: r[4].clone()?,
                    fence: r[5].as_deref()?.parse().ok()?,
                    acquired_at: parse_us(&r[6])?,
                    lease_until: parse_us(&r[7])?,
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
            "SELECT {}, attempts::text, CASE WHEN state = 'running' THEN 'lost' ELSE state END, run_id, NULL::text
FROM batchguard_slots s WHERE job = {} AND scheduled_at >= {}
  AND (state IN ('failed', 'interrupted') OR (state = 'running' AND NOT EXISTS
    (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > now())))
UNION ALL SELECT NULL, NULL, NULL, NULL, {}",
            us("scheduled_at"),
            lit(job),
            ts(from),
            us("now()"),
        );
        let rows = self.query(sql, WHAT)?;
        let now = self.tick(&rows).ok_or_else(|| self.unexpected(WHAT))?;
        // The last row is the clock's alone (no state): not a slot.
        let rows = rows.iter().filter_map(|r| {
            let n = r[1].as_deref().and_then(|n| n.parse().ok());
            Some((parse_us(&r[0]), n, r[2].clone()?, r[3].clone()?))
        });
        Ok((Unfinished::oldest_first(rows), now))
    }

    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError> {
        let filter = job.map_or_else(String::new, |j| format!(" WHERE job = {}", lit(j)));
        let sql = format!(
            "SELECT job, {}, attempts::text, state, run_id FROM (
  SELECT *, row_number() OVER (PARTITION BY job ORDER BY scheduled_at DESC) AS n
  FROM batchguard_slots{filter}) x
WHERE n <= {per_job} ORDER BY job, scheduled_at DESC",
            us("scheduled_at"),
        );
        let rows = self.query(sql, "cannot read the slots")?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(SlotRow {
                    job: r[0].clone()?,
                    scheduled_at: rfc3339(parse_us(&r[1])?),
                    attempts: r[2].as_deref()?.parse().ok()?,
                    state: r[3].clone()?,
                    run_id: r[4].clone()?,
                })
            })
            .collect())
    }
}

impl Ledger for PgStore {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let rows = self.query(batch_sql(batch), "cannot write to the ledger")?;
        self.tick(&rows);
        Ok(())
    }
}
