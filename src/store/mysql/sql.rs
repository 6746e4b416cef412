//! The statements of the MySQL / MariaDB store's operations, each sent as one `COM_QUERY`
//! (see the store's module doc): literals, the acquire, the finish and the ledger writes.

use super::super::{AcquireRequest, EventRow, Finish, OutputRow, SlotState};
use jiff::Timestamp;

/// Largest packet built for one round trip; a finish with more outputs is split into
/// several (one transaction still), below the servers' default `max_allowed_packet`.
pub(super) const MAX_PACKET: usize = 4 << 20;

/// How long a finish waits for another process writing the same run's end (item 23); below
/// the store's query timeout, so a wait that runs out is an answer, not a lost connection.
const RUN_LOCK_WAIT_SECS: u32 = 20;

/// A text value as a literal that no `sql_mode` reads differently. NUL, which the other
/// stores cannot keep, becomes U+FFFD here too, so one ledger reads the same everywhere.
pub fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2 + 12);
    out.push_str("_utf8mb4 X'");
    let mut buf = [0u8; 4];
    for c in s.chars() {
        let c = if c == '\0' { '\u{fffd}' } else { c };
        for b in c.encode_utf8(&mut buf).bytes() {
            out.push_str(&format!("{b:02X}"));
        }
    }
    out.push('\'');
    out
}

fn lit_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "NULL".to_owned(), lit)
}

fn int_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "NULL".to_owned(), |v| v.to_string())
}

/// A ledger time: RFC 3339 UTC with six fractional digits.
pub fn text_time(t: Timestamp) -> String {
    let t = Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t);
    t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

pub(super) fn ts(t: Timestamp) -> String {
    lit(&text_time(t))
}

/// The database's clock as epoch microseconds.
pub(super) const NOW_US: &str =
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// Epoch microseconds (an expression) as the ledger's text time.
fn text_of_us(expr: &str) -> String {
    format!(
        "DATE_FORMAT(TIMESTAMPADD(MICROSECOND, {expr}, '1970-01-01 00:00:00.000000'), '%Y-%m-%dT%H:%i:%s.%fZ')"
    )
}

pub(super) const EVENT_COLUMNS: &str = "run_id, job, scheduled_at, event, at, instance, attempt, \
    status, error_code, snapshot_digest, `trigger`, fence, detail";

pub(super) fn event_values(ev: &EventRow) -> String {
    let detail = lit_opt(
        ev.detail
            .as_deref()
            .map(super::super::clip_detail)
            .as_deref(),
    );
    event_values_with(ev, &detail)
}

/// An event's values with `detail` an SQL expression.
fn event_values_with(ev: &EventRow, detail: &str) -> String {
    format!(
        "{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {detail}",
        lit(&ev.run_id),
        lit(&ev.job),
        ts(ev.scheduled_at),
        lit(&ev.event),
        ts(ev.at),
        lit_opt(ev.instance.as_deref()),
        int_opt(ev.attempt),
        lit_opt(ev.status.as_deref()),
        lit_opt(ev.error_code.as_deref()),
        lit_opt(ev.snapshot_digest.as_deref()),
        lit(&ev.trigger),
        int_opt(ev.fence),
    )
}

/// The job's unfinished slots (see `Store::unfinished`) at or after `from` (a literal),
/// before `before` (a literal, or none), with the database's clock `now` (an expression):
/// the `FROM … WHERE` of a query over `batchguard_slots s`.
pub(super) fn unfinished_from(j: &str, from: &str, before: Option<&str>, now: &str) -> String {
    let before = before.map_or_else(String::new, |b| format!(" AND s.scheduled_at < {b}"));
    format!(
        "FROM batchguard_slots s WHERE s.job = {j} AND s.scheduled_at >= {from}{before}
  AND (s.state IN ('failed', 'interrupted') OR (s.state = 'running' AND NOT EXISTS
    (SELECT 1 FROM batchguard_leases l WHERE l.run_id = s.run_id AND l.state = 'held' AND l.lease_until > {now})))"
    )
}

/// The columns of an unfinished slot's row: time, attempts, state (`lost` for a holder
/// that died), run id.
pub(super) const UNFINISHED_COLUMNS: &str = "s.scheduled_at, CAST(s.attempts AS CHAR), \
    CASE WHEN s.state = 'running' THEN 'lost' ELSE s.state END, s.run_id";

