//! The SQLite store's row helpers: events and outputs written inside the caller's
//! transaction, the unfinished slots, the immediate transaction itself.

use crate::store::{EventRow, OutputRow, Unfinished, micros, rfc3339};
use jiff::Timestamp;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

pub(super) const INSERT_EVENT: &str = "\
INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, attempt, status,
    error_code, snapshot_digest, \"trigger\", fence, detail)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";

pub(super) fn insert_event(conn: &Connection, ev: &EventRow) -> rusqlite::Result<()> {
    conn.prepare_cached(INSERT_EVENT)?
        .execute(params![
            ev.run_id,
            ev.job,
            rfc3339(ev.scheduled_at),
            ev.event,
            rfc3339(ev.at),
            ev.instance,
            ev.attempt.map(i64::from),
            ev.status,
            ev.error_code,
            ev.snapshot_digest,
            ev.trigger,
            ev.fence,
            ev.detail.as_deref().map(crate::store::clip_detail),
        ])
        .map(|_| ())
}

pub(super) fn insert_outputs(
    conn: &Connection,
    job: &str,
    scheduled_at: &str,
    run_id: &str,
    outputs: &[OutputRow],
) -> rusqlite::Result<()> {
    if outputs.is_empty() {
        return Ok(());
    }
    // One prepared statement, stepped once per key, inside the caller's transaction.
    let mut st = conn.prepare_cached(
        "INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for o in outputs {
        st.execute(params![job, scheduled_at, run_id, o.key, rfc3339(o.at)])?;
    }
    Ok(())
}

/// [`insert_outputs`] of a run's outputs in the store's own tables: a key the run already
/// claimed is left out, its claim wrote its output row (SPEC 7.5).
pub(super) fn insert_unclaimed(
    conn: &Connection,
    job: &str,
    scheduled_at: &str,
    run_id: &str,
    outputs: &[OutputRow],
) -> rusqlite::Result<()> {
    if outputs.is_empty() {
        return Ok(());
    }
    let claimed: std::collections::HashSet<String> = all(
        conn,
        "SELECT output_key FROM batchguard_claims WHERE job = ?1 AND run_id = ?2",
        params![job, run_id],
        |r| r.get(0),
    )?
    .into_iter()
    .collect();
    let left: Vec<OutputRow> = outputs
        .iter()
        .filter(|o| !claimed.contains(&o.key))
        .cloned()
        .collect();
    insert_outputs(conn, job, scheduled_at, run_id, &left)
}

pub(super) fn end_written(c: &Connection, run_id: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT 1 FROM batchguard_events WHERE run_id = ?1 AND event = 'end' LIMIT 1",
        [run_id],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
}

/// The job's unfinished slots at or after `from` at `now` (see [`Store::unfinished`]).
pub(super) fn unfinished_in(
    c: &Connection,
    job: &str,
    from: Timestamp,
    now: Timestamp,
) -> rusqlite::Result<Vec<Unfinished>> {
    let rows: Vec<(String, i64, String, String)> = all(
        c,
        "SELECT s.scheduled_at, s.attempts, \
           CASE WHEN s.state = 'running' THEN 'lost' ELSE s.state END, s.run_id \
         FROM batchguard_slots s WHERE s.job = ?1 AND s.scheduled_at >= ?2 \
         AND (s.state IN ('failed', 'interrupted') OR (s.state = 'running' AND NOT EXISTS \
           (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > ?3))) \
         ORDER BY s.scheduled_at",
        params![job, rfc3339(from), micros(now)],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    Ok(Unfinished::oldest_first(rows.into_iter().map(
        |(at, n, state, run)| (at.parse().ok(), Some(n), state, run),
    )))
}

/// Runs `body` inside `BEGIN IMMEDIATE … COMMIT` (`false` from `body`: rolled back), rolling
/// back on any error.
pub(super) fn immediate<T>(
    conn: &mut Connection,
    body: impl FnOnce(&Connection) -> rusqlite::Result<(T, bool)>,
) -> rusqlite::Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (v, commit) = body(&tx)?;
    if commit {
        tx.commit()?
    } else {
        tx.rollback()?
    }
    Ok(v)
}

/// Every row of one query, each read by `row`.
pub(super) fn all<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut st = conn.prepare(sql)?;
    let rows = st.query_map(params, row)?;
    rows.collect()
}

/// SQLITE_BUSY or SQLITE_LOCKED (with their extended codes).
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}
