//! The SQLite store (`sqlite:PATH`): one host, several processes. WAL and a busy timeout
//! let the processes share the file; every write is an immediate transaction, so the
//! acquire's check and its upsert see one state. The clock is the host's (SPEC 7.1 item 2).

use super::ledger::{Batch, Ledger};
use super::{
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, HeldLease, LeaseRow,
    OutputRow, Refusal, SlotRow, SlotState, Store, StoreError, Unfinished, micros, rfc3339,
};
use jiff::Timestamp;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, Row};
use std::path::Path;
use std::time::Duration;

/// The DDL: the ledger tables and the store's own.
pub const DDL: [&str; 2] = [
    include_str!("../../schemas/ledger.sqlite.sql"),
    include_str!("../../schemas/store.sqlite.sql"),
];

/// Bumped when the DDL changes; `PRAGMA user_version` says which a file has. 2: the
/// `trigger` check admits `catch_up`.
const SCHEMA_VERSION: i64 = 2;

/// A version 1 events table has a `trigger` check without `catch_up`, and SQLite cannot
/// alter a check: the table is copied into one made by the current DDL, in the migration's
/// transaction (its indexes come back with the DDL that follows).
const WIDEN_TRIGGER: &str = "\
ALTER TABLE batchguard_events RENAME TO batchguard_events_v1;
DROP INDEX IF EXISTS batchguard_events_slot;
DROP INDEX IF EXISTS batchguard_events_run;";

/// Long enough for 50 contenders on one slot to queue, short enough to fail a stuck file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the store reads the time: the host's clock, or a test's.
pub type Clock = Box<dyn Fn() -> Timestamp + Send>;

pub struct SqliteStore {
    rt: tokio::runtime::Runtime,
    conn: SqliteConnection,
    shown: String,
    clock: Clock,
}

const ACQUIRE_LEASE: &str = "\
INSERT INTO batchguard_leases (key, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until, state)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'held'
WHERE NOT EXISTS (SELECT 1 FROM batchguard_slots s WHERE s.job = ?2 AND s.scheduled_at = ?3
                  AND (s.state = 'succeeded' OR (s.state = 'dead_lettered' AND NOT ?9)))
ON CONFLICT (key) DO UPDATE SET
    job = excluded.job, scheduled_at = excluded.scheduled_at, holder = excluded.holder,
    run_id = excluded.run_id, fence = excluded.fence, acquired_at = excluded.acquired_at,
    lease_until = excluded.lease_until, state = 'held'
WHERE batchguard_leases.lease_until <= excluded.acquired_at OR batchguard_leases.state = 'released'
RETURNING fence";

