//! The PostgreSQL store's statements, written as text: values are SQL literals ([`lit`]),
//! so each operation is one simple-protocol message (see the parent module for why).

use crate::store::ledger::Batch;
use crate::store::{AcquireRequest, EventRow, Finish, OutputRow, SlotState, rfc3339};
use jiff::Timestamp;

/// A text value as a SQL literal: `E'…'` with `\` and `'` escaped, so no setting of the
/// server changes its meaning. NUL (which `text` cannot hold) becomes U+FFFD.
pub fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    out.push_str("E'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

pub(super) fn lit_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "NULL::text".to_owned(), lit)
}

pub(super) fn ts(t: Timestamp) -> String {
    format!("'{}'::timestamptz", rfc3339(t))
}

/// Epoch microseconds of a timestamptz expression, as text.
pub(super) fn us(expr: &str) -> String {
    format!("(floor(extract(epoch from {expr}) * 1000000))::bigint::text")
}

pub(super) fn int_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "NULL::integer".to_owned(), |v| v.to_string())
}

pub(super) const EVENT_COLUMNS: &str = "run_id, job, scheduled_at, event, at, instance, attempt, status, \
    error_code, snapshot_digest, \"trigger\", fence, detail";

/// One event's values, in [`EVENT_COLUMNS`] order.
pub(super) fn event_values(ev: &EventRow) -> String {
    format!(
        "{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}",
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
        ev.fence
            .map_or_else(|| "NULL::bigint".to_owned(), |f| f.to_string()),
        lit_opt(
            ev.detail
                .as_deref()
                .map(crate::store::clip_detail)
                .as_deref()
        ),
    )
}

/// The lease row's columns an acquire sets, each kept when the lease is not free.
pub(super) const LEASE_COLUMNS: [&str; 8] = [
    "job",
    "scheduled_at",
    "holder",
    "run_id",
    "fence",
    "acquired_at",
    "lease_until",
    "state",
];

