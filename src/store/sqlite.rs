//! The SQLite store (`sqlite:PATH`): one host, several processes. WAL and a busy timeout
//! let the processes share the file; every write is an immediate transaction, so the
//! acquire's check and its upsert see one state. The clock is the host's (SPEC 7.1 item 2).
//!
//! Statements run on the caller's thread through rusqlite, not on sqlx's worker thread:
//! `run` is a short process on the latency path of every tick, and each statement handed to
//! sqlx's SQLite thread and back cost two context switches (with the worker's start and the
//! runtime, about 2 ms of the guard's overhead on a 2-core host).

use super::ledger::{Batch, Ledger};
use super::{
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, Finished, HeldLease,
    LeaseRow, OutputRow, Refusal, SlotRow, SlotState, Store, StoreError, Unfinished, micros,
    rfc3339,
};
use jiff::Timestamp;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::path::Path;

mod rows;
use rows::{
    all, end_written, immediate, insert_event, insert_outputs, insert_unclaimed, is_busy,
    unfinished_in,
};
use std::time::Duration;

/// The DDL: the ledger tables and the store's own.
pub const DDL: [&str; 2] = [
    include_str!("../../schemas/ledger.sqlite.sql"),
    include_str!("../../schemas/store.sqlite.sql"),
];

/// Bumped when the DDL changes; `PRAGMA user_version` says which a file has. 2: the
/// `trigger` check admits `catch_up`; 3: the `status` check admits `superseded`; 4: the
/// claims table (SPEC 7.5).
const SCHEMA_VERSION: i64 = 4;

/// An older events table has a `trigger` check without `catch_up` or a `status` check
/// without `superseded`, and SQLite cannot
/// alter a check: the table is copied into one made by the current DDL, in the migration's
/// transaction (its indexes come back with the DDL that follows).
const WIDEN_TRIGGER: &str = "\
ALTER TABLE batchguard_events RENAME TO batchguard_events_v1;
DROP INDEX IF EXISTS batchguard_events_slot;
DROP INDEX IF EXISTS batchguard_events_run;";

/// The WAL is checkpointed when it holds this many pages (SQLite's default: 1,000). Every
/// `run` is the file's first connection, which rebuilds the WAL index by reading (and
/// checksumming) the whole WAL: 4 MiB at the default cost each run about half a
/// millisecond. A run writes about five pages, so a checkpoint (two fsyncs) comes every
/// fifty runs or so.
const WAL_CHECKPOINT_PAGES: u32 = 256;

/// Long enough for 50 contenders on one slot to queue, short enough to fail a stuck file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the store reads the time: the host's clock, or a test's.
pub type Clock = Box<dyn Fn() -> Timestamp + Send>;