const INSERT_EVENT: &str = "\
INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, attempt, status,
    error_code, snapshot_digest, \"trigger\", fence, detail)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, false)
    }

    /// `migrate`: runs the (idempotent) DDL even when the file says it is current, so
    /// a dropped table comes back.
    pub fn open_with(path: &Path, migrate: bool) -> Result<SqliteStore, StoreError> {
        let (rt, mut conn, shown) = connect(path)?;
        let fail = |what: &str, e: sqlx::Error| StoreError::failed(format!("{shown}: {what}: {e}"));
        rt.block_on(async {
            let version: i64 = sqlx::query_scalar("PRAGMA user_version")
                .fetch_one(&mut conn)
                .await
                .map_err(|e| fail("cannot read the schema version", e))?;
            if migrate || version < SCHEMA_VERSION {
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .map_err(|e| fail("cannot lock the file", e))?;
                let old: Option<String> = sqlx::query_scalar(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'batchguard_events'",
                )
                .fetch_optional(&mut conn)
                .await
                .map_err(|e| fail("cannot read the schema", e))?;
                let widen = old.is_some_and(|sql| !sql.contains("catch_up"));
                if widen {
                    sqlx::raw_sql(WIDEN_TRIGGER)
                        .execute(&mut conn)
                        .await
                        .map_err(|e| fail("cannot upgrade the tables", e))?;
                }
                for ddl in DDL {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
                        .execute(&mut conn)
                        .await
                        .map_err(|e| fail("cannot create the tables", e))?;
                }
                if widen {
                    sqlx::raw_sql(
                        "INSERT INTO batchguard_events (rowid, run_id, job, scheduled_at, event, at, \
                           instance, attempt, status, error_code, snapshot_digest, \"trigger\", fence, detail) \
                         SELECT rowid, run_id, job, scheduled_at, event, at, instance, attempt, status, \
                           error_code, snapshot_digest, \"trigger\", fence, detail FROM batchguard_events_v1; \
                         DROP TABLE batchguard_events_v1",
                    )
                    .execute(&mut conn)
                    .await
                    .map_err(|e| fail("cannot upgrade the tables", e))?;
                }
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "PRAGMA user_version = {SCHEMA_VERSION}; COMMIT"
                )))
                .execute(&mut conn)
                .await
                .map_err(|e| fail("cannot create the tables", e))?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(SqliteStore {
            rt,
            conn,
            shown,
            clock: Box::new(Timestamp::now),
        })
    }

    /// A ledger apart from the store: the file gets the ledger tables only (idempotent
    /// DDL, so a file that is also a store keeps its own tables).
    pub fn open_ledger(path: &Path) -> Result<SqliteStore, StoreError> {
        let (rt, mut conn, shown) = connect(path)?;
        rt.block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(DDL[0])).execute(&mut conn))
            .map_err(|e| {
                StoreError::failed(format!("{shown}: cannot create the ledger tables: {e}"))
            })?;
        Ok(SqliteStore {
            rt,
            conn,
            shown,
            clock: Box::new(Timestamp::now),
        })
    }

    /// Replaces the host's clock (a model test drives leases through time with it).
    pub fn with_clock(mut self, clock: Clock) -> SqliteStore {
        self.clock = clock;
        self
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> StoreError {
        StoreError::failed(format!("{}: {what}: {e}", self.shown))
    }

    /// The batchguard tables a file has, without creating any (`store migrate` says which
    /// it created); a file that does not exist has none.
    pub fn tables_of(path: &Path) -> Result<Vec<String>, StoreError> {
        if !path.exists() {
            return Ok(Vec::new());
        }
        let (rt, mut conn, shown) = connect(path)?;
        rt.block_on(
            sqlx::query_scalar(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'batchguard\\_%' ESCAPE '\\' ORDER BY 1",
            )
            .fetch_all(&mut conn),
        )
        .map_err(|e| StoreError::failed(format!("{shown}: cannot list the tables: {e}")))
    }

    /// The highest fence per job in a file's ledger table (a file that does not exist
    /// has none).
    pub fn max_fences_of(
        path: &Path,
    ) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
        if !path.exists() {
            return Err(StoreError::failed(format!(
                "sqlite:{}: no such file",
                path.display()
            )));
        }
        let (rt, mut conn, shown) = connect(path)?;
        let rows: Vec<(String, i64)> = rt
            .block_on(
                sqlx::query_as(
                    "SELECT job, max(fence) FROM batchguard_events WHERE fence IS NOT NULL GROUP BY job",
                )
                .fetch_all(&mut conn),
            )
            .map_err(|e| StoreError::failed(format!("{shown}: cannot read the fences: {e}")))?;
        Ok(rows.into_iter().collect())
    }

    /// Moves the fencing counter past `fence` (never back); answers its next value.
    pub fn raise_fence(&mut self, fence: i64) -> Result<i64, StoreError> {
        let r = self.rt.block_on(
            sqlx::query_scalar(
                "UPDATE batchguard_fence SET value = max(value, ?1) WHERE id = 1 RETURNING value + 1",
            )
            .bind(fence)
            .fetch_one(&mut self.conn),
        );
        r.map_err(|e| self.fail("cannot move the fencing counter", e))
    }
}

async fn insert_event(conn: &mut SqliteConnection, ev: &EventRow) -> Result<(), sqlx::Error> {
    sqlx::query(INSERT_EVENT)
        .bind(&ev.run_id)
        .bind(&ev.job)
        .bind(rfc3339(ev.scheduled_at))
        .bind(&ev.event)
        .bind(rfc3339(ev.at))
        .bind(&ev.instance)
        .bind(ev.attempt.map(i64::from))
        .bind(&ev.status)
        .bind(&ev.error_code)
        .bind(&ev.snapshot_digest)
        .bind(&ev.trigger)
        .bind(ev.fence)
        .bind(ev.detail.as_deref().map(super::clip_detail))
        .execute(conn)
        .await
        .map(|_| ())
}

