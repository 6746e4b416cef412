"use strict";
// One slot's work: settle every invoice due by the slot, fenced. The UPDATE takes a row
// only while its last_fence is below this attempt's fencing token, so a holder whose lease
// expired (paused by GC, a stalled disk, a network partition) can no longer write once a
// newer holder has: its fence is lower, and its UPDATE matches nothing.

/** Creates the table this example settles (idempotent). */
async function migrate(db) {
  await db.query(`
    CREATE TABLE IF NOT EXISTS invoices (
      id          bigint PRIMARY KEY,
      due_at      timestamptz NOT NULL,
      settled_at  timestamptz,
      settled_by  text,
      last_fence  bigint NOT NULL DEFAULT 0
    )`);
}

/**
 * Settles the invoices due at or before `run.slot` and records each one as an output.
 * A fence is a 64-bit integer: it goes to PostgreSQL as a string, never as a JS number.
 */
async function settleInvoices(db, run) {
  const { rows } = await db.query(
    `UPDATE invoices
        SET settled_at = now(), settled_by = $3, last_fence = $1
      WHERE settled_at IS NULL AND due_at <= $2 AND last_fence < $1
      RETURNING id`,
    [run.fence.toString(), run.slot, run.runId],
  );
  for (const { id } of rows) {
    await run.output(`invoice-${id}`);
  }
  return rows.length;
}

module.exports = { migrate, settleInvoices };