pub struct SqliteStore {
    conn: Connection,
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

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, false)
    }

    /// `migrate`: runs the (idempotent) DDL even when the file says it is current, so
    /// a dropped table comes back.
    pub fn open_with(path: &Path, migrate: bool) -> Result<SqliteStore, StoreError> {
        let (mut conn, shown) = connect(path)?;
        let fail =
            |what: &str, e: rusqlite::Error| StoreError::failed(format!("{shown}: {what}: {e}"));
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| fail("cannot read the schema version", e))?;
        if migrate || version < SCHEMA_VERSION {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| fail("cannot lock the file", e))?;
            let old: Option<String> = tx
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'batchguard_events'",
                    [],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| fail("cannot read the schema", e))?;
            let widen =
                old.is_some_and(|sql| !sql.contains("catch_up") || !sql.contains("superseded"));
            if widen {
                tx.execute_batch(WIDEN_TRIGGER)
                    .map_err(|e| fail("cannot upgrade the tables", e))?;
            }
            for ddl in DDL {
                tx.execute_batch(ddl)
                    .map_err(|e| fail("cannot create the tables", e))?;
            }
            if widen {
                tx.execute_batch(
                    "INSERT INTO batchguard_events (rowid, run_id, job, scheduled_at, event, at, \
                       instance, attempt, status, error_code, snapshot_digest, \"trigger\", fence, detail) \
                     SELECT rowid, run_id, job, scheduled_at, event, at, instance, attempt, status, \
                       error_code, snapshot_digest, \"trigger\", fence, detail FROM batchguard_events_v1; \
                     DROP TABLE batchguard_events_v1",
                )
                .map_err(|e| fail("cannot upgrade the tables", e))?;
            }
            tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
                .and_then(|()| tx.commit())
                .map_err(|e| fail("cannot create the tables", e))?;
        }
        Ok(SqliteStore {
            conn,
            shown,
            clock: Box::new(Timestamp::now),
        })
    }

    /// A ledger apart from the store: the file gets the ledger tables only (idempotent
    /// DDL, so a file that is also a store keeps its own tables).
    pub fn open_ledger(path: &Path) -> Result<SqliteStore, StoreError> {
        let (conn, shown) = connect(path)?;
        conn.execute_batch(DDL[0]).map_err(|e| {
            StoreError::failed(format!("{shown}: cannot create the ledger tables: {e}"))
        })?;
        Ok(SqliteStore {
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

    fn fail(&self, what: &str, e: rusqlite::Error) -> StoreError {
        StoreError::failed(format!("{}: {what}: {e}", self.shown))
    }

    /// The batchguard tables a file has, without creating any (`store migrate` says which
    /// it created); a file that does not exist has none.
    pub fn tables_of(path: &Path) -> Result<Vec<String>, StoreError> {
        if !path.exists() {
            return Ok(Vec::new());
        }
        let (conn, shown) = connect(path)?;
        all(
            &conn,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'batchguard\\_%' ESCAPE '\\' ORDER BY 1",
            [],
            |r| r.get(0),
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
        let (conn, shown) = connect(path)?;
        let rows: Vec<(String, i64)> = all(
            &conn,
            "SELECT job, max(fence) FROM batchguard_events WHERE fence IS NOT NULL GROUP BY job",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| StoreError::failed(format!("{shown}: cannot read the fences: {e}")))?;
        Ok(rows.into_iter().collect())
    }

    /// Moves the fencing counter past `fence` (never back); answers its next value.
    pub fn raise_fence(&mut self, fence: i64) -> Result<i64, StoreError> {
        let r = self.conn.query_row(
            "UPDATE batchguard_fence SET value = max(value, ?1) WHERE id = 1 RETURNING value + 1",
            [fence],
            |r| r.get(0),
        );
        r.map_err(|e| self.fail("cannot move the fencing counter", e))
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
        let result = immediate(&mut self.conn, |c| {
            let now = clock();
            let now_us = micros(now);
            if req.clock.is_some() || req.catch_up_from.is_some() {
                let behind = match req.catch_up_from {
                    Some(from) => unfinished_in(c, &req.job, from, now)?,
                    None => vec![],
                };
                if let Some(r) = req.precheck(now, behind) {
                    return Ok((r, false));
                }
            }
            let prior: Option<(i64, String, String)> = c
                .query_row(
                    "SELECT attempts, state, run_id FROM batchguard_slots WHERE job = ?1 AND scheduled_at = ?2",
                    params![req.job, slot],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
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
            let fence: i64 = c.query_row(
                "SELECT value + 1 FROM batchguard_fence WHERE id = 1",
                [],
                |r| r.get(0),
            )?;
            let taken: Option<i64> = c
                .query_row(
                    ACQUIRE_LEASE,
                    params![
                        req.key,
                        req.job,
                        slot,
                        req.holder,
                        req.run_id,
                        fence,
                        now_us,
                        now_us.saturating_add(ttl_us),
                        req.manual,
                    ],
                    |r| r.get(0),
                )
                .optional()?;
            if taken.is_none() {
                let held: Option<(String, String, i64, i64)> = c
                    .query_row(
                        "SELECT holder, run_id, fence, lease_until FROM batchguard_leases WHERE key = ?1",
                        [&req.key],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .optional()?;
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
                c.execute(
                    "UPDATE batchguard_slots SET state = 'dead_lettered', run_id = ?3 \
                     WHERE job = ?1 AND scheduled_at = ?2",
                    params![req.job, slot, req.run_id],
                )?;
                c.execute(
                    "UPDATE batchguard_leases SET state = 'released', lease_until = ?2 WHERE key = ?1",
                    params![req.key, now_us],
                )?;
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
                    insert_event(c, &dl)?;
                }
                let attempts = u32::try_from(attempts_so_far).unwrap_or(u32::MAX);
                return Ok((
                    AcquireResult::Refused(Refusal::Exhausted { attempts }),
                    true,
                ));
            }
            c.execute(
                "UPDATE batchguard_fence SET value = ?1 WHERE id = 1",
                [fence],
            )?;
            let attempt: i64 = c.query_row(
                "INSERT INTO batchguard_slots (job, scheduled_at, attempts, state, run_id) \
                 VALUES (?1, ?2, 1, 'running', ?3) \
                 ON CONFLICT (job, scheduled_at) DO UPDATE SET attempts = attempts + 1, \
                 state = 'running', run_id = excluded.run_id RETURNING attempts",
                params![req.job, slot, req.run_id],
                |r| r.get(0),
            )?;
            let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
            let mut start = req.start.clone();
            start.at = now;
            start.attempt = Some(attempt);
            start.fence = Some(fence);
            if req.ledger {
                insert_event(c, &start)?;
            }
            Ok((
                AcquireResult::Acquired(Acquired {
                    fence,
                    attempt,
                    at: now,
                }),
                true,
            ))
        });
        result.map_err(|e| self.fail("cannot acquire the lease", e))
    }

    fn finish(&mut self, fin: &Finish) -> Result<Finished, StoreError> {
        let slot = rfc3339(fin.scheduled_at);
        let clock = &self.clock;
        // The immediate transaction is the lock of item 23: of two processes flushing one
        // finish, the second waits and then finds the first one's `end`.
        let result = immediate(&mut self.conn, |c| {
            if fin.ledger && end_written(c, &fin.run_id)? {
                return Ok((Finished::AlreadyWritten, false));
            }
            let latest: Option<String> = c
                .query_row(
                    "SELECT run_id FROM batchguard_slots WHERE job = ?1 AND scheduled_at = ?2",
                    params![fin.job, slot],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(newer) = latest.filter(|r| *r != fin.run_id) {
                let fence: Option<i64> = c
                    .query_row(
                        "SELECT fence FROM batchguard_leases WHERE run_id = ?1",
                        [&newer],
                        |r| r.get(0),
                    )
                    .optional()?;
                if fin.ledger {
                    // Its outputs were applied: recorded, so audit sees a double apply.
                    insert_event(c, &fin.superseded_end(&newer, fence))?;
                    insert_unclaimed(c, &fin.job, &slot, &fin.run_id, &fin.outputs)?;
                }
                return Ok((
                    Finished::Superseded {
                        run_id: newer,
                        fence,
                    },
                    true,
                ));
            }
            if fin.ledger {
                insert_event(c, &fin.end)?;
                insert_unclaimed(c, &fin.job, &slot, &fin.run_id, &fin.outputs)?;
                if let Some(dl) = &fin.dead_letter {
                    insert_event(c, dl)?;
                }
            }
            let state = if fin.dead_letter.is_some() {
                SlotState::DeadLettered
            } else {
                fin.state
            };
            c.execute(
                "UPDATE batchguard_slots SET state = ?3 WHERE job = ?1 AND scheduled_at = ?2 \
                 AND run_id = ?4",
                params![fin.job, slot, state.as_str(), fin.run_id],
            )?;
            c.execute(
                "UPDATE batchguard_leases SET state = 'released', lease_until = MIN(lease_until, ?3) \
                 WHERE key = ?1 AND fence = ?2",
                params![fin.key, fin.fence, micros(clock())],
            )?;
            Ok((Finished::Written, true))
        });
        result.map_err(|e| self.fail("cannot write the end of the run", e))
    }

    fn claim(
        &mut self,
        job: &str,
        key: &str,
        run_id: &str,
        fence: i64,
    ) -> Result<bool, StoreError> {
        let at = rfc3339((self.clock)());
        // The check and the insert in one immediate transaction: no other process writes
        // between them (SQLite has one writer at a time).
        let result = immediate(&mut self.conn, |c| {
            let slot: Option<String> = c
                .query_row(
                    "SELECT s.scheduled_at FROM batchguard_slots s WHERE s.job = ?1 AND s.run_id = ?2 \
                     AND EXISTS (SELECT 1 FROM batchguard_leases l WHERE l.run_id = ?2 AND l.fence = ?3)",
                    params![job, run_id, fence],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(slot) = slot else {
                return Ok((None, false));
            };
            let n = c.execute(
                "INSERT INTO batchguard_claims (job, output_key, run_id, fence, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (job, output_key) DO NOTHING",
                params![job, key, run_id, fence, at],
            )?;
            if n == 0 {
                return Ok((Some(false), false));
            }
            insert_outputs(
                c,
                job,
                &slot,
                run_id,
                &[OutputRow {
                    key: key.to_owned(),
                    at: at.parse().unwrap_or_else(|_| Timestamp::now()),
                }],
            )?;
            Ok((Some(true), true))
        });
        match result {
            Ok(Some(first)) => Ok(first),
            Ok(None) => Err(StoreError::claim_refused(run_id, fence, key)),
            Err(e) => Err(self.fail("cannot claim the output", e)),
        }
    }

    fn claimed(&mut self, run_id: &str) -> Result<Vec<OutputRow>, StoreError> {
        let rows: rusqlite::Result<Vec<(String, String)>> = all(
            &self.conn,
            "SELECT output_key, at FROM batchguard_claims WHERE run_id = ?1 ORDER BY at, output_key",
            [run_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        );
        let rows = rows.map_err(|e| self.fail("cannot read the claims", e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, at)| {
                Some(OutputRow {
                    key,
                    at: at.parse().ok()?,
                })
            })
            .collect())
    }

    fn append(&mut self, ev: &EventRow) -> Result<(), StoreError> {
        let result = insert_event(&self.conn, ev);
        result.map_err(|e| self.fail("cannot write an event", e))
    }

    fn ingest_abandoned(&mut self, run: &Abandoned, keys: &[OutputRow]) -> Result<u64, StoreError> {
        let slot = rfc3339(run.scheduled_at);
        let result = immediate(&mut self.conn, |c| {
            let seen = c
                .query_row(
                    "SELECT 1 FROM batchguard_outputs o WHERE o.run_id = ?1 AND NOT EXISTS \
                     (SELECT 1 FROM batchguard_claims c WHERE c.job = o.job \
                      AND c.output_key = o.output_key AND c.run_id = o.run_id) LIMIT 1",
                    [&run.run_id],
                    |_| Ok(()),
                )
                .optional()?;
            if seen.is_some() {
                return Ok((0, false));
            }
            insert_unclaimed(c, &run.job, &slot, &run.run_id, keys)?;
            Ok((keys.len() as u64, true))
        });
        result.map_err(|e| self.fail("cannot write the outputs of an abandoned run", e))
    }

    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        let now_us = micros((self.clock)());
        let rows: rusqlite::Result<Vec<(String, String, String)>> = all(
            &self.conn,
            "SELECT s.run_id, s.job, s.scheduled_at FROM batchguard_events s \
             WHERE s.event = 'start' \
             AND NOT EXISTS (SELECT 1 FROM batchguard_events e WHERE e.run_id = s.run_id AND e.event = 'end') \
             AND NOT EXISTS (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > ?1)",
            [now_us],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
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
        let row = self
            .conn
            .query_row(
                "SELECT 1 FROM batchguard_leases WHERE run_id = ?1 AND state = 'held' AND lease_until > ?2",
                params![run_id, now_us],
                |_| Ok(()),
            )
            .optional();
        row.map(|r| r.is_some())
            .map_err(|e| self.fail("cannot read the leases", e))
    }

    fn as_ledger(&mut self) -> &mut dyn Ledger {
        self
    }

    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let now_us = micros((self.clock)());
        let rows = all(
            &self.conn,
            "SELECT key, job, scheduled_at, holder, run_id, fence, lease_until FROM batchguard_leases \
             WHERE state = 'held' AND lease_until > ?1 AND (?2 IS NULL OR job = ?2) ORDER BY key",
            params![now_us, job],
            |r| {
                Ok(LeaseRow {
                    key: r.get(0)?,
                    job: r.get(1)?,
                    scheduled_at: r.get(2)?,
                    holder: r.get(3)?,
                    run_id: r.get(4)?,
                    fence: r.get(5)?,
                    secs_left: ((r.get::<_, i64>(6)? - now_us).max(0) + 999_999) / 1_000_000,
                })
            },
        );
        rows.map_err(|e| self.fail("cannot read the leases", e))
    }

    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        let now = (self.clock)();
        let us = |v: i64| Timestamp::from_microsecond(v).unwrap_or(Timestamp::UNIX_EPOCH);
        let rows = all(
            &self.conn,
            "SELECT key, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until \
             FROM batchguard_leases WHERE state = 'held' ORDER BY key",
            [],
            |r| {
                // A row whose columns do not read as a lease is left out, not an error.
                let lease = (|| {
                    Some(HeldLease {
                        key: r.get(0).ok()?,
                        job: r.get(1).ok()?,
                        scheduled_at: r.get::<_, String>(2).ok()?.parse().ok()?,
                        holder: r.get(3).ok()?,
                        run_id: r.get(4).ok()?,
                        fence: r.get(5).ok()?,
                        acquired_at: us(r.get(6).ok()?),
                        lease_until: us(r.get(7).ok()?),
                    })
                })();
                Ok(lease)
            },
        );
        let rows = rows.map_err(|e| self.fail("cannot read the leases", e))?;
        Ok((rows.into_iter().flatten().collect(), now))
    }

    fn unfinished(
        &mut self,
        job: &str,
        from: Timestamp,
    ) -> Result<(Vec<Unfinished>, Timestamp), StoreError> {
        let now = (self.clock)();
        let rows = unfinished_in(&self.conn, job, from, now)
            .map_err(|e| self.fail("cannot read the unfinished slots", e))?;
        Ok((rows, now))
    }

    fn folds_checks(&self) -> bool {
        true
    }

    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError> {
        let rows = all(
            &self.conn,
            "SELECT job, scheduled_at, attempts, state, run_id FROM ( \
               SELECT *, row_number() OVER (PARTITION BY job ORDER BY scheduled_at DESC) AS n \
               FROM batchguard_slots WHERE (?1 IS NULL OR job = ?1)) \
             WHERE n <= ?2 ORDER BY job, scheduled_at DESC",
            params![job, i64::from(per_job)],
            |r| {
                Ok(SlotRow {
                    job: r.get(0)?,
                    scheduled_at: r.get(1)?,
                    attempts: r.get(2)?,
                    state: r.get(3)?,
                    run_id: r.get(4)?,
                })
            },
        );
        rows.map_err(|e| self.fail("cannot read the slots", e))
    }
}

impl Ledger for SqliteStore {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let slot = rfc3339(batch.scheduled_at);
        let result = immediate(&mut self.conn, |c| {
            if batch.has_end() && end_written(c, &batch.run_id)? {
                return Ok(((), false));
            }
            for ev in &batch.events {
                insert_event(c, ev)?;
            }
            insert_outputs(c, &batch.job, &slot, &batch.run_id, &batch.outputs)?;
            Ok(((), true))
        });
        result.map_err(|e| self.fail("cannot write to the ledger", e))
    }
}

/// Opens the file (its folder created) in WAL mode with the busy timeout, shown as
/// `sqlite:PATH`. Each `run` is a short process: the checkpoint SQLite runs when the last
/// connection closes (and the WAL file it deletes and recreates, with their fsyncs) would
/// cost every run, so it is turned off; the WAL's auto-checkpoint still bounds the file.
pub(super) fn connect(path: &Path) -> Result<(Connection, String), StoreError> {
    let shown = format!("sqlite:{}", path.display());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::unreachable(format!("{shown}: cannot create {}: {e}", dir.display()))
        })?;
    }
    let fail = |e: rusqlite::Error| StoreError::unreachable(format!("{shown}: cannot open: {e}"));
    let open = || -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        // A file system without shared memory keeps the rollback journal: slower, as safe.
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}"
        ))?;
        Ok(conn)
    };
    // Several processes opening a new file at once race to switch it to WAL, and SQLite
    // can answer that switch with SQLITE_BUSY without consulting the busy timeout: such an
    // open is retried a few times before it counts as a failure.
    let mut tries = 0u64;
    let conn = loop {
        match open() {
            Ok(c) => break c,
            Err(e) if tries < 10 && is_busy(&e) => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20 * tries));
            }
            Err(e) => return Err(fail(e)),
        }
    };
    Ok((conn, shown))
}