/// The acquire: two statements in one `Query` message, so one round trip and one
/// transaction (the simple protocol runs a message's statements as one). The first reads
/// the slot, upserts the lease when it is free in database time, counts the attempt (or,
/// when every attempt is used, dead-letters the slot), and answers with what it found. The
/// second gives the lease this run won its fence from the sequence and writes `start`:
/// only a granted lease draws a number, so fences are consecutive however many processes
/// contend (a `nextval` in the upsert's row would be drawn by every contender).
///
/// The upsert always takes the `DO UPDATE` branch on a conflict, writing the row back
/// unchanged when the lease is not free: so `RETURNING` names the holder that won, even one
/// whose row this statement's snapshot cannot see (fifty contenders on a new slot all learn
/// who holds it). The freedom test reads the latest row version under its lock; the lease
/// row's `succeeded`/`dead_lettered` states make it see a finish that committed while this
/// statement waited.
pub(super) fn acquire_sql(req: &AcquireRequest) -> String {
    let (k, j, s, r) = (
        lit(&req.key),
        lit(&req.job),
        ts(req.scheduled_at),
        lit(&req.run_id),
    );
    let manual = if req.manual { "true" } else { "false" };
    let ttl = req.ttl_secs.min(100 * 365 * 86_400);
    let max = req.max_attempts.map_or_else(
        || "NULL::bigint".to_owned(),
        |m| m.min(i64::MAX as u64).to_string(),
    );
    let l = "batchguard_leases";
    let free = format!(
        "(({l}.lease_until <= now() OR {l}.state <> 'held') \
         AND NOT ({l}.job = EXCLUDED.job AND {l}.scheduled_at = EXCLUDED.scheduled_at \
         AND ({l}.state = 'succeeded' OR ({l}.state = 'dead_lettered' AND NOT {manual}))))"
    );
    let set: Vec<String> = LEASE_COLUMNS
        .iter()
        .map(|c| format!("{c} = CASE WHEN {free} THEN EXCLUDED.{c} ELSE {l}.{c} END"))
        .collect();
    let st = &req.start;
    let inst = lit_opt(st.instance.as_deref());
    let trig = lit(&st.trigger);
    // Items 22 and 27: the clock bound and the catch-up read ride on the acquire; either
    // one closes the gate, and the answer says which.
    let clock_ok = req.clock.map_or_else(
        || "true".to_owned(),
        |c| {
            let before = c
                .before
                .map_or_else(String::new, |b| format!(" AND now() < {}", ts(b)));
            format!("now() >= {}{before}", ts(c.earliest))
        },
    );
    let unf = match req.catch_up_from {
        Some(from) => format!(
            "SELECT u.scheduled_at, u.attempts, CASE WHEN u.state = 'running' THEN 'lost' ELSE u.state END AS st, u.run_id
  FROM batchguard_slots u WHERE u.job = {j} AND u.scheduled_at >= {from} AND u.scheduled_at < {s}
    AND (u.state IN ('failed', 'interrupted') OR (u.state = 'running' AND NOT EXISTS
      (SELECT 1 FROM batchguard_leases l WHERE l.run_id = u.run_id AND l.state = 'held' AND l.lease_until > now())))",
            from = ts(from)
        ),
        None => "SELECT NULL::timestamptz AS scheduled_at, NULL::integer AS attempts, NULL::text AS st, NULL::text AS run_id WHERE false".to_owned(),
    };
    format!(
        "WITH slot AS (
  SELECT attempts, state, run_id FROM batchguard_slots WHERE job = {j} AND scheduled_at = {s}
), unf AS (
  {unf}
), clk AS (
  SELECT ({clock_ok}) AS ok
), gate AS (
  SELECT NOT EXISTS (SELECT 1 FROM slot WHERE state = 'succeeded' OR (state = 'dead_lettered' AND NOT {manual}))
           AND (SELECT ok FROM clk) AND NOT EXISTS (SELECT 1 FROM unf) AS open,
         COALESCE((SELECT attempts FROM slot), 0) AS used
), lease AS (
  INSERT INTO {l} (key, job, scheduled_at, holder, run_id, fence, acquired_at, lease_until, state)
  SELECT {k}, {j}, {s}, {h}, {r}, 0, now(),
         CASE WHEN x.exhausted THEN now() ELSE now() + interval '{ttl} seconds' END,
         CASE WHEN x.exhausted THEN 'dead_lettered' ELSE 'held' END
  FROM (SELECT gate.open, ({max} IS NOT NULL AND NOT {manual} AND gate.used >= {max}) AS exhausted FROM gate) x
  WHERE x.open
  ON CONFLICT (key) DO UPDATE SET {set}
  RETURNING {l}.run_id = {r} AS won, holder, run_id, fence, state, lease_until
), slot_up AS (
  INSERT INTO batchguard_slots (job, scheduled_at, attempts, state, run_id)
  SELECT {j}, {s}, 1, 'running', {r} FROM lease WHERE lease.won AND lease.state = 'held'
  ON CONFLICT (job, scheduled_at) DO UPDATE SET attempts = batchguard_slots.attempts + 1,
    state = 'running', run_id = EXCLUDED.run_id
  RETURNING attempts
), slot_dl AS (
  UPDATE batchguard_slots SET state = 'dead_lettered', run_id = {r}
  WHERE job = {j} AND scheduled_at = {s}
    AND EXISTS (SELECT 1 FROM lease WHERE lease.won AND lease.state = 'dead_lettered')
  RETURNING attempts
), ev AS (
  INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT {r}, {j}, {s}, 'dead_letter', now(), {inst}, NULLIF(gate.used, 0), NULL::text, 'ATTEMPTS_EXHAUSTED', NULL::text, {trig}, NULL::bigint,
         'all ' || gate.used || ' attempts were used; the last one never reported an end'
  FROM lease, gate WHERE lease.won AND lease.state = 'dead_lettered' AND {ledger}
  RETURNING 1
)
SELECT (SELECT won::text FROM lease), (SELECT holder FROM lease), (SELECT run_id FROM lease),
       (SELECT fence::text FROM lease), (SELECT state FROM lease), (SELECT {until} FROM lease),
       (SELECT attempts::text FROM slot_up), (SELECT state FROM slot), (SELECT run_id FROM slot),
       (SELECT used::text FROM gate), (SELECT ok::text FROM clk), {now}
UNION ALL SELECT 'u', {unf_at}, attempts::text, st, run_id, NULL, NULL, NULL, NULL, NULL, NULL, {now} FROM unf;
WITH f AS (
  UPDATE {l} SET fence = nextval('batchguard_fence')
  WHERE key = {k} AND run_id = {r} AND state = 'held'
  RETURNING fence
), ev AS (
  INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT {r}, {j}, {s}, 'start', now(), {inst}, sl.attempts, {status}, {code}, {digest}, {trig}, f.fence, {detail}
  FROM f, batchguard_slots sl WHERE sl.job = {j} AND sl.scheduled_at = {s} AND {ledger}
)
SELECT (SELECT fence::text FROM f), {now}",
        h = lit(&req.holder),
        ledger = req.ledger,
        set = set.join(",\n    "),
        status = lit_opt(st.status.as_deref()),
        code = lit_opt(st.error_code.as_deref()),
        digest = lit_opt(st.snapshot_digest.as_deref()),
        detail = lit_opt(st.detail.as_deref().map(crate::store::clip_detail).as_deref()),
        until = us("lease_until"),
        now = us("now()"),
        unf_at = us("unf.scheduled_at"),
    )
}