async fn insert_outputs(
    conn: &mut SqliteConnection,
    job: &str,
    scheduled_at: &str,
    run_id: &str,
    outputs: &[OutputRow],
) -> Result<(), sqlx::Error> {
    if outputs.is_empty() {
        return Ok(());
    }
    // One statement for every key: a row at a time, each its own trip to sqlx's SQLite
    // thread, cost the drill's 10,000-key runs about 0.2 s apiece. The keys and times go in
    // as one JSON array, inserted in its order (`json_each`'s `key` is the index).
    let rows: Vec<(&str, String)> = outputs
        .iter()
        .map(|o| (o.key.as_str(), rfc3339(o.at)))
        .collect();
    let rows = serde_json::to_string(&rows).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(
        "INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at) \
         SELECT ?1, ?2, ?3, value ->> 0, value ->> 1 FROM json_each(?4) ORDER BY key",
    )
    .bind(job)
    .bind(scheduled_at)
    .bind(run_id)
    .bind(rows)
    .execute(&mut *conn)
    .await
    .map(|_| ())
}

async fn end_written(c: &mut SqliteConnection, run_id: &str) -> Result<bool, sqlx::Error> {
    let done: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM batchguard_events WHERE run_id = ?1 AND event = 'end' LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(&mut *c)
    .await?;
    Ok(done.is_some())
}

/// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back on any error.
async fn immediate<T>(
    conn: &mut SqliteConnection,
    body: impl AsyncFnOnce(&mut SqliteConnection) -> Result<(T, bool), sqlx::Error>,
) -> Result<T, sqlx::Error> {
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    match body(&mut *conn).await {
        Ok((v, commit)) => {
            let end = if commit { "COMMIT" } else { "ROLLBACK" };
            sqlx::raw_sql(end).execute(&mut *conn).await?;
            Ok(v)
        }
        Err(e) => {
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
            Err(e)
        }
    }
}