/// The acquire: one multi-statement transaction (see the module's doc for its locks).
///
/// Items 22 and 27 ride on it: after the fence row's lock, the database's clock is checked
/// against the request's bound and the job's unfinished slots in the catch-up window are
/// read (a consistent read, so no lock: its snapshot is taken then, after the lock, and
/// sees every acquire before this one); either closes the gate, so nothing is written.
/// The slots come back as rows marked `u`, then one summary row: taken, exhausted, fence,
/// attempt, the holder's columns, the slot's state, last run and attempts, whether the
/// clock was within the bound, how many slots are behind, and the database's clock.
pub(super) fn acquire_sql(req: &AcquireRequest) -> String {
    let (k, j, s, r, h) = (
        lit(&req.key),
        lit(&req.job),
        ts(req.scheduled_at),
        lit(&req.run_id),
        lit(&req.holder),
    );
    let manual = if req.manual { "TRUE" } else { "FALSE" };
    let ttl_us = req
        .ttl_secs
        .min(100 * 365 * 86_400)
        .saturating_mul(1_000_000);
    let max = req
        .max_attempts
        .map_or_else(|| "NULL".to_owned(), |m| m.min(i64::MAX as u64).to_string());
    let st = &req.start;
    let inst = lit_opt(st.instance.as_deref());
    let trig = lit(&st.trigger);
    let ledger = if req.ledger { "TRUE" } else { "FALSE" };
    let at = text_of_us("@bg_now");
    let clock = req.clock.map_or_else(
        || "TRUE".to_owned(),
        |c| {
            let before = c.before.map_or_else(String::new, |b| {
                format!(" AND @bg_now < {}", b.as_microsecond())
            });
            format!("@bg_now >= {}{before}", c.earliest.as_microsecond())
        },
    );
    let (behind_count, behind_rows) = match req.catch_up_from {
        Some(from) => {
            let unf = unfinished_from(&j, &ts(from), Some(&s), "@bg_now");
            (
                format!("SELECT COUNT(*) INTO @bg_behind {unf};\n"),
                format!("SELECT 'u', {UNFINISHED_COLUMNS} {unf} AND @bg_clock;\n"),
            )
        }
        None => (String::new(), String::new()),
    };
    format!(
        "SET @bg_used = NULL, @bg_sstate = NULL, @bg_srun = NULL, @bg_lh = NULL, @bg_lr = NULL, \
  @bg_lf = NULL, @bg_lu = NULL, @bg_ls = NULL, @bg_f0 = NULL, @bg_behind = 0;
START TRANSACTION;
SELECT value INTO @bg_f0 FROM batchguard_fence WHERE id = 1 FOR UPDATE;
SET @bg_now = {NOW_US};
SET @bg_clock = {clock};
{behind_count}{behind_rows}SET @bg_gate = @bg_clock AND @bg_behind = 0;
SELECT attempts, state, run_id INTO @bg_used, @bg_sstate, @bg_srun FROM batchguard_slots
  WHERE job = {j} AND scheduled_at = {s} FOR UPDATE;
SELECT holder, run_id, fence, lease_until, state INTO @bg_lh, @bg_lr, @bg_lf, @bg_lu, @bg_ls
  FROM batchguard_leases WHERE `key` = {k} FOR UPDATE;
SET @bg_open = @bg_gate AND NOT (COALESCE(@bg_sstate, '') = 'succeeded' OR (COALESCE(@bg_sstate, '') = 'dead_lettered' AND NOT {manual}));
SET @bg_free = @bg_open AND (@bg_lu IS NULL OR @bg_lu <= @bg_now OR @bg_ls <> 'held');
SET @bg_exhausted = @bg_free AND {max} IS NOT NULL AND NOT {manual} AND COALESCE(@bg_used, 0) >= {max};
SET @bg_take = @bg_free AND NOT @bg_exhausted;
SET @bg_fence = IF(@bg_take, @bg_f0 + 1, NULL);
SET @bg_attempt = IF(@bg_take, COALESCE(@bg_used, 0) + 1, NULL);
UPDATE batchguard_fence SET value = @bg_fence WHERE id = 1 AND @bg_take;
UPDATE batchguard_leases SET job = {j}, scheduled_at = {s}, holder = {h}, run_id = {r}, fence = @bg_fence,
  acquired_at = @bg_now, lease_until = @bg_now + {ttl_us}, state = 'held'
  WHERE `key` = {k} AND @bg_take;
INSERT INTO batchguard_leases (`key`, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until, state)
  SELECT {k}, {j}, {s}, {h}, {r}, @bg_fence, @bg_now, @bg_now + {ttl_us}, 'held' FROM DUAL
  WHERE @bg_take AND @bg_lu IS NULL;
UPDATE batchguard_slots SET attempts = attempts + 1, state = 'running', run_id = {r}
  WHERE job = {j} AND scheduled_at = {s} AND @bg_take;
INSERT INTO batchguard_slots (job, scheduled_at, attempts, state, run_id)
  SELECT {j}, {s}, 1, 'running', {r} FROM DUAL WHERE @bg_take AND @bg_used IS NULL;
UPDATE batchguard_slots SET state = 'dead_lettered', run_id = {r}
  WHERE job = {j} AND scheduled_at = {s} AND @bg_exhausted;
INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT {r}, {j}, {s}, 'start', {at}, {inst}, @bg_attempt, {status}, {code}, {digest}, {trig}, @bg_fence, {detail}
  FROM DUAL WHERE @bg_take AND {ledger};
INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT {r}, {j}, {s}, 'dead_letter', {at}, {inst}, NULLIF(COALESCE(@bg_used, 0), 0), NULL, 'ATTEMPTS_EXHAUSTED', NULL, {trig}, NULL,
    CONCAT('all ', COALESCE(@bg_used, 0), ' attempts were used; the last one never reported an end')
  FROM DUAL WHERE @bg_exhausted AND {ledger};
COMMIT;
SELECT CAST(@bg_take AS CHAR), CAST(@bg_exhausted AS CHAR), CAST(@bg_fence AS CHAR), CAST(@bg_attempt AS CHAR),
  CAST(@bg_lh AS CHAR), CAST(@bg_lr AS CHAR), CAST(@bg_lf AS CHAR), CAST(@bg_lu AS CHAR),
  CAST(@bg_sstate AS CHAR), CAST(@bg_srun AS CHAR), CAST(@bg_used AS CHAR), CAST(@bg_clock AS CHAR),
  CAST(@bg_behind AS CHAR), CAST(@bg_now AS CHAR)",
        status = lit_opt(st.status.as_deref()),
        code = lit_opt(st.error_code.as_deref()),
        digest = lit_opt(st.snapshot_digest.as_deref()),
        detail = lit_opt(st.detail.as_deref().map(super::super::clip_detail).as_deref()),
    )
}

