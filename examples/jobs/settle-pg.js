// A settlement job whose state is PostgreSQL, written to survive every drill scenario:
// each payment is settled by one statement that
//
// - raises the schema's `fence.last_fence` to this holder's fencing token
//   (BATCHGUARD_FENCE) only if no newer holder has written: a holder paused past its
//   lease, whose slot another instance has since taken, writes nothing and stops with
//   STALE_FENCE;
// - inserts the payment into `settled` (with its `processed_at`) only if it is not
//   there yet, so a rerun, a recovery after a crash or a retry is a no-op.
//
// It reports each payment it settled to BATCHGUARD_OUTPUTS, one key per line.
//
// Usage: node settle-pg.js --input SNAPSHOT.jsonl
"use strict";
const fs = require("fs");
const { Psql, schema, lit, ident, payments, inputArg } = require("./pg.js");

async function main() {
  const input = inputArg();
  const s = ident(schema());
  const fence = Number(process.env.BATCHGUARD_FENCE || "0");
  const outputs = process.env.BATCHGUARD_OUTPUTS;
  const db = new Psql();
  let done = 0;
  let skipped = 0;
  try {
    for (const p of payments(input)) {
      const key = String(p.payment_id);
      const [row] = await db.query(`WITH f AS (
          UPDATE ${s}.fence SET last_fence = ${fence} WHERE id = 1 AND last_fence <= ${fence} RETURNING 1),
        ins AS (
          INSERT INTO ${s}.settled (payment_id, amount, fence)
          SELECT ${lit(key)}, ${Number(p.amount) || 0}, ${fence}
          WHERE EXISTS (SELECT 1 FROM f)
            AND NOT EXISTS (SELECT 1 FROM ${s}.settled WHERE payment_id = ${lit(key)})
          RETURNING 1)
        SELECT (SELECT count(*) FROM f) || '|' || (SELECT count(*) FROM ins)`);
      const [fenced, inserted] = row.split("|");
      if (fenced === "0") {
        console.error(`fence ${fence} is stale (a newer holder took the slot): stopping without writing`);
        if (process.env.BATCHGUARD_ERROR) fs.writeFileSync(process.env.BATCHGUARD_ERROR, "STALE_FENCE\n");
        process.exitCode = 1;
        return;
      }
      if (inserted === "1") {
        if (outputs) fs.appendFileSync(outputs, key + "\n");
        done++;
      } else {
        skipped++;
      }
    }
    console.log(`settled ${done} payments, ${skipped} already settled (fence ${fence})`);
  } finally {
    db.end();
  }
}

main().catch((e) => {
  console.error(`settle-pg.js: ${e.message}`);
  process.exit(1);
});
