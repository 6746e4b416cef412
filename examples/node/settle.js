"use strict";
// One slot's work: settle every invoice due by the slot, each exactly once.
//
// Settling an invoice is a charge (a row in `payments`, which nothing else deduplicates, as
// a payment provider's ledger would not) and the invoice marked settled. A lock alone does
// not make that exactly once: a holder killed after its COMMIT and before it told anyone
// leaves the slot to a catch-up, which reads the invoice list again and, with its newer
// fence, charges again. So each invoice is one transaction that claims it first:
//
//   BEGIN
//   SELECT batchguard_claim(job, 'invoice-ID', run_id, fence)   -- run.claim(key, tx)
//     false: claimed before (by any run): ROLLBACK, skip it
//     error: this run is no longer its slot's latest holder: ROLLBACK, stop (E_CLAIM_REFUSED)
//   INSERT INTO payments …; UPDATE invoices …
//   COMMIT                                                       -- claim and write together
//
// The claim is the output row `batchguard audit` reads, written in the same transaction as
// the charge: both commit, or neither does. That needs the claim to live in the database of
// the data, i.e. the store is this database (BATCHGUARD_STORE = BILLING_DATABASE_URL). With
// the store elsewhere (Redis, another database) the claim is a round trip of its own
// (`run.claim(key)`), made last inside the open transaction: a crash between its answer and
// the COMMIT loses that one invoice's charge with its claim recorded (docs/exactly-once.md).

/** Creates the tables this example settles (idempotent). */
async function migrate(db) {
  await db.query(`
    CREATE TABLE IF NOT EXISTS invoices (
      id          bigint PRIMARY KEY,
      due_at      timestamptz NOT NULL,
      amount      bigint NOT NULL DEFAULT 100,
      settled_at  timestamptz,
      settled_by  text
    )`);
  await db.query(`
    CREATE TABLE IF NOT EXISTS payments (
      id          bigserial PRIMARY KEY,
      invoice_id  bigint NOT NULL,
      amount      bigint NOT NULL,
      run_id      text NOT NULL,
      at          timestamptz NOT NULL DEFAULT now()
    )`);
}

/**
 * Settles the invoices due at or before `run.slot`. `pool` is a pg Pool; each invoice takes
 * one of its clients for its transaction. `claimIn`: "transaction" (the store is this
 * database: `run.claim(key, client)`) or "store" (`run.claim(key)`, a round trip of its own).
 * Returns how many invoices this run settled.
 */
async function settleInvoices(pool, run, { claimIn = "transaction" } = {}) {
  // The list is a hint, not the guard: another holder may settle an invoice between this
  // read and its transaction. The claim is the guard.
  const { rows: due } = await pool.query(
    "SELECT id, amount FROM invoices WHERE settled_at IS NULL AND due_at <= $1 ORDER BY id",
    [run.slot],
  );
  let settled = 0;
  const tx = await pool.connect();
  try {
    for (const invoice of due) {
      run.signal.throwIfAborted();
      const key = `invoice-${invoice.id}`;
      await tx.query("BEGIN");
      try {
        let first = claimIn === "transaction" ? await run.claim(key, tx) : true;
        if (first) {
          await tx.query("INSERT INTO payments (invoice_id, amount, run_id) VALUES ($1, $2, $3)", [
            invoice.id,
            invoice.amount,
            run.runId,
          ]);
          await tx.query("UPDATE invoices SET settled_at = now(), settled_by = $2 WHERE id = $1", [invoice.id, run.runId]);
          if (claimIn !== "transaction") first = await run.claim(key);
        }
        if (first) {
          await tx.query("COMMIT");
          settled++;
        } else {
          await tx.query("ROLLBACK"); // claimed before: settled by an earlier run
        }
      } catch (err) {
        await tx.query("ROLLBACK").catch(() => {});
        throw err; // E_CLAIM_REFUSED: a newer holder has the slot; stop writing
      }
    }
  } finally {
    tx.release();
  }
  return settled;
}

module.exports = { migrate, settleInvoices };