/// `INSERT … SELECT` statements of outputs (a thousand rows each), each written only when
/// `when` (an SQL condition) holds.
pub(super) fn outputs_inserts(
    j: &str,
    s: &str,
    r: &str,
    outputs: &[OutputRow],
    when: &str,
) -> Vec<String> {
    outputs
        .chunks(1000)
        .map(|chunk| {
            let rows: Vec<String> = chunk
                .iter()
                .map(|o| format!("SELECT {} AS k, {} AS a", lit(&o.key), ts(o.at)))
                .collect();
            format!(
                "INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at)
  SELECT {j}, {s}, {r}, v.k, v.a FROM ({}) AS v WHERE {when}",
                rows.join(" UNION ALL ")
            )
        })
        .collect()
}

/// An `outputs_inserts` condition: the row's key (`v.k`) was not claimed by run `r` (its
/// claim wrote its output row, SPEC 7.5).
pub(super) fn unclaimed(j: &str, r: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM batchguard_claims c WHERE c.job = {j} \
         AND c.key_digest = UNHEX(SHA2(v.k, 256)) AND c.run_id = {r})"
    )
}

/// The name of a run's lock (item 23): one per run id and database, within `GET_LOCK`'s
/// 64 characters however long the run id.
fn run_lock(r: &str) -> String {
    format!("CONCAT('batchguard:end:', MD5(CONCAT(COALESCE(DATABASE(), ''), ':', {r})))")
}

/// Takes the run's lock, outside any transaction; already held by this session (a packet
/// sent again after a deadlock) it is not taken twice, so one release frees it.
fn take_run_lock(r: &str) -> String {
    let name = run_lock(r);
    format!(
        "SET @bg_lk = IF(IS_USED_LOCK({name}) <=> CONNECTION_ID(), 1, GET_LOCK({name}, {RUN_LOCK_WAIT_SECS}))"
    )
}

