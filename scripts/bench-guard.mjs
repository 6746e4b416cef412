#!/usr/bin/env node
// The in-process guard's overhead per tick: guard() on a fresh slot (spawn `batchguard run
// --link`, acquire, callback, end, release, result) against the bare callback, and
// `batchguard run -- true` for reference, interleaved, on a SQLite store in a scratch folder.
// Prints the median and p95 of each side by side (the table in docs/benchmarks.md).
//
//   node scripts/bench-guard.mjs [--runs 200] [--binary PATH]
//
// The binary: --binary, else BATCHGUARD_BINARY, else release/batchguard in the target
// directory `cargo metadata` names (CARGO_TARGET_DIR, build.target-dir …; build it with
// `cargo build --release --locked` or npm/pack.sh first).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const { manifest } = await import(path.join(root, "npm", "test", "fixtures", "manifest.mjs"));

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const runs = Number(flag("--runs", "200"));
const targetDir = () => {
  const r = spawnSync("cargo", ["metadata", "--format-version", "1", "--no-deps"], { cwd: root, encoding: "utf8" });
  if (r.status !== 0) {
    console.error(`error: cargo metadata failed (pass --binary): ${r.stderr || r.error}`);
    process.exit(2);
  }
  return JSON.parse(r.stdout).target_directory;
};
const bin = flag("--binary", undefined) || process.env.BATCHGUARD_BINARY || path.join(targetDir(), "release", "batchguard");
if (!fs.existsSync(bin)) {
  console.error(`error: ${bin} is missing: build it with \`cargo build --release --locked\` or pass --binary`);
  process.exit(2);
}
process.env.BATCHGUARD_BINARY = bin;
const { guard } = require(path.join(root, "npm", "batchguard", "index.js"));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bg-bench-guard-"));
const file = path.join(dir, "app.batchguard.yaml");
fs.writeFileSync(file, manifest());
const store = `sqlite:${path.join(dir, "store.db")}`;
const options = { manifest: file, job: "settle", store, stderr: "ignore" };
const base = Date.parse("2020-01-01T00:00:00Z");
let slot = 0;
const nextSlot = () => new Date(base + slot++ * 60_000);

const work = () => 1 + 1; // the callback: what the bare side calls directly

async function timeGuard() {
  const start = process.hrtime.bigint();
  const result = await guard({ ...options, scheduledAt: nextSlot() }, work);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== "succeeded") throw new Error(`guard(): ${JSON.stringify(result)}`);
  return ms;
}

async function timeBare() {
  const start = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function timeCli() {
  const start = process.hrtime.bigint();
  const out = spawnSync(bin, ["run", "--manifest", file, "--job", "settle", "--store", store,
    "--scheduled-at", nextSlot().toISOString(), "--", "true"], { stdio: "ignore" });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (out.status !== 0) throw new Error(`batchguard run exited ${out.status}`);
  return ms;
}

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { median: at(0.5), p95: at(0.95) };
}

// Warm up (the store's tables are created on first use; page cache).
for (let i = 0; i < 5; i++) {
  await timeGuard();
  timeCli();
}
const samples = { guard: [], bare: [], cli: [] };
for (let i = 0; i < runs; i++) {
  samples.bare.push(await timeBare());
  samples.guard.push(await timeGuard());
  samples.cli.push(timeCli());
}
fs.rmSync(dir, { recursive: true, force: true });

const bare = summary(samples.bare);
const fmt = (ms) => `${ms.toFixed(ms < 0.1 ? 4 : 2)} ms`;
console.log(`${spawnSync(bin, ["--version"]).stdout.toString().trim()}, node ${process.version}, ${runs} runs each, SQLite store`);
console.log("| what | median | p95 | over the bare callback (median) |");
console.log("|---|---|---|---|");
for (const [name, label] of [["bare", "bare callback"], ["guard", "`guard()` on a fresh slot"], ["cli", "`batchguard run -- true` (reference)"]]) {
  const s = summary(samples[name]);
  const over = name === "bare" ? "" : `+${fmt(s.median - bare.median)}`;
  console.log(`| ${label} | ${fmt(s.median)} | ${fmt(s.p95)} | ${over} |`);
}
