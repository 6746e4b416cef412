#!/usr/bin/env node
"use strict";
// `npx batchguard …`: runs the binary with the same arguments, stdio and exit status.
// Stop signals are passed on (a deploy's TERM must reach `batchguard run`, which then
// stops its command and records INTERRUPTED), and the shim exits as the binary did.

const { spawn } = require("node:child_process");
const { binaryPath } = require("../lib/binary.js");

let bin;
try {
  bin = binaryPath();
} catch (err) {
  process.stderr.write(`error: ${err.message}\n`);
  process.exit(125);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
const forward = (signal) => child.kill(signal);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, forward);
child.on("error", (err) => {
  process.stderr.write(`error: cannot run ${bin}: ${err.message}\n`);
  process.exit(125);
});
child.on("exit", (code, signal) => {
  if (signal) {
    for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.removeListener(s, forward);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
