#!/usr/bin/env node
// What a claim costs inside the job's transaction (SPEC 7.5): the same transaction with and
// without `run.claim(key, tx)`, interleaved, on the real servers, in one guarded run:
//
//   bare:  BEGIN; INSERT INTO bench_writes …; COMMIT
//   claim: BEGIN; SELECT batchguard_claim(job, key, run_id, fence); INSERT …; COMMIT
//
// each with a key of its own (every claim is a first claim: the function's insert path).
// Prints the median and p95 of each, the claim's cost over the bare transaction, and the
// ratio, for PostgreSQL and MySQL/MariaDB side by side (the table in docs/benchmarks.md).
// Each server gets a database of its own (created, migrated with `batchguard store
// migrate`, dropped at the end).
//
//   node scripts/bench-claim.mjs [--runs 500] [--binary PATH]
//        [--pg postgres://postgres@127.0.0.1:5432/test] [--mysql mysql://root@127.0.0.1:3306/test]
//        [--only postgres|mysql]
//
// The drivers come from npm/test/tools (`npm ci` there first). The binary: --binary, else
// BATCHGUARD_BINARY, else target/debug/batchguard, else target/release/batchguard.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tools = path.join(root, "npm", "test", "tools");
if (!fs.existsSync(path.join(tools, "node_modules", "pg"))) {
  console.error(`error: run \`npm ci\` in ${tools} first (pg and mysql2 come from there)`);
  process.exit(2);
}
const need = createRequire(path.join(tools, "package.json"));
const pg = need("pg");
const mysql = need("mysql2/promise");
const { manifest } = await import(path.join(root, "npm", "test", "fixtures", "manifest.mjs"));

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const runs = Number(flag("--runs", "500"));
const only = flag("--only", undefined);
const bin = flag("--binary", undefined) || process.env.BATCHGUARD_BINARY ||
  [path.join(root, "target", "debug", "batchguard"), path.join(root, "target", "release", "batchguard")].find((p) => fs.existsSync(p));
if (!bin || !fs.existsSync(bin)) {
  console.error("error: no batchguard binary: `cargo build` first, or pass --binary");
  process.exit(2);
}
process.env.BATCHGUARD_BINARY = bin;
const { guard } = need(path.join(root, "npm", "batchguard"));

const pgAdmin = flag("--pg", "postgres://postgres@127.0.0.1:5432/test");
const mysqlAdmin = flag("--mysql", "mysql://root@127.0.0.1:3306/test");
const tag = `bg_bench_claim_${process.pid}`;
const withDatabase = (url, name) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

function migrate(store) {
  const r = spawnSync(bin, ["store", "migrate", "--store", store], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`store migrate: ${r.stderr}`);
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { median: quantile(s, 0.5), p95: quantile(s, 0.95) };
}

/** Runs both transactions `runs` times each, interleaved, inside one guarded run on `store`. */
async function measure(store, kind, tx, sql) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bg-bench-claim-"));
  const file = path.join(dir, "bench.batchguard.yaml");
  // a long lease: the whole measurement is one attempt
  fs.writeFileSync(file, manifest({ store: kind }).replace("    lock:\n      ttl: 30s", "    lock:\n      ttl: 30m"));
  const bare = [];
  const claimed = [];
  const result = await guard({ manifest: file, job: "settle", store, stderr: "ignore" }, async (run) => {
    for (let i = 0; i < runs + 20; i++) {
      const warm = i < 20;
      let t = process.hrtime.bigint();
      await tx.begin();
      await tx.query(sql.insert, [`bare-${i}`]);
      await tx.commit();
      if (!warm) bare.push(Number(process.hrtime.bigint() - t) / 1e6);
      t = process.hrtime.bigint();
      await tx.begin();
      if (!(await run.claim(`claim-${i}`, tx.client))) throw new Error(`claim-${i} was claimed before`);
      await tx.query(sql.insert, [`claim-${i}`]);
      await tx.commit();
      if (!warm) claimed.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  });
  fs.rmSync(dir, { recursive: true, force: true });
  if (result.status !== "succeeded") throw new Error(`the guarded run ${result.status}: ${result.error && result.error.message}`);
  return { bare: stats(bare), claim: stats(claimed) };
}

async function postgres() {
  const admin = new pg.Client({ connectionString: pgAdmin });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${tag}`);
  const url = withDatabase(pgAdmin, tag);
  const client = new pg.Client({ connectionString: url });
  try {
    migrate(url);
    await client.connect();
    await client.query("CREATE TABLE bench_writes (key text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())");
    const tx = { client, begin: () => client.query("BEGIN"), commit: () => client.query("COMMIT"), query: (t, v) => client.query(t, v) };
    return await measure(url, "postgres", tx, { insert: "INSERT INTO bench_writes (key) VALUES ($1)" });
  } finally {
    await client.end().catch(() => {});
    await admin.query(`DROP DATABASE IF EXISTS ${tag} WITH (FORCE)`);
    await admin.end();
  }
}

async function mariadb() {
  const admin = await mysql.createConnection({ uri: mysqlAdmin });
  await admin.query(`CREATE DATABASE ${tag}`);
  const url = withDatabase(mysqlAdmin, tag);
  let conn;
  try {
    migrate(url);
    conn = await mysql.createConnection({ uri: url });
    await conn.query("CREATE TABLE bench_writes (k VARCHAR(64) PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))");
    const [[{ version }]] = await conn.query("SELECT version() AS version");
    const tx = { client: conn, begin: () => conn.beginTransaction(), commit: () => conn.commit(), query: (t, v) => conn.query(t, v) };
    return { version, ...(await measure(url, "mysql", tx, { insert: "INSERT INTO bench_writes (k) VALUES (?)" })) };
  } finally {
    if (conn) await conn.end().catch(() => {});
    await admin.query(`DROP DATABASE IF EXISTS ${tag}`);
    await admin.end();
  }
}

const ms = (x) => `${x.toFixed(3)} ms`;
const rows = [];
if (!only || only === "postgres") rows.push(["PostgreSQL", await postgres()]);
if (!only || only === "mysql") {
  const m = await mariadb();
  rows.push([`MySQL/MariaDB (${m.version})`, m]);
}
console.log(`${runs} transactions of each kind, interleaved, one guarded run; ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)}; binary ${bin}`);
console.log("");
console.log("| server | BEGIN; INSERT; COMMIT (median / p95) | BEGIN; claim; INSERT; COMMIT (median / p95) | the claim adds (median) | ratio (median) |");
console.log("|---|---:|---:|---:|---:|");
for (const [name, r] of rows) {
  console.log(`| ${name} | ${ms(r.bare.median)} / ${ms(r.bare.p95)} | ${ms(r.claim.median)} / ${ms(r.claim.p95)} | +${ms(r.claim.median - r.bare.median)} | ${(r.claim.median / r.bare.median).toFixed(2)}x |`);
}
