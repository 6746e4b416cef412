// run.claim(key, client?) (SPEC 7.5): inside the caller's transaction with a real `pg` client
// against PostgreSQL and a real `mysql2` connection against MySQL/MariaDB (the store's
// batchguard_claim function, a database of the test's own), over the link without a client
// (SQLite), after the deadline; and the CLI example examples/jobs/settle-claim.sh (psql and
// the SQL function under `batchguard run`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { guard } from "../batchguard/index.js";
import { sqlDialect } from "../batchguard/lib/guard.js";
import { binary, needServer, repoRoot, run, scratch, tools, unique } from "./helpers.mjs";
import { manifest } from "./fixtures/manifest.mjs";

process.env.BATCHGUARD_BINARY = binary();

const PG_ADMIN = process.env.BATCHGUARD_TEST_PG || "postgres://postgres@127.0.0.1:5432/test";
const MYSQL = process.env.BATCHGUARD_TEST_MYSQL || "mysql://root@127.0.0.1:3306/test";

const toolsDir = tools();
const require = createRequire(path.join(toolsDir, "package.json"));
const pg = require("pg");
const mysql = require("mysql2/promise");
const mysqlCallback = require("mysql2");

const S = new Date("2026-11-30T10:00:00Z");
const minute = (n) => new Date(S.getTime() + n * 60_000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const show = (value) => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? String(v) : v));

