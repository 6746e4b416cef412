// An idempotent settlement job for `batchguard run` and `batchguard drill`, no npm
// dependencies. It settles every payment of its input snapshot exactly once, however often
// it is run, crashed, retried or run twice at once:
//
// - Each payment is applied by creating `applied/<hex key>` with O_EXCL (`wx`): the
//   filesystem's atomic create is this job's unique constraint, so a second application is
//   a no-op whatever the timing (like `INSERT … ON CONFLICT DO NOTHING`).
// - Before each write it compares its fencing token (BATCHGUARD_FENCE) with the highest
//   one seen (`fence`): a holder paused past its lease, whose slot another instance has
//   since taken, stops instead of writing (like `UPDATE … WHERE last_fence < $FENCE`).
// - It reports each payment it applied to BATCHGUARD_OUTPUTS, one key per line.
//
// State lives in BATCHGUARD_SANDBOX under a drill, else in ./state.
//
// Usage: node settle-idempotent.js --input SNAPSHOT.jsonl
"use strict";
const fs = require("fs");
const path = require("path");

const input = process.argv[process.argv.indexOf("--input") + 1] || process.env.BATCHGUARD_SNAPSHOT;
if (!input) {
  console.error("usage: settle-idempotent.js --input SNAPSHOT.jsonl");
  process.exit(2);
}
const state = process.env.BATCHGUARD_SANDBOX || path.join(process.cwd(), "state");
const applied = path.join(state, "applied");
fs.mkdirSync(applied, { recursive: true });
const fenceFile = path.join(state, "fence");
const fence = Number(process.env.BATCHGUARD_FENCE || "0");
const outputs = process.env.BATCHGUARD_OUTPUTS;

function highestFence() {
  try {
    return Number(fs.readFileSync(fenceFile, "utf8")) || 0;
  } catch {
    return 0;
  }
}

function refuseStale() {
  const seen = highestFence();
  if (seen > fence) {
    console.error(`fence ${fence} is stale (fence ${seen} took the slot): stopping without writing`);
    if (process.env.BATCHGUARD_ERROR) fs.writeFileSync(process.env.BATCHGUARD_ERROR, "STALE_FENCE\n");
    process.exit(1);
  }
}

refuseStale();
// Record this holder's fence (write then rename: a reader never sees half a number).
fs.writeFileSync(fenceFile + ".tmp" + process.pid, String(fence));
fs.renameSync(fenceFile + ".tmp" + process.pid, fenceFile);

let done = 0;
let skipped = 0;
for (const line of fs.readFileSync(input, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const payment = JSON.parse(line);
  const key = String(payment.payment_id);
  refuseStale();
  let fd;
  try {
    fd = fs.openSync(path.join(applied, Buffer.from(key).toString("hex")), "wx");
  } catch (e) {
    if (e.code === "EEXIST") {
      skipped++;
      continue;
    }
    throw e;
  }
  fs.writeSync(fd, JSON.stringify({ key, amount: payment.amount, fence }) + "\n");
  fs.closeSync(fd);
  if (outputs) fs.appendFileSync(outputs, key + "\n");
  done++;
}
console.log(`settled ${done} payments, ${skipped} already settled (fence ${fence})`);
