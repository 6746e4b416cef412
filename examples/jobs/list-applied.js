// `replay.verify` of settle-idempotent.js: prints the key of every payment really applied
// in the state directory (BATCHGUARD_SANDBOX, else ./state), one per line. The drill counts
// these instead of the reported outputs, so a crash between applying a payment and
// reporting it does not look like a missing payment.
"use strict";
const fs = require("fs");
const path = require("path");

const state = process.env.BATCHGUARD_SANDBOX || path.join(process.cwd(), "state");
let names = [];
try {
  names = fs.readdirSync(path.join(state, "applied"));
} catch (e) {
  if (e.code !== "ENOENT") throw e;
}
const out = names.map((n) => Buffer.from(n, "hex").toString()).join("\n");
process.stdout.write(out ? out + "\n" : "");
