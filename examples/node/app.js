"use strict";
// The incident's app, fixed. It schedules its job in-process with node-cron and runs as a
// PM2 cluster of 4 (ecosystem.config.js): every instance ticks, so before batchguard every
// invoice was billed four times. Now each tick goes through guarded(): one instance works
// the slot under the store's lease and fencing token, the others skip and say who held it,
// and the ledger records every start, end and skip for `batchguard audit`.
//
// The store comes from BATCHGUARD_STORE (PostgreSQL here, Redis with a ledger works too);
// BATCHGUARD_LEDGER names a separate ledger when the store has none (Redis).

const path = require("node:path");
const cron = require("node-cron");
const { Pool } = require("pg");
const { guarded } = require("batchguard");
const { settleInvoices } = require("./settle");

const db = new Pool({ connectionString: process.env.BILLING_DATABASE_URL, max: 2 });

const settle = guarded(
  {
    manifest: path.join(__dirname, "billing.batchguard.yaml"),
    job: "settle-invoices",
    ledger: process.env.BATCHGUARD_LEDGER,
  },
  async (run) => {
    const settled = await settleInvoices(db, run);
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