/// What `batchguard drill` does to its own sandbox store between the steps of a scenario,
/// and how it reads the outcome back. Never used on a store `run` shares with a scheduler.
impl SqliteStore {
    /// Ends every held lease now, as if each holder's TTL had run out (a drill does not
    /// wait a real TTL to play a crashed or paused holder).
    pub fn expire_leases(&mut self) -> Result<u64, StoreError> {
        let now = micros((self.clock)());
        let r = self.conn.execute(
            "UPDATE batchguard_leases SET lease_until = ?1 WHERE state = 'held' AND lease_until > ?1",
            [now],
        );
        r.map(|n| n as u64)
            .map_err(|e| self.fail("cannot expire the leases", e))
    }

    /// Forgets that a slot succeeded and releases its leases, as a lock without success
    /// markers would after its lease expired; the fencing counter and the ledger stay.
    pub fn forget_slot(&mut self, job: &str, scheduled_at: Timestamp) -> Result<(), StoreError> {
        let slot = rfc3339(scheduled_at);
        let now = micros((self.clock)());
        let r = self
            .conn
            .execute(
                "DELETE FROM batchguard_slots WHERE job = ?1 AND scheduled_at = ?2",
                params![job, slot],
            )
            .and_then(|_| {
                self.conn.execute(
                    "UPDATE batchguard_leases SET state = 'released', lease_until = MIN(lease_until, ?3) \
                     WHERE job = ?1 AND scheduled_at = ?2",
                    params![job, slot, now],
                )
            });
        r.map(|_| ())
            .map_err(|e| self.fail("cannot forget the slot", e))
    }