function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function pgAdmin(sql) {
  const client = new pg.Client({ connectionString: PG_ADMIN });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A PostgreSQL database of the test's own, migrated; dropped when the test ends. */
async function pgDatabase(t) {
  const name = `bg_claim_${unique("pg").replace(/-/g, "_")}`;
  await pgAdmin(`CREATE DATABASE ${name}`);
  t.after(() => pgAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const url = withDatabase(PG_ADMIN, name);
  const migrated = await run(binary(), ["store", "migrate", "--store", url]);
  assert.equal(migrated.code, 0, migrated.stderr);
  return url;
}

/** A folder with the test manifest (its `lock.store` the URL's kind); guard() options for `job` on `store`. */
function setup(name, store, job = "settle") {
  const dir = scratch(name);
  const file = path.join(dir, "app.batchguard.yaml");
  const kind = store.startsWith("postgres") ? "postgres" : store.startsWith("mysql") ? "mysql" : "sqlite";
  fs.writeFileSync(file, manifest({ store: kind }));
  return { dir, options: { manifest: file, job, store, stderr: "ignore" } };
}

test("the client is told apart by what it is: pg clients, mysql2 connections; pools and strangers are refused before any query", async () => {
  const pgClient = new pg.Client({ connectionString: PG_ADMIN });
  assert.equal(sqlDialect(pgClient).kind, "postgres");
  const pool = new pg.Pool({ connectionString: PG_ADMIN });
  assert.throws(() => sqlDialect(pool), { code: "E_OPTIONS", message: /pool/ });
  await pool.end();
  const mysqlPool = mysqlCallback.createPool({ host: "127.0.0.1", user: "root" });
  assert.throws(() => sqlDialect(mysqlPool), { code: "E_OPTIONS", message: /pool/ });
  assert.throws(() => sqlDialect(mysqlPool.promise()), { code: "E_OPTIONS", message: /pool/ });
  await mysqlPool.promise().end();
  assert.throws(() => sqlDialect({ query() {} }), { code: "E_OPTIONS", message: /cannot tell/ });
  assert.throws(() => sqlDialect({}), { code: "E_OPTIONS" });
});

test("pg: run.claim(key, tx) in the caller's transaction: true once, false after, rolled back with it, refused for a run that is not its slot's latest", async (t) => {
  const skip = await needServer("PostgreSQL", "127.0.0.1", 5432);
  if (skip) return t.skip(skip);
  const url = await pgDatabase(t);
  const db = new pg.Client({ connectionString: url });
  db.on("error", () => {}); // the database is dropped WITH (FORCE) after the test
  await db.connect();
  t.after(() => db.end());
  await db.query("CREATE TABLE applied (key text NOT NULL, run_id text NOT NULL)");
  const { options } = setup("claim-pg", url);

  const tx = new pg.Client({ connectionString: url });
  tx.on("error", () => {});
  await tx.connect();
  t.after(() => tx.end());
  const queries = [];
  const query = tx.query.bind(tx);
  tx.query = (...args) => { queries.push(args[0]); return query(...args); };

  let seen;
  const result = await guard({ ...options, scheduledAt: S }, async (r) => {
    seen = r;
    await tx.query("BEGIN");
    assert.equal(await r.claim("inv-1", tx), true);
    await tx.query("INSERT INTO applied VALUES ($1, $2)", ["inv-1", r.runId]);
    await tx.query("COMMIT");
    // claimed before: false, nothing written
    await tx.query("BEGIN");
    assert.equal(await r.claim("inv-1", tx), false);
    await tx.query("ROLLBACK");
    // a claim rolled back with its transaction was never made
    await tx.query("BEGIN");
    assert.equal(await r.claim("inv-2", tx), true);
    await tx.query("ROLLBACK");
    await tx.query("BEGIN");
    assert.equal(await r.claim("inv-2", tx), true);
    await tx.query("COMMIT");

    // The slot's latest acquisition is another run's (as after a takeover): refused, and the
    // caller's write rolls back with its transaction.
    const slotRow = { job: options.job, slot: r.slot };
    await db.query("UPDATE batchguard_slots SET run_id = 'someone-newer' WHERE job = $1 AND scheduled_at = $2", [slotRow.job, slotRow.slot]);
    try {
      await tx.query("BEGIN");
      await tx.query("INSERT INTO applied VALUES ($1, $2)", ["inv-3", r.runId]);
      const err = await r.claim("inv-3", tx).then(() => null, (e) => e);
      assert.ok(err, "refused");
      assert.equal(err.code, "E_CLAIM_REFUSED");
      assert.match(err.message, new RegExp(`^batchguard: run ${r.runId} \\(fence ${r.fence}\\) is no longer its slot's latest holder: claim of inv-3 refused`));
      assert.equal(err.cause.code, "P0001");
      await tx.query("ROLLBACK");
    } finally {
      await db.query("UPDATE batchguard_slots SET run_id = $3 WHERE job = $1 AND scheduled_at = $2", [slotRow.job, slotRow.slot, r.runId]);
    }
  });
  assert.equal(result.status, "succeeded", show(result));
  assert.deepEqual(queries.filter((q) => q.includes("batchguard_claim")), Array(5).fill("SELECT batchguard_claim($1, $2, $3, $4) AS claimed"));
  assert.deepEqual((await db.query("SELECT key FROM applied ORDER BY key")).rows.map((r) => r.key), ["inv-1"]);
  const outputs = await db.query("SELECT output_key, run_id, scheduled_at FROM batchguard_outputs WHERE job = $1 ORDER BY output_key", [options.job]);
  assert.deepEqual(outputs.rows.map((o) => [o.output_key, o.run_id, new Date(o.scheduled_at).toISOString()]),
    [["inv-1", seen.runId, S.toISOString()], ["inv-2", seen.runId, S.toISOString()]]);

  // Another slot's run: a key claimed by any earlier run is false.
  const later = await guard({ ...options, scheduledAt: minute(1) }, async (r) => {
    await tx.query("BEGIN");
    assert.equal(await r.claim("inv-1", tx), false);
    assert.equal(await r.claim("inv-4", tx), true);
    await tx.query("COMMIT");
  });
  assert.equal(later.status, "succeeded", show(later));
  const audit = await run(binary(), ["audit", "--ledger", url, "--manifest", options.manifest,
    "--from", S.toISOString(), "--to", minute(2).toISOString(), "--job", options.job, "--format", "json"]);
  const report = JSON.parse(audit.stdout);
  assert.deepEqual(report.findings.filter((f) => f.severity === "error"), [], audit.stdout);
  assert.equal(report.jobs.find((j) => j.job === options.job).duplicate_outputs, 0);
});

test("pg: a database without batchguard_claim is E_STORE naming store migrate; a bad key is E_CLAIM_KEY, a client of no known kind E_OPTIONS", async (t) => {
  const skip = await needServer("PostgreSQL", "127.0.0.1", 5432);
  if (skip) return t.skip(skip);
  const url = await pgDatabase(t);
  const tx = new pg.Client({ connectionString: url });
  tx.on("error", () => {});
  await tx.connect();
  t.after(() => tx.end());
  await tx.query("CREATE SCHEMA elsewhere");
  const { options } = setup("claim-pg-missing", url);
  const result = await guard({ ...options, scheduledAt: S }, async (r) => {
    await tx.query("SET search_path = elsewhere");
    await assert.rejects(r.claim("inv-1", tx), { code: "E_STORE", message: /batchguard store migrate/ });
    await assert.rejects(r.claim("", tx), { code: "E_CLAIM_KEY" });
    await assert.rejects(r.claim("a\nb", tx), { code: "E_CLAIM_KEY" });
    await assert.rejects(r.claim("k".repeat(1025), tx), { code: "E_CLAIM_KEY" });
    await assert.rejects(r.claim("inv-1", { query: async () => ({ rows: [] }) }), { code: "E_OPTIONS" });
  });
  assert.equal(result.status, "succeeded", show(result));
});

test("mysql2: run.claim(key, conn) in the caller's transaction on MySQL/MariaDB, promise and callback API; refused is E_CLAIM_REFUSED", async (t) => {
  const skip = await needServer("MySQL/MariaDB", "127.0.0.1", 3306);
  if (skip) return t.skip(skip);
  const name = `bg_claim_${unique("my").replace(/-/g, "_")}`;
  const admin = await mysql.createConnection({ uri: MYSQL });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(MYSQL, name);
  const migrated = await run(binary(), ["store", "migrate", "--store", url]);
  assert.equal(migrated.code, 0, migrated.stderr);
  const conn = await mysql.createConnection({ uri: url });
  t.after(() => conn.end());
  await conn.query("CREATE TABLE applied (k VARCHAR(100) NOT NULL, run_id VARCHAR(100) NOT NULL)");
  const callbackConn = mysqlCallback.createConnection({ uri: url });
  t.after(() => new Promise((r) => callbackConn.end(r)));
  const db = await mysql.createConnection({ uri: url });
  t.after(() => db.end());
  // after hooks run in the order they were added: the connections end, then the drop
  t.after(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  });

  const { options } = setup("claim-mysql", url);
  let seen;
  const result = await guard({ ...options, scheduledAt: S }, async (r) => {
    seen = r;
    await conn.beginTransaction();
    assert.equal(await r.claim("inv-1", conn), true);
    await conn.query("INSERT INTO applied VALUES (?, ?)", ["inv-1", r.runId]);
    await conn.commit();
    await conn.beginTransaction();
    assert.equal(await r.claim("inv-1", conn), false);
    assert.equal(await r.claim("inv-2", conn), true);
    await conn.rollback();
    // the callback API's connection: its promise() wrapper runs the claim
    await callbackConn.promise().beginTransaction();
    assert.equal(await r.claim("inv-2", callbackConn), true);
    await callbackConn.promise().commit();

    const [[slot]] = await db.query("SELECT scheduled_at FROM batchguard_slots WHERE job = ? AND run_id = ?", [options.job, r.runId]);
    await db.query("UPDATE batchguard_slots SET run_id = 'someone-newer' WHERE job = ? AND scheduled_at = ?", [options.job, slot.scheduled_at]);
    try {
      await conn.beginTransaction();
      await conn.query("INSERT INTO applied VALUES (?, ?)", ["inv-3", r.runId]);
      const err = await r.claim("inv-3", conn).then(() => null, (e) => e);
      assert.ok(err, "refused");
      assert.equal(err.code, "E_CLAIM_REFUSED");
      assert.match(err.message, new RegExp(`^batchguard: run ${r.runId} \\(fence ${r.fence}\\) is no longer its slot's latest holder`));
      assert.equal(err.cause.sqlState, "45000");
      await conn.rollback();
    } finally {
      await db.query("UPDATE batchguard_slots SET run_id = ? WHERE job = ? AND scheduled_at = ?", [r.runId, options.job, slot.scheduled_at]);
    }
  });
  assert.equal(result.status, "succeeded", show(result));
  const [applied] = await db.query("SELECT k FROM applied ORDER BY k");
  assert.deepEqual(applied.map((a) => a.k), ["inv-1"]);
  const [outputs] = await db.query("SELECT output_key, run_id FROM batchguard_outputs WHERE job = ? ORDER BY output_key", [options.job]);
  assert.deepEqual(outputs.map((o) => [o.output_key, o.run_id]), [["inv-1", seen.runId], ["inv-2", seen.runId]]);
});

test("without a client: run.claim(key) is the link's claim (SQLite): true once, false after, the output row in the ledger once", async () => {
  const dir = scratch("claim-link");
  const store = `sqlite:${path.join(dir, "store.db")}`;
  const { options } = setup("claim-link", store);
  let seen;
  const result = await guard({ ...options, scheduledAt: S }, async (r) => {
    seen = r;
    assert.equal(await r.claim("inv-1"), true);
    assert.equal(await r.claim("inv-1"), false);
    assert.equal(await r.claim("inv-2"), true);
  });
  assert.equal(result.status, "succeeded", show(result));
  const later = await guard({ ...options, scheduledAt: minute(1) }, async (r) => {
    assert.equal(await r.claim("inv-1"), false);
    await r.output("inv-3");
  });
  assert.equal(later.status, "succeeded", show(later));
  const db = store.slice("sqlite:".length);
  const rows = execFileSync("sqlite3", [db, "select output_key || ' ' || run_id from batchguard_outputs order by output_key"]).toString();
  assert.equal(rows, `inv-1 ${seen.runId}\ninv-2 ${seen.runId}\ninv-3 ${later.runId}\n`);
});

test("after the deadline run.claim rejects (E_CLAIM_REFUSED) without a query, with or without a client", async () => {
  const dir = scratch("claim-late");
  const { options } = setup("claim-late", `sqlite:${path.join(dir, "store.db")}`, "brief");
  const calls = [];
  const client = { connectionParameters: {}, query: async (...args) => { calls.push(args); return { rows: [{ claimed: true }] }; } };
  let late;
  const result = await guard({ ...options, scheduledAt: S }, async (r) => {
    // the attempt ends TTL_EXCEEDED at its deadline; this callback outlives it
    await sleep(r.deadline.getTime() - Date.now() + 1500);
    late = await Promise.allSettled([r.claim("inv-1", client), r.claim("inv-1")]);
  });
  assert.equal(result.status === "failed" || result.status === "dead_lettered", true, show(result));
  assert.equal(result.code, "TTL_EXCEEDED");
  // the call resolves once the guard has ended; the callback goes on and claims late
  const end = Date.now() + 10_000;
  while (!late && Date.now() < end) await sleep(50);
  assert.ok(late, "the late claims settled");
  for (const outcome of late) {
    assert.equal(outcome.status, "rejected");
    assert.equal(outcome.reason.code, "E_CLAIM_REFUSED");
    assert.match(outcome.reason.message, /has ended/);
  }
  assert.equal(calls.length, 0, "no query ran");
});

test("examples/jobs/settle-claim.sh under batchguard run: psql and batchguard_claim charge each invoice once, a lying list changes nothing", async (t) => {
  const skip = await needServer("PostgreSQL", "127.0.0.1", 5432);
  if (skip) return t.skip(skip);
  const url = await pgDatabase(t);
  const db = new pg.Client({ connectionString: url });
  db.on("error", () => {}); // the database is dropped WITH (FORCE) after the test
  await db.connect();
  t.after(() => db.end());
  await createRequire(path.join(repoRoot, "examples", "node", "package.json"))("./settle.js").migrate(db);
  const step = 5 * 60_000;
  const slot = Math.floor(Date.now() / step) * step;
  const previous = slot - step;
  await db.query(`INSERT INTO invoices (id, due_at, amount)
                  SELECT i, to_timestamp($1::double precision) - i * interval '1 second', 100 * i FROM generate_series(1, 5) i`, [previous / 1000]);
  const job = "settle-claim";
  const cli = (at) => run(binary(), ["run", "--manifest", "examples/jobs/settle-claim.batchguard.yaml", "--job", job,
    "--store", url, "--scheduled-at", new Date(at).toISOString()], { cwd: repoRoot, env: { ...process.env, DATABASE_URL: url } });

  const first = await cli(previous);
  assert.equal(first.code, 0, first.stderr + first.stdout);
  assert.match(first.stdout, /settled 5 invoices, 0 claimed before/);
  // The list is only a hint: make it lie (every invoice unsettled again), as a reader racing
  // a crashed holder's commit would see it; the next slot's claims refuse every charge.
  await db.query("UPDATE invoices SET settled_at = NULL");
  const second = await cli(slot);
  assert.equal(second.code, 0, second.stderr + second.stdout);
  assert.match(second.stdout, /settled 0 invoices, 5 claimed before/);
  const charges = await db.query("SELECT invoice_id, count(*)::int AS n FROM payments GROUP BY invoice_id ORDER BY invoice_id");
  assert.deepEqual(charges.rows.map((c) => [Number(c.invoice_id), c.n]), [[1, 1], [2, 1], [3, 1], [4, 1], [5, 1]]);
  const outputs = await db.query("SELECT output_key, count(*)::int AS n FROM batchguard_outputs WHERE job = $1 GROUP BY output_key ORDER BY output_key", [job]);
  assert.deepEqual(outputs.rows.map((o) => [o.output_key, o.n]), [1, 2, 3, 4, 5].map((i) => [`invoice-${i}`, 1]));
});