impl Store for SqliteStore {
    fn now(&mut self) -> Result<Timestamp, StoreError> {
        Ok((self.clock)())
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<AcquireResult, StoreError> {
        let slot = rfc3339(req.scheduled_at);
        let ttl_us = i64::try_from(req.ttl_secs)
            .unwrap_or(i64::MAX / 2_000_000)
            .saturating_mul(1_000_000);
        let clock = &self.clock;
        let result = self.rt.block_on(immediate(&mut self.conn, async |c| {
            let now = clock();
            let now_us = micros(now);
            let prior: Option<(i64, String, String)> = sqlx::query_as(
                "SELECT attempts, state, run_id FROM batchguard_slots WHERE job = ?1 AND scheduled_at = ?2",
            )
            .bind(&req.job)
            .bind(&slot)
            .fetch_optional(&mut *c)
            .await?;
            let attempts_so_far = prior.as_ref().map_or(0, |p| p.0);
            if let Some((_, state, run_id)) = &prior {
                if state == "succeeded" {
                    return Ok((
                        AcquireResult::Refused(Refusal::Succeeded {
                            run_id: run_id.clone(),
                        }),
                        false,
                    ));
                }
                if state == "dead_lettered" && !req.manual {
                    return Ok((AcquireResult::Refused(Refusal::DeadLettered), false));
                }
            }
            // The next fence, drawn (below) only when the lease is granted: a refusal or an
            // exhausted slot leaves the counter where it was. The immediate transaction
            // keeps any other writer out meanwhile.
            let fence: i64 = sqlx::query_scalar("SELECT value + 1 FROM batchguard_fence WHERE id = 1")
                .fetch_one(&mut *c)
                .await?;
            let taken: Option<i64> = sqlx::query_scalar(ACQUIRE_LEASE)
                .bind(&req.key)
                .bind(&req.job)
                .bind(&slot)
                .bind(&req.holder)
                .bind(&req.run_id)
                .bind(fence)
                .bind(now_us)
                .bind(now_us.saturating_add(ttl_us))
                .bind(req.manual)
                .fetch_optional(&mut *c)
                .await?;
            if taken.is_none() {
                let held: Option<(String, String, i64, i64)> = sqlx::query_as(
                    "SELECT holder, run_id, fence, lease_until FROM batchguard_leases WHERE key = ?1",
                )
                .bind(&req.key)
                .fetch_optional(&mut *c)
                .await?;
                let refusal = match held {
                    Some((holder, run_id, fence, until)) => Refusal::Held {
                        holder,
                        run_id,
                        fence,
                        ends_in_secs: ((until - now_us).max(0) + 999_999) / 1_000_000,
                    },
                    None => Refusal::DeadLettered,
                };
                return Ok((AcquireResult::Refused(refusal), false));
            }
            // The lease is ours; a slot whose attempts are all used is dead-lettered instead.
            if let Some(max) = req.max_attempts
                && !req.manual
                && u64::try_from(attempts_so_far).unwrap_or(0) >= max
            {
                sqlx::query(
                    "UPDATE batchguard_slots SET state = 'dead_lettered' WHERE job = ?1 AND scheduled_at = ?2",
                )
                .bind(&req.job)
                .bind(&slot)
                .execute(&mut *c)
                .await?;
                sqlx::query(
                    "UPDATE batchguard_leases SET state = 'released', lease_until = ?2 WHERE key = ?1",
                )
                .bind(&req.key)
                .bind(now_us)
                .execute(&mut *c)
                .await?;
                let mut dl = req.start.clone();
                dl.event = "dead_letter".into();
                dl.at = now;
                dl.attempt = u32::try_from(attempts_so_far).ok();
                dl.error_code = Some("ATTEMPTS_EXHAUSTED".into());
                dl.detail = Some(format!(
                    "all {attempts_so_far} attempts were used; the last one never reported an end"
                ));
                dl.snapshot_digest = None;
                if req.ledger {
                    insert_event(c, &dl).await?;
                }
                let attempts = u32::try_from(attempts_so_far).unwrap_or(u32::MAX);
                return Ok((AcquireResult::Refused(Refusal::Exhausted { attempts }), true));
            }
            sqlx::query("UPDATE batchguard_fence SET value = ?1 WHERE id = 1")
                .bind(fence)
                .execute(&mut *c)
                .await?;
            let attempt: i64 = sqlx::query_scalar(
                "INSERT INTO batchguard_slots (job, scheduled_at, attempts, state, run_id) \
                 VALUES (?1, ?2, 1, 'running', ?3) \
                 ON CONFLICT (job, scheduled_at) DO UPDATE SET attempts = attempts + 1, \
                 state = 'running', run_id = excluded.run_id RETURNING attempts",
            )
            .bind(&req.job)
            .bind(&slot)
            .bind(&req.run_id)
            .fetch_one(&mut *c)
            .await?;
            let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
            let mut start = req.start.clone();
            start.at = now;
            start.attempt = Some(attempt);
            start.fence = Some(fence);
            if req.ledger {
                insert_event(c, &start).await?;
            }
            Ok((
                AcquireResult::Acquired(Acquired {
                    fence,
                    attempt,
                    at: now,
                }),
                true,
            ))
        }));
        result.map_err(|e| self.fail("cannot acquire the lease", e))
    }

    fn finish(&mut self, fin: &Finish) -> Result<(), StoreError> {
        let slot = rfc3339(fin.scheduled_at);
        let clock = &self.clock;
        let result = self.rt.block_on(immediate(&mut self.conn, async |c| {
            if fin.ledger {
                if end_written(c, &fin.run_id).await? {
                    return Ok(((), false));
                }
                insert_event(c, &fin.end).await?;
                insert_outputs(c, &fin.job, &slot, &fin.run_id, &fin.outputs).await?;
                if let Some(dl) = &fin.dead_letter {
                    insert_event(c, dl).await?;
                }
            }
            let state = if fin.dead_letter.is_some() {
                SlotState::DeadLettered
            } else {
                fin.state
            };
            sqlx::query(
                "UPDATE batchguard_slots SET state = ?3 WHERE job = ?1 AND scheduled_at = ?2 \
                 AND (run_id = ?4 OR ?3 = 'succeeded')",
            )
            .bind(&fin.job)
            .bind(&slot)
            .bind(state.as_str())
            .bind(&fin.run_id)
            .execute(&mut *c)
            .await?;
            sqlx::query(
                "UPDATE batchguard_leases SET state = 'released', lease_until = MIN(lease_until, ?3) \
                 WHERE key = ?1 AND fence = ?2",
            )
            .bind(&fin.key)
            .bind(fin.fence)
            .bind(micros(clock()))
            .execute(&mut *c)
            .await?;
            Ok(((), true))
        }));
        result.map_err(|e| self.fail("cannot write the end of the run", e))
    }

    fn append(&mut self, ev: &EventRow) -> Result<(), StoreError> {
        let result = self.rt.block_on(insert_event(&mut self.conn, ev));
        result.map_err(|e| self.fail("cannot write an event", e))
    }

    fn ingest_abandoned(&mut self, run: &Abandoned, keys: &[OutputRow]) -> Result<u64, StoreError> {
        let slot = rfc3339(run.scheduled_at);
        let result = self.rt.block_on(immediate(&mut self.conn, async |c| {
            let seen: Option<i64> =
                sqlx::query_scalar("SELECT 1 FROM batchguard_outputs WHERE run_id = ?1 LIMIT 1")
                    .bind(&run.run_id)
                    .fetch_optional(&mut *c)
                    .await?;
            if seen.is_some() {
                return Ok((0, false));
            }
            insert_outputs(c, &run.job, &slot, &run.run_id, keys).await?;
            Ok((keys.len() as u64, true))
        }));
        result.map_err(|e| self.fail("cannot write the outputs of an abandoned run", e))
    }

    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        let now_us = micros((self.clock)());
        let rows: Result<Vec<(String, String, String)>, _> = self.rt.block_on(
            sqlx::query_as(
                "SELECT s.run_id, s.job, s.scheduled_at FROM batchguard_events s \
                 WHERE s.event = 'start' \
                 AND NOT EXISTS (SELECT 1 FROM batchguard_events e WHERE e.run_id = s.run_id AND e.event = 'end') \
                 AND NOT EXISTS (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > ?1)",
            )
            .bind(now_us)
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the runs", e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(run_id, job, at)| {
                Some(Abandoned {
                    run_id,
                    job,
                    scheduled_at: at.parse().ok()?,
                })
            })
            .collect())
    }

    fn live(&mut self, run_id: &str) -> Result<bool, StoreError> {
        let now_us = micros((self.clock)());
        let row: Result<Option<i64>, _> = self.rt.block_on(
            sqlx::query_scalar(
                "SELECT 1 FROM batchguard_leases WHERE run_id = ?1 AND state = 'held' AND lease_until > ?2",
            )
            .bind(run_id)
            .bind(now_us)
            .fetch_optional(&mut self.conn),
        );
        row.map(|r| r.is_some())
            .map_err(|e| self.fail("cannot read the leases", e))
    }

    fn as_ledger(&mut self) -> &mut dyn Ledger {
        self
    }

    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let now_us = micros((self.clock)());
        let rows = self.rt.block_on(
            sqlx::query(
                "SELECT key, job, scheduled_at, holder, run_id, fence, lease_until FROM batchguard_leases \
                 WHERE state = 'held' AND lease_until > ?1 AND (?2 IS NULL OR job = ?2) ORDER BY key",
            )
            .bind(now_us)
            .bind(job)
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the leases", e))?;
        Ok(rows
            .iter()
            .map(|r| LeaseRow {
                key: r.get(0),
                job: r.get(1),
                scheduled_at: r.get(2),
                holder: r.get(3),
                run_id: r.get(4),
                fence: r.get(5),
                secs_left: ((r.get::<i64, _>(6) - now_us).max(0) + 999_999) / 1_000_000,
            })
            .collect())
    }

    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        let now = (self.clock)();
        let rows = self.rt.block_on(
            sqlx::query(
                "SELECT key, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until \
                 FROM batchguard_leases WHERE state = 'held' ORDER BY key",
            )
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the leases", e))?;
        let us = |v: i64| Timestamp::from_microsecond(v).unwrap_or(Timestamp::UNIX_EPOCH);
        let leases = rows
            .iter()
            .filter_map(|r| {
                Some(HeldLease {
                    key: r.try_get(0).ok()?,
                    job: r.try_get(1).ok()?,
                    scheduled_at: r.try_get::<String, _>(2).ok()?.parse().ok()?,
                    holder: r.try_get(3).ok()?,
                    run_id: r.try_get(4).ok()?,
                    fence: r.try_get(5).ok()?,
                    acquired_at: us(r.try_get(6).ok()?),
                    lease_until: us(r.try_get(7).ok()?),
                })
            })
            .collect();
        Ok((leases, now))
    }

    fn unfinished(
        &mut self,
        job: &str,
        from: Timestamp,
    ) -> Result<(Vec<Unfinished>, Timestamp), StoreError> {
        let now = (self.clock)();
        let rows: Result<Vec<(String, i64, String, String)>, _> = self.rt.block_on(
            sqlx::query_as(
                "SELECT s.scheduled_at, s.attempts, \
                   CASE WHEN s.state = 'running' THEN 'lost' ELSE s.state END, s.run_id \
                 FROM batchguard_slots s WHERE s.job = ?1 AND s.scheduled_at >= ?2 \
                 AND (s.state IN ('failed', 'interrupted') OR (s.state = 'running' AND NOT EXISTS \
                   (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > ?3))) \
                 ORDER BY s.scheduled_at",
            )
            .bind(job)
            .bind(rfc3339(from))
            .bind(micros(now))
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the unfinished slots", e))?;
        let rows = rows
            .into_iter()
            .map(|(at, n, state, run)| (at.parse().ok(), Some(n), state, run));
        Ok((Unfinished::oldest_first(rows), now))
    }

    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError> {
        let rows = self.rt.block_on(
            sqlx::query(
                "SELECT job, scheduled_at, attempts, state, run_id FROM ( \
                   SELECT *, row_number() OVER (PARTITION BY job ORDER BY scheduled_at DESC) AS n \
                   FROM batchguard_slots WHERE (?1 IS NULL OR job = ?1)) \
                 WHERE n <= ?2 ORDER BY job, scheduled_at DESC",
            )
            .bind(job)
            .bind(i64::from(per_job))
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the slots", e))?;
        Ok(rows
            .iter()
            .map(|r| SlotRow {
                job: r.get(0),
                scheduled_at: r.get(1),
                attempts: r.get(2),
                state: r.get(3),
                run_id: r.get(4),
            })
            .collect())
    }
}

impl Ledger for SqliteStore {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let slot = rfc3339(batch.scheduled_at);
        let result = self.rt.block_on(immediate(&mut self.conn, async |c| {
            if batch.has_end() && end_written(c, &batch.run_id).await? {
                return Ok(((), false));
            }
            for ev in &batch.events {
                insert_event(c, ev).await?;
            }
            insert_outputs(c, &batch.job, &slot, &batch.run_id, &batch.outputs).await?;
            Ok(((), true))
        }));
        result.map_err(|e| self.fail("cannot write to the ledger", e))
    }
}