/// The finish: one message, written once per run id (item 23). Its first statement takes
/// the run's advisory lock (held to the end of the message's implicit transaction), so of
/// two processes flushing one spooled finish the second waits, and its second statement,
/// with a snapshot of its own, then finds the first one's `end` and writes nothing.
///
/// A run that is no longer its slot's latest (item 24: another holder took the slot after
/// this one's lease expired) writes only its `end`, status `superseded`: the slot's update
/// is conditional on this run id under the row's lock, and when it matches nothing while
/// the slot exists, the attempt is superseded. Its outputs are still recorded: the job
/// applied them (most before its lease ended), and leaving them out would hide a double
/// apply from audit (docs/decisions.md). `end` and `dead_letter` go in one insert, in that
/// order (item 28).
pub(super) fn finish_sql(fin: &Finish) -> String {
    let (j, s, r) = (lit(&fin.job), ts(fin.scheduled_at), lit(&fin.run_id));
    let state = if fin.dead_letter.is_some() {
        SlotState::DeadLettered
    } else {
        fin.state
    };
    let lease_state = match state {
        SlotState::Succeeded => "succeeded",
        SlotState::DeadLettered => "dead_lettered",
        _ => "released",
    };
    let done = if fin.ledger {
        format!(
            "SELECT EXISTS (SELECT 1 FROM batchguard_events WHERE run_id = {r} AND event = 'end') AS d"
        )
    } else {
        // The ledger is elsewhere: settle the slot and release the lease only.
        "SELECT false AS d".to_owned()
    };
    let mut sql = format!(
        "SELECT count(*)::text FROM (SELECT pg_advisory_xact_lock(hashtextextended({r}, 0))) l;
WITH done AS (
  {done}
), slot AS (
  UPDATE batchguard_slots SET state = '{st}'
  WHERE job = {j} AND scheduled_at = {s} AND run_id = {r} AND NOT (SELECT d FROM done)
  RETURNING 1
), cur AS (
  SELECT run_id FROM batchguard_slots WHERE job = {j} AND scheduled_at = {s}
), sup AS (
  SELECT NOT (SELECT d FROM done) AND NOT EXISTS (SELECT 1 FROM slot) AND EXISTS (SELECT 1 FROM cur) AS s,
         (SELECT run_id FROM cur) AS newer,
         (SELECT NULLIF(l.fence, 0) FROM batchguard_leases l, cur WHERE l.run_id = cur.run_id AND cur.run_id <> {r} LIMIT 1) AS fence
), rel AS (
  UPDATE batchguard_leases SET state = '{lease_state}', lease_until = LEAST(lease_until, now())
  WHERE key = {k} AND fence = {f} AND NOT (SELECT d FROM done) AND NOT (SELECT s FROM sup)
)",
        st = state.as_str(),
        k = lit(&fin.key),
        f = fin.fence,
    );
    if fin.ledger {
        let end = &fin.end;
        let sup_detail = format!(
            "CASE WHEN sup.newer IS NOT NULL AND sup.newer <> {r} \
             THEN 'superseded by run ' || sup.newer || COALESCE(' (fence ' || sup.fence || ')', '') \
             ELSE 'superseded: the slot has a newer holder' END"
        );
        let end_row = format!(
            "SELECT 1 AS o, {run}, {job}, {sched}, 'end', {at}, {inst}, {att}, \
             CASE WHEN sup.s THEN 'superseded' ELSE {status} END, \
             CASE WHEN sup.s THEN NULL ELSE {code} END, {digest}, {trig}, \
             CASE WHEN sup.s THEN NULL ELSE {fence} END, \
             CASE WHEN sup.s THEN {sup_detail} ELSE {detail} END FROM sup",
            run = lit(&end.run_id),
            job = lit(&end.job),
            sched = ts(end.scheduled_at),
            at = ts(end.at),
            inst = lit_opt(end.instance.as_deref()),
            att = int_opt(end.attempt),
            status = lit_opt(end.status.as_deref()),
            code = lit_opt(end.error_code.as_deref()),
            digest = lit_opt(end.snapshot_digest.as_deref()),
            trig = lit(&end.trigger),
            fence = end
                .fence
                .map_or_else(|| "NULL::bigint".to_owned(), |f| f.to_string()),
            detail = lit_opt(
                end.detail
                    .as_deref()
                    .map(crate::store::clip_detail)
                    .as_deref()
            ),
        );
        let dl_row = fin.dead_letter.as_ref().map_or_else(String::new, |dl| {
            format!(
                "\n  UNION ALL SELECT 2, {} FROM sup WHERE NOT sup.s",
                event_values(dl)
            )
        });
        sql.push_str(&format!(
            ", evs AS (
  INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT v.run_id, v.job, v.scheduled_at, v.event, v.at, v.instance, v.attempt, v.status, v.error_code,
         v.snapshot_digest, v.\"trigger\", v.fence, v.detail
  FROM ({end_row}{dl_row}) AS v(o, {EVENT_COLUMNS}), done WHERE NOT done.d ORDER BY v.o
)"
        ));
        if !fin.outputs.is_empty() {
            sql.push_str(&format!(
                ", outs AS ({})",
                outputs_insert(&j, &s, &r, &fin.outputs, true)
            ));
        }
    }
    sql.push_str(&format!(
        "\nSELECT (SELECT d FROM done)::text, (SELECT s FROM sup)::text, (SELECT newer FROM sup), \
         (SELECT fence::text FROM sup), {}",
        us("now()")
    ));
    sql
}

