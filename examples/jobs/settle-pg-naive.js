// A settlement job whose state is PostgreSQL, with the mistake the drill's `stale`
// scenario exists to catch: it reads the list of settled payments once, then inserts
// every other payment of its input without looking at its fencing token. A rerun, a
// recovery after a crash and a retry are right (each reads the list afresh); a holder
// paused past its lease resumes with its old list and settles again what the instance
// that took over has settled meanwhile.
//
// Usage: node settle-pg-naive.js --input SNAPSHOT.jsonl
"use strict";
const fs = require("fs");
const { Psql, schema, lit, ident, payments, inputArg } = require("./pg.js");

async function main() {
  const input = inputArg();
  const s = ident(schema());
  const outputs = process.env.BATCHGUARD_OUTPUTS;
  const db = new Psql();
  try {
    const settled = new Set(await db.query(`SELECT payment_id FROM ${s}.settled`));
    let done = 0;
    for (const p of payments(input)) {
      const key = String(p.payment_id);
      if (settled.has(key)) continue;
      await db.query(`INSERT INTO ${s}.settled (payment_id, amount, fence)
        VALUES (${lit(key)}, ${Number(p.amount) || 0}, ${Number(process.env.BATCHGUARD_FENCE || "0")})`);
      if (outputs) fs.appendFileSync(outputs, key + "\n");
      done++;
    }
    console.log(`settled ${done} payments`);
  } finally {
    db.end();
  }
}

main().catch((e) => {
  console.error(`settle-pg-naive.js: ${e.message}`);
  process.exit(1);
});
