// A naive settlement job, the kind the drill exists to catch: it applies every payment
// of its input every time it runs, and never looks at its fencing token. One run is
// correct; a rerun, a crash recovery, a retry or a stale holder settles payments twice.
//
// Usage: node settle-naive.js --input SNAPSHOT.jsonl
"use strict";
const fs = require("fs");
const path = require("path");

const input = process.argv[process.argv.indexOf("--input") + 1] || process.env.BATCHGUARD_SNAPSHOT;
const state = process.env.BATCHGUARD_SANDBOX || path.join(process.cwd(), "state");
fs.mkdirSync(state, { recursive: true });
const ledger = path.join(state, "settled.log");
const outputs = process.env.BATCHGUARD_OUTPUTS;

let n = 0;
for (const line of fs.readFileSync(input, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const payment = JSON.parse(line);
  fs.appendFileSync(ledger, `${payment.payment_id} ${payment.amount}\n`);
  if (outputs) fs.appendFileSync(outputs, payment.payment_id + "\n");
  n++;
}
console.log(`settled ${n} payments`);