/// A ledger batch: one message, the events and outputs of one run, events in their order;
/// a batch with an `end` is written once per run id, under the run's advisory lock as a
/// finish is (item 23).
pub(super) fn batch_sql(b: &Batch) -> String {
    let (j, s, r) = (lit(&b.job), ts(b.scheduled_at), lit(&b.run_id));
    let mut sql = String::new();
    let done = if b.has_end() {
        sql.push_str(&format!(
            "SELECT count(*)::text FROM (SELECT pg_advisory_xact_lock(hashtextextended({r}, 0))) l;\n"
        ));
        format!(
            "SELECT EXISTS (SELECT 1 FROM batchguard_events WHERE run_id = {r} AND event = 'end') AS d"
        )
    } else {
        "SELECT false AS d".to_owned()
    };
    sql.push_str(&format!("WITH done AS ({done})"));
    if !b.events.is_empty() {
        let rows: Vec<String> = b
            .events
            .iter()
            .enumerate()
            .map(|(i, ev)| format!("SELECT {i} AS o, {}", event_values(ev)))
            .collect();
        sql.push_str(&format!(
            ", evs AS (INSERT INTO batchguard_events ({EVENT_COLUMNS})
  SELECT v.run_id, v.job, v.scheduled_at, v.event, v.at, v.instance, v.attempt, v.status, v.error_code,
         v.snapshot_digest, v.\"trigger\", v.fence, v.detail
  FROM ({}) AS v(o, {EVENT_COLUMNS}), done WHERE NOT done.d ORDER BY v.o)",
            rows.join(" UNION ALL ")
        ));
    }
    if !b.outputs.is_empty() {
        sql.push_str(&format!(
            ", outs AS ({})",
            outputs_insert(&j, &s, &r, &b.outputs, false)
        ));
    }
    sql.push_str(&format!(" SELECT {}", us("now()")));
    sql
}

/// `INSERT … SELECT` of outputs, guarded by the `done` CTE of the statement it is part of.
/// With `claims` (the store's own tables), a key this run already claimed is left out: its
/// claim wrote its output row (SPEC 7.5).
pub(super) fn outputs_insert(
    j: &str,
    s: &str,
    r: &str,
    outputs: &[OutputRow],
    claims: bool,
) -> String {
    let rows: Vec<String> = outputs
        .iter()
        .map(|o| format!("({}, {})", lit(&o.key), ts(o.at)))
        .collect();
    let unclaimed = if claims {
        format!(
            " AND NOT EXISTS (SELECT 1 FROM batchguard_claims c WHERE c.job = {j} AND c.output_key = v.k AND c.run_id = {r})"
        )
    } else {
        String::new()
    };
    format!(
        "INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at)
  SELECT {j}, {s}, {r}, v.k, v.a FROM (VALUES {}) AS v(k, a), done WHERE NOT done.d{unclaimed}",
        rows.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::lit;

    #[test]
    fn literals_escape_quotes_backslashes_and_nul() {
        assert_eq!(lit("a'b"), "E'a''b'");
        assert_eq!(
            lit("a\\'; DROP TABLE x; --"),
            "E'a\\\\''; DROP TABLE x; --'"
        );
        assert_eq!(lit("x\0y"), "E'x\u{fffd}y'");
    }
}