/// Frees the run's lock (after the `COMMIT`, so whoever takes it next sees what was
/// written); also what a failed write sends, so the session does not keep it.
pub(super) fn release_run_lock(run_id: &str) -> String {
    format!("DO RELEASE_LOCK({})", run_lock(&lit(run_id)))
}

/// Item 23: a run's `end` is written once, however many processes flush it at once. The
/// writes of a batch with an `end` are made under the run's `GET_LOCK`, taken before the
/// transaction starts and released after its `COMMIT`; the check for the run's `end` is
/// the transaction's first consistent read (`SELECT … INTO`, which takes no lock), and
/// under REPEATABLE READ InnoDB takes a transaction's snapshot at its first consistent
/// read, not at `START TRANSACTION`: so the snapshot is taken after the lock was granted,
/// after the previous holder committed, and sees that holder's `end`. (A check-then-insert
/// without the lock is what wrote one finish four times; a `SET @v = (SELECT …)` would
/// take shared gap locks that concurrent inserts deadlock on.) Nothing of the batch is
/// written unless `@bg_lk` is 1: a lock not granted in time is answered as such.
fn once_per_run(r: &str) -> [String; 3] {
    [
        take_run_lock(r),
        "START TRANSACTION".to_owned(),
        format!(
            "SELECT EXISTS (SELECT 1 FROM batchguard_events WHERE run_id = {r} AND event = 'end') INTO @bg_done"
        ),
    ]
}

/// A ledger batch (a `--ledger` apart from the store): events in their order (`id` keeps
/// it), then outputs; once per run id when it has an `end` (see [`once_per_run`]). Answers
/// one row: whether the lock was granted, and the clock.
pub(super) fn batch_statements(
    job: &str,
    scheduled_at: Timestamp,
    run_id: &str,
    events: &[EventRow],
    outputs: &[OutputRow],
    once: bool,
) -> Vec<String> {
    let (j, s, r) = (lit(job), ts(scheduled_at), lit(run_id));
    let mut out = Vec::new();
    if once {
        out.extend(once_per_run(&r));
    } else {
        out.push("SET @bg_lk = 1, @bg_done = FALSE".to_owned());
        out.push("START TRANSACTION".to_owned());
    }
    out.push("SET @bg_go = (@bg_lk = 1 AND NOT @bg_done)".to_owned());
    for ev in events {
        out.push(format!(
            "INSERT INTO batchguard_events ({EVENT_COLUMNS}) SELECT {} FROM DUAL WHERE @bg_go",
            event_values(ev)
        ));
    }
    out.extend(outputs_inserts(&j, &s, &r, outputs, "@bg_go"));
    out.push("COMMIT".to_owned());
    if once {
        out.push(release_run_lock(run_id));
    }
    out.push(format!(
        "SELECT CAST(@bg_lk AS CHAR), CAST({NOW_US} AS CHAR)"
    ));
    out
}