/// SQLITE_BUSY or SQLITE_LOCKED (with their extended codes), as sqlx reports them.
fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => d
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|c| matches!(c & 0xff, 5 | 6)),
        _ => false,
    }
}

/// Opens the file (its folder created) in WAL mode with the busy timeout, on a runtime of
/// its own, shown as `sqlite:PATH`. Each `run` is a short process: the checkpoint SQLite
/// runs when the last connection closes (and the WAL file it deletes and recreates, with
/// their fsyncs) would cost every run, so it is turned off; the WAL's auto-checkpoint
/// still bounds the file.
pub(super) fn connect(
    path: &Path,
) -> Result<(tokio::runtime::Runtime, SqliteConnection, String), StoreError> {
    let shown = format!("sqlite:{}", path.display());
    let rt = crate::db::runtime().map_err(StoreError::failed)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::unreachable(format!("{shown}: cannot create {}: {e}", dir.display()))
        })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT);
    let fail = |e: sqlx::Error| StoreError::unreachable(format!("{shown}: cannot open: {e}"));
    let conn = rt.block_on(async {
        // Several processes opening a new file at once race to switch it to WAL, and
        // SQLite can answer that switch with SQLITE_BUSY without consulting the busy
        // timeout: such an open is retried a few times before it counts as a failure.
        let mut tries = 0u64;
        let mut conn = loop {
            match SqliteConnection::connect_with(&options).await {
                Ok(c) => break c,
                Err(e) if tries < 10 && is_busy(&e) => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * tries)).await;
                }
                Err(e) => return Err(fail(e)),
            }
        };
        {
            let mut h = conn.lock_handle().await.map_err(fail)?;
            // SAFETY: a valid handle, held locked for the call; the option takes an int
            // and an optional int* for the previous value.
            unsafe {
                libsqlite3_sys::sqlite3_db_config(
                    h.as_raw_handle().as_ptr(),
                    libsqlite3_sys::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                    1 as std::ffi::c_int,
                    std::ptr::null_mut::<std::ffi::c_int>(),
                );
            }
        }
        Ok::<_, StoreError>(conn)
    })?;
    Ok((rt, conn, shown))
}