    /// The job's events in the order they were written.
    pub fn events_of(&mut self, job: &str) -> Result<Vec<EventRow>, StoreError> {
        let rows = all(
            &self.conn,
            "SELECT run_id, scheduled_at, event, at, instance, attempt, status, error_code, \
             snapshot_digest, \"trigger\", fence, detail FROM batchguard_events WHERE job = ?1 ORDER BY rowid",
            [job],
            |r| {
                Ok(EventRow {
                    run_id: r.get(0)?,
                    job: job.to_owned(),
                    scheduled_at: r
                        .get::<_, String>(1)?
                        .parse()
                        .unwrap_or(Timestamp::UNIX_EPOCH),
                    event: r.get(2)?,
                    at: r
                        .get::<_, String>(3)?
                        .parse()
                        .unwrap_or(Timestamp::UNIX_EPOCH),
                    instance: r.get(4)?,
                    attempt: r
                        .get::<_, Option<i64>>(5)?
                        .and_then(|a| u32::try_from(a).ok()),
                    status: r.get(6)?,
                    error_code: r.get(7)?,
                    snapshot_digest: r.get(8)?,
                    trigger: r.get(9)?,
                    fence: r.get(10)?,
                    detail: r.get(11)?,
                })
            },
        );
        rows.map_err(|e| self.fail("cannot read the events", e))
    }

    /// The job's applied outputs as `(output_key, run_id)`, in the order they were written.
    pub fn outputs_of(&mut self, job: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = all(
            &self.conn,
            "SELECT output_key, run_id FROM batchguard_outputs WHERE job = ?1 ORDER BY rowid",
            [job],
            |r| Ok((r.get(0)?, r.get(1)?)),
        );
        rows.map_err(|e| self.fail("cannot read the outputs", e))
    }
}