/// The finish: the ledger writes (when the store is the ledger), the slot's state and the
/// release, in one transaction, once per run id (see [`once_per_run`]).
///
/// Item 24: the slot's row is read with a lock (`FOR UPDATE`, the acquire's order: the
/// slot, then the lease), so no acquire moves it meanwhile; when it names another run,
/// a newer holder took the slot after this run's lease ended: this run's `end` has status
/// `superseded`, naming that run and its fence; no dead letter, the slot's state and the
/// lease are left to the newer holder. Its outputs are still recorded: they were applied,
/// and `audit` must see a double apply. Item 28: `end` is inserted before `dead_letter`,
/// so `id` orders them so.
///
/// Answers one row: lock granted, `end` already written, superseded, the slot's run, its
/// fence, the clock.
pub(super) fn finish_statements(fin: &Finish) -> Vec<String> {
    let state = if fin.dead_letter.is_some() {
        SlotState::DeadLettered
    } else {
        fin.state
    };
    let (j, s, r, k) = (
        lit(&fin.job),
        ts(fin.scheduled_at),
        lit(&fin.run_id),
        lit(&fin.key),
    );
    let mut stmts = Vec::new();
    if fin.ledger {
        stmts.extend(once_per_run(&r));
    } else {
        // The ledger is apart: there is no `end` here to find; the slot's update and the
        // release are idempotent.
        stmts.push(take_run_lock(&r));
        stmts.push("START TRANSACTION".to_owned());
        stmts.push("SET @bg_done = FALSE".to_owned());
    }
    stmts.push("SET @bg_srun = NULL, @bg_nf = NULL".to_owned());
    stmts.push(format!(
        "SELECT run_id INTO @bg_srun FROM batchguard_slots WHERE job = {j} AND scheduled_at = {s} FOR UPDATE"
    ));
    stmts.push(format!(
        "SELECT fence INTO @bg_nf FROM batchguard_leases \
         WHERE `key` = {k} AND run_id = @bg_srun AND @bg_srun <> {r} FOR UPDATE"
    ));
    stmts.push(format!(
        "SET @bg_sup = (@bg_lk = 1 AND NOT @bg_done AND @bg_srun IS NOT NULL AND @bg_srun <> {r})"
    ));
    stmts.push("SET @bg_go = (@bg_lk = 1 AND NOT @bg_done AND NOT @bg_sup)".to_owned());
    if fin.ledger {
        let sup = fin.superseded_end("", None);
        stmts.push(format!(
            "INSERT INTO batchguard_events ({EVENT_COLUMNS}) SELECT {} FROM DUAL WHERE @bg_sup",
            event_values_with(
                &sup,
                "CONCAT('superseded by run ', @bg_srun, IF(@bg_nf IS NULL, '', CONCAT(' (fence ', @bg_nf, ')')))"
            )
        ));
        let mut events = vec![&fin.end];
        events.extend(fin.dead_letter.as_ref());
        for ev in events {
            stmts.push(format!(
                "INSERT INTO batchguard_events ({EVENT_COLUMNS}) SELECT {} FROM DUAL WHERE @bg_go",
                event_values(ev)
            ));
        }
        stmts.extend(outputs_inserts(
            &j,
            &s,
            &r,
            &fin.outputs,
            &format!("(@bg_go OR @bg_sup) AND {}", unclaimed(&j, &r)),
        ));
    }
    stmts.push(format!(
        "UPDATE batchguard_slots SET state = '{st}' WHERE job = {j} AND scheduled_at = {s} \
         AND run_id = {r} AND @bg_go",
        st = state.as_str()
    ));
    stmts.push(format!(
        "UPDATE batchguard_leases SET state = 'released', lease_until = LEAST(lease_until, {NOW_US}) \
         WHERE `key` = {k} AND fence = {} AND @bg_go",
        fin.fence
    ));
    stmts.push("COMMIT".to_owned());
    stmts.push(release_run_lock(&fin.run_id));
    stmts.push(format!(
        "SELECT CAST(@bg_lk AS CHAR), CAST(@bg_done AS CHAR), CAST(@bg_sup AS CHAR), @bg_srun, \
         CAST(@bg_nf AS CHAR), CAST({NOW_US} AS CHAR)"
    ));
    stmts
}

/// Statements joined into as few packets as fit [`MAX_PACKET`] (one, unless a run applied
/// hundreds of thousands of outputs).
pub(super) fn packets(stmts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for st in stmts {
        if !cur.is_empty() && cur.len() + st.len() + 2 > MAX_PACKET {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push_str(";\n");
        }
        cur.push_str(&st);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_hex_and_nul_is_replaced() {
        assert_eq!(lit("a'b"), "_utf8mb4 X'612762'");
        assert_eq!(lit(""), "_utf8mb4 X''");
        assert_eq!(lit("\0"), "_utf8mb4 X'EFBFBD'");
    }

    #[test]
    fn ledger_times_have_six_fractional_digits() {
        let t: Timestamp = "2026-03-01T02:00:00Z".parse().unwrap();
        assert_eq!(text_time(t), "2026-03-01T02:00:00.000000Z");
        let t: Timestamp = "2026-03-01T02:00:00.5+09:00".parse().unwrap();
        assert_eq!(text_time(t), "2026-02-28T17:00:00.500000Z");
    }

    #[test]
    fn a_long_finish_is_split_into_packets() {
        let p = packets(vec![
            "a".repeat(MAX_PACKET - 10),
            "b".repeat(100),
            "c".into(),
        ]);
        assert_eq!(p.len(), 2);
        assert!(p[1].starts_with('b') && p[1].ends_with(";\nc"));
    }
}