/// What `batchguard drill` does to its own sandbox store between the steps of a scenario,
/// and how it reads the outcome back. Never used on a store `run` shares with a scheduler.
impl SqliteStore {
    /// Ends every held lease now, as if each holder's TTL had run out (a drill does not
    /// wait a real TTL to play a crashed or paused holder).
    pub fn expire_leases(&mut self) -> Result<u64, StoreError> {
        let now = micros((self.clock)());
        let r = self.rt.block_on(
            sqlx::query(
                "UPDATE batchguard_leases SET lease_until = ?1 WHERE state = 'held' AND lease_until > ?1",
            )
            .bind(now)
            .execute(&mut self.conn),
        );
        r.map(|r| r.rows_affected())
            .map_err(|e| self.fail("cannot expire the leases", e))
    }

    /// Forgets that a slot succeeded and releases its leases, as a lock without success
    /// markers would after its lease expired; the fencing counter and the ledger stay.
    pub fn forget_slot(&mut self, job: &str, scheduled_at: Timestamp) -> Result<(), StoreError> {
        let slot = rfc3339(scheduled_at);
        let now = micros((self.clock)());
        let r = self.rt.block_on(async {
            sqlx::query("DELETE FROM batchguard_slots WHERE job = ?1 AND scheduled_at = ?2")
                .bind(job)
                .bind(&slot)
                .execute(&mut self.conn)
                .await?;
            sqlx::query(
                "UPDATE batchguard_leases SET state = 'released', lease_until = MIN(lease_until, ?3) \
                 WHERE job = ?1 AND scheduled_at = ?2",
            )
            .bind(job)
            .bind(&slot)
            .bind(now)
            .execute(&mut self.conn)
            .await
        });
        r.map(|_| ())
            .map_err(|e| self.fail("cannot forget the slot", e))
    }

