"use strict";
// The incident's app, fixed. It schedules its job in-process with node-cron and runs as a
// PM2 cluster of 4 (ecosystem.config.js): every instance ticks, so before batchguard every
// invoice was billed four times. Now each tick goes through guarded(): one instance works
// the slot under the store's lease and fencing token, the others skip and say who held it,
// and the ledger records every start, end and skip for `batchguard audit`.
//
// Each invoice is settled exactly once (settle.js): claimed with run.claim(invoiceId, tx)
// inside the transaction that charges it, so a holder killed after its COMMIT leaves nothing
// for the catch-up to charge again, and the ledger's outputs are the invoices charged.
//
// The store comes from BATCHGUARD_STORE (PostgreSQL here, Redis with a ledger works too);
// BATCHGUARD_LEDGER names a separate ledger when the store has none (Redis). The claim goes
// into the invoices' transaction when the store is the invoices' database; otherwise it is
// a round trip of its own (docs/exactly-once.md says what that leaves open).

const path = require("node:path");
const cron = require("node-cron");
const { Pool } = require("pg");
const { guarded } = require("batchguard");
const { settleInvoices } = require("./settle");

const db = new Pool({ connectionString: process.env.BILLING_DATABASE_URL, max: 3 });
const claimIn = process.env.BATCHGUARD_STORE === process.env.BILLING_DATABASE_URL ? "transaction" : "store";

const settle = guarded(
  {
    manifest: path.join(__dirname, "billing.batchguard.yaml"),
    job: "settle-invoices",
    ledger: process.env.BATCHGUARD_LEDGER,
  },
  async (run) => {
    const settled = await settleInvoices(db, run, { claimIn });
    console.log(`settle-invoices ${run.slot.toISOString()}: ${settled} settled (attempt ${run.attempt}, fence ${run.fence})`);
  },
);

// node-cron 4 hands the task a context whose `date` is the tick: guarded() passes it on as
// the slot, so all four instances name the same slot.
cron.schedule(
  "*/5 * * * *",
  async (context) => {
    const result = await settle(context);
    if (result.status === "skipped") console.log(`settle-invoices: skipped, ${result.reason}`);
    if (result.status === "failed" || result.status === "dead_lettered") {
      console.error(`settle-invoices ${result.slot.toISOString()}: ${result.status} (${result.code})`);
    }
  },
  { name: "settle-invoices" },
);

// PM2 stops an instance with SIGINT: close the pool once the guard has let go.
process.once("SIGINT", () => {
  cron.getTasks().forEach((task) => task.stop());
  db.end().finally(() => process.exit(0));
});