    /// The job's events in the order they were written.
    pub fn events_of(&mut self, job: &str) -> Result<Vec<EventRow>, StoreError> {
        type Row = (
            String,
            String,
            String,
            String,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<String>,
            Option<String>,
            String,
            Option<i64>,
            Option<String>,
        );
        let rows: Result<Vec<Row>, _> = self.rt.block_on(
            sqlx::query_as(
                "SELECT run_id, scheduled_at, event, at, instance, attempt, status, error_code, \
                 snapshot_digest, \"trigger\", fence, detail FROM batchguard_events WHERE job = ?1 ORDER BY rowid",
            )
            .bind(job)
            .fetch_all(&mut self.conn),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the events", e))?;
        Ok(rows
            .into_iter()
            .map(|r| EventRow {
                run_id: r.0,
                job: job.to_owned(),
                scheduled_at: r.1.parse().unwrap_or(Timestamp::UNIX_EPOCH),
                event: r.2,
                at: r.3.parse().unwrap_or(Timestamp::UNIX_EPOCH),
                instance: r.4,
                attempt: r.5.and_then(|a| u32::try_from(a).ok()),
                status: r.6,
                error_code: r.7,
                snapshot_digest: r.8,
                trigger: r.9,
                fence: r.10,
                detail: r.11,
            })
            .collect())
    }

    /// The job's applied outputs as `(output_key, run_id)`, in the order they were written.
    pub fn outputs_of(&mut self, job: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = self.rt.block_on(
            sqlx::query_as(
                "SELECT output_key, run_id FROM batchguard_outputs WHERE job = ?1 ORDER BY rowid",
            )
            .bind(job)
            .fetch_all(&mut self.conn),
        );
        rows.map_err(|e| self.fail("cannot read the outputs", e))
    }
}
