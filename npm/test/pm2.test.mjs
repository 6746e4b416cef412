// The incident's app fixed (examples/node/), run as it is deployed: a real PM2 cluster of 4
// instances (PM2 from npm), node-cron ticking every 2 s, each tick guarded(), the lease in
// PostgreSQL or in Redis. Each invoice is charged in a transaction of its own with its claim
// (run.claim(key, tx) on PostgreSQL, run.claim(key) on Redis). The working instance of one
// slot is killed with kill -9 after it committed that slot's first invoice (charge and
// claim), while the second one's UPDATE waits on a row lock this test holds; then every slot
// of the window has exactly one successful end, the killed slot its INTERRUPTED attempt and a
// catch-up, the other instances' skips name their holder, every invoice is charged exactly
// once and is once in the outputs ledger, and the audit is clean.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { binary, needServer, packageDir, repoRoot, run, scratch, tools, unique, until } from "./helpers.mjs";

const PG_ADMIN = process.env.BATCHGUARD_TEST_PG || "postgres://postgres@127.0.0.1:5432/test";
const REDIS = process.env.BATCHGUARD_TEST_REDIS || "redis://127.0.0.1:6379/0";
const STEP = 2000; // the test's schedule: every 2 s

const toolsDir = tools();
const require = createRequire(path.join(toolsDir, "package.json"));
const pg = require("pg");
const pm2Bin = path.join(toolsDir, "node_modules", ".bin", "pm2");

function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin(sql) {
  const client = new pg.Client({ connectionString: PG_ADMIN });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The example app in a folder of its own: its schedule every 2 s, its job name unique. */
function appFolder(dir, job, storeKind) {
  const app = path.join(dir, "app");
  fs.mkdirSync(app);
  const source = path.join(repoRoot, "examples", "node");
  for (const file of ["app.js", "settle.js", "ecosystem.config.js", "billing.batchguard.yaml", "package.json"]) {
    let text = fs.readFileSync(path.join(source, file), "utf8");
    if (file === "app.js" || file === "billing.batchguard.yaml") {
      const sped = text.replace('"*/5 * * * *"', '"*/2 * * * * *"');
      assert.notEqual(sped, text, `${file} has the example's schedule`);
      text = sped.replaceAll("settle-invoices", job);
    }
    if (file === "billing.batchguard.yaml") {
      text = text.replace("catch_up: 15m", "catch_up: 20s").replace("store: postgres", `store: ${storeKind}`);
    }
    fs.writeFileSync(path.join(app, file), text);
  }
  const modules = path.join(app, "node_modules");
  fs.mkdirSync(modules);
  fs.symlinkSync(packageDir, path.join(modules, "batchguard"));
  for (const name of ["node-cron", "pg"]) {
    fs.symlinkSync(path.join(toolsDir, "node_modules", name), path.join(modules, name));
  }
  return app;
}

/** The example's tables (its own migrate()), and two invoices due every 2 s from 20 s ago to 2 min ahead (slot-aligned). */
async function seedInvoices(db, app) {
  await createRequire(path.join(app, "package.json"))("./settle.js").migrate(db);
  const start = Math.floor(Date.now() / STEP) * STEP - 20_000;
  const values = [];
  for (let i = 0; i < 70; i++) {
    const due = `to_timestamp(${(start + i * STEP) / 1000})`;
    values.push(`(${2 * i + 1}, ${due})`, `(${2 * i + 2}, ${due})`);
  }
  await db.query(`INSERT INTO invoices (id, due_at) VALUES ${values.join(",")}`);
}

async function pm2(args, env) {
  const out = await run(pm2Bin, args, { env });
  assert.equal(out.code, 0, `pm2 ${args.join(" ")}: ${out.stderr}${out.stdout}`);
  return out.stdout;
}

const iso = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");

async function cluster(kind) {
  const cleanups = [];
  try {
    await scenario(kind, cleanups);
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await Promise.resolve().then(cleanup).catch((err) => console.error(`cleanup: ${err.message}`));
    }
  }
}

async function scenario(kind, cleanups) {
  const dir = scratch(`pm2-${kind}`);
  const tag = unique("n").replace(/-/g, "_");
  const database = `bg_node_${tag}`;
  await admin(`CREATE DATABASE ${database}`);
  cleanups.push(() => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
  const dbUrl = withDatabase(PG_ADMIN, database);
  const job = unique("settle").toLowerCase();
  const ledgerFile = path.join(dir, "ledger.jsonl");
  const store = kind === "postgres" ? dbUrl : `${REDIS}${REDIS.includes("?") ? "&" : "?"}prefix=${tag}`;
  if (kind === "redis") {
    cleanups.push(async () => {
      const keys = execFileSync("redis-cli", ["-u", REDIS, "--scan", "--pattern", `${tag}:*`]).toString().split("\n").filter(Boolean);
      if (keys.length) execFileSync("redis-cli", ["-u", REDIS, "del", ...keys]);
    });
  }
  const migrated = await run(binary(), ["store", "migrate", "--store", store]);
  assert.equal(migrated.code, 0, migrated.stderr);

  const app = appFolder(dir, job, kind);
  const db = new pg.Client({ connectionString: dbUrl });
  db.on("error", () => {});
  await db.connect();
  cleanups.push(() => db.end());
  await seedInvoices(db, app);

  const events = async () => {
    if (kind === "postgres") {
      const { rows } = await db.query(
        `SELECT run_id, scheduled_at, event, instance, attempt, status, error_code, "trigger", fence, detail
           FROM batchguard_events WHERE job = $1`, [job]);
      return rows.map((r) => ({ ...r, scheduled_at: new Date(r.scheduled_at).getTime() }));
    }
    if (!fs.existsSync(ledgerFile)) return [];
    return fs.readFileSync(ledgerFile, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line))
      .filter((e) => e.job === job).map((e) => ({ ...e, scheduled_at: new Date(e.scheduled_at).getTime() }));
  };

  const env = {
    ...process.env,
    PM2_HOME: path.join(dir, "pm2"),
    BATCHGUARD_BINARY: binary(),
    BATCHGUARD_STORE: store,
    BILLING_DATABASE_URL: dbUrl,
    ...(kind === "redis" ? { BATCHGUARD_LEDGER: ledgerFile } : {}),
  };
  cleanups.push(() => run(pm2Bin, ["kill"], { env }));
  await pm2(["start", path.join(app, "ecosystem.config.js")], env);

  // The cluster is up when a slot has succeeded.
  const first = await until(async () => (await events()).find((e) => e.event === "end" && e.status === "success"), 30_000, "a first slot");

  // Which process is which PM2 instance, read now (the PM2 CLI is slow to start; the kill
  // should not wait for it).
  const pids = new Map(JSON.parse(await pm2(["jlist"], env)).map((p) => [String(p.pm2_env.NODE_APP_INSTANCE), p.pid]));
  assert.equal(pids.size, 4, "4 instances");

  // The slot to break: a few ticks ahead. Its second invoice's row is locked, so the
  // instance that takes the slot commits the first invoice (its charge and its claim) and
  // then waits inside its callback until it is killed: a kill after a commit.
  const T = Math.ceil((Date.now() + 3000) / STEP) * STEP;
  const lock = new pg.Client({ connectionString: dbUrl });
  lock.on("error", () => {});
  await lock.connect();
  cleanups.push(() => lock.end());
  await lock.query("BEGIN");
  const locked = await lock.query(
    "SELECT id FROM invoices WHERE due_at = to_timestamp($1) ORDER BY id DESC LIMIT 1 FOR UPDATE", [T / 1000]);
  assert.equal(locked.rowCount, 1);
  const lockedId = Number(locked.rows[0].id);
  const committedId = lockedId - 1;

  const start = await until(async () => (await events()).find((e) => e.event === "start" && e.scheduled_at === T), 20_000, `the start of ${iso(T)}`);
  const holder = /\/pm2:(\d+)\//.exec(start.instance);
  assert.ok(holder, `the instance id names the PM2 instance: ${start.instance}`);
  const victim = pids.get(holder[1]);
  assert.ok(victim, `PM2 instance ${holder[1]} in ${JSON.stringify([...pids])}`);
  // The first invoice of the slot is committed by the working run (its charge is visible
  // to this connection), and the run is still working: waiting on the locked row.
  await until(async () => (await db.query("SELECT 1 FROM payments WHERE invoice_id = $1 AND run_id = $2",
    [committedId, start.run_id])).rowCount === 1, 20_000, `invoice ${committedId} committed by ${start.run_id}`);
  assert.equal((await events()).filter((e) => e.run_id === start.run_id && e.event === "end").length, 0, "still working");
  process.kill(victim, "SIGKILL");

  const interrupted = await until(
    async () => (await events()).find((e) => e.run_id === start.run_id && e.event === "end"), 10_000, "the killed run's end");
  assert.equal(interrupted.status, "failure");
  assert.equal(interrupted.error_code, "INTERRUPTED");
  await lock.query("ROLLBACK");

  const last = T + 3 * STEP;
  await until(async () => {
    const seen = await events();
    const ok = (slot) => seen.some((e) => e.scheduled_at === slot && e.event === "end" && e.status === "success");
    return ok(T) && ok(last);
  }, 30_000, `slots ${iso(T)} and ${iso(last)} succeeded`);
  await pm2(["kill"], env);

  const seen = await events();
  // The killed process may have been working more than one slot (node-cron lets a tick start
  // while the last one still runs, and the next slot's UPDATE waits on the same row): each of
  // its runs ended INTERRUPTED, and each of those slots was caught up.
  // (Slots after the window may be cut by the final `pm2 kill`: they are not looked at.)
  const killed = new Set(seen.filter((e) => e.event === "end" && e.error_code === "INTERRUPTED" && e.scheduled_at <= last)
    .map((e) => e.run_id));
  assert.ok(killed.has(start.run_id));
  for (const e of seen.filter((e) => e.event === "start" && killed.has(e.run_id))) {
    assert.equal(/\/pm2:\d+\//.exec(e.instance)[0], `/pm2:${holder[1]}/`, `only the killed instance's runs were interrupted: ${e.instance}`);
  }
  // The window: three slots before the killed one, from the first slot the cluster worked.
  const from = Math.max(T - 3 * STEP, first.scheduled_at);
  let heldBy = 0;
  for (let slot = from; slot <= last; slot += STEP) {
    const mine = seen.filter((e) => e.scheduled_at === slot);
    const starts = mine.filter((e) => e.event === "start");
    const successes = mine.filter((e) => e.event === "end" && e.status === "success");
    const interrupted = starts.filter((e) => killed.has(e.run_id)).length;
    assert.equal(successes.length, 1, `${iso(slot)}: one successful end\n${JSON.stringify(mine, null, 1)}`);
    assert.equal(starts.length, 1 + interrupted, `${iso(slot)} (T = ${iso(T)}): starts\n${JSON.stringify(mine, null, 1)}`);
    if (interrupted) {
      const after = starts.filter((e) => !killed.has(e.run_id));
      // attempt 2: caught up by a later tick, or taken by a tick of its own that came after the kill
      assert.equal(after.length, 1, `${iso(slot)} worked again once`);
      assert.equal(after[0].attempt, 2);
      assert.ok(["catch_up", "schedule"].includes(after[0].trigger), `${iso(slot)}: ${after[0].trigger}`);
      assert.equal(successes[0].run_id, after[0].run_id);
    }
    for (const skip of mine.filter((e) => e.event === "skip")) {
      const held = /^held by (\S+\/pm2:\d+\/\d+) \(run (\S+), fence (\d+)/.exec(skip.detail);
      if (held) {
        // the holder named is the instance that had started that slot, with that run and fence
        heldBy++;
        const holderStart = starts.find((e) => e.run_id === held[2]);
        assert.ok(holderStart, `${iso(slot)}: ${skip.detail} names a start of the slot`);
        assert.equal(holderStart.instance, held[1]);
        assert.equal(String(holderStart.fence), held[3]);
      } else {
        assert.match(skip.detail, /^already succeeded \(run \S+\)/, `${iso(slot)}: ${skip.detail}`);
        assert.ok(skip.detail.includes(successes[0].run_id), `${iso(slot)}: ${skip.detail} names the run that succeeded`);
      }
    }
  }
  assert.ok(heldBy >= 1, "some instance found a slot held and named its holder");

  const { rows } = await db.query(
    "SELECT count(*)::int AS n, count(settled_at)::int AS settled FROM invoices WHERE due_at <= to_timestamp($1)", [last / 1000]);
  assert.equal(rows[0].settled, rows[0].n, "every invoice due in the window settled");
  // Exactly once: one charge per invoice (the one committed before the kill was not charged
  // again by the catch-up), made by the run that settled it.
  const charges = await db.query(`
    SELECT i.id, i.settled_by, count(p.id)::int AS charges, min(p.run_id) AS charged_by
      FROM invoices i LEFT JOIN payments p ON p.invoice_id = i.id
     WHERE i.settled_at IS NOT NULL GROUP BY i.id, i.settled_by ORDER BY i.id`);
  for (const c of charges.rows) {
    assert.equal(c.charges, 1, `invoice ${c.id} charged once: ${JSON.stringify(c)}`);
    assert.equal(c.charged_by, c.settled_by, `invoice ${c.id}`);
  }
  assert.equal(charges.rows.find((c) => Number(c.id) === committedId).settled_by, start.run_id,
    "the invoice committed before the kill stays the killed run's");
  // Once in the outputs ledger each, claimed by the run that charged it.
  const outputs = kind === "postgres"
    ? (await db.query("SELECT output_key, run_id FROM batchguard_outputs WHERE job = $1", [job])).rows
    : fs.readFileSync(ledgerFile.replace(/\.jsonl$/, ".outputs.jsonl"), "utf8").split("\n").filter(Boolean)
      .map((line) => JSON.parse(line)).filter((o) => o.job === job);
  const byKey = new Map();
  for (const o of outputs) byKey.set(o.output_key, [...(byKey.get(o.output_key) || []), o.run_id]);
  for (const c of charges.rows) {
    assert.deepEqual(byKey.get(`invoice-${c.id}`), [c.settled_by], `invoice-${c.id} in the outputs ledger once`);
  }
  assert.equal(byKey.size, charges.rows.length, "no output without its charge");

  const ledgerArgs = kind === "postgres"
    ? ["--ledger", dbUrl]
    : ["--ledger", ledgerFile, "--outputs", ledgerFile.replace(/\.jsonl$/, ".outputs.jsonl")];
  const audit = await run(binary(), [
    "audit", ...ledgerArgs, "--manifest", path.join(app, "billing.batchguard.yaml"),
    "--from", iso(from), "--to", iso(last + STEP), "--format", "json",
  ]);
  const report = JSON.parse(audit.stdout);
  const serious = report.findings.filter((f) => f.severity === "error");
  assert.deepEqual(serious, [], audit.stdout);
  assert.equal(audit.code, 0, audit.stderr);
  const jobRow = report.jobs.find((j) => j.job === job);
  assert.equal(jobRow.duplicate_outputs, 0);
  assert.ok(jobRow.outputs >= 1);
}

test("a PM2 cluster of 4 with node-cron every 2 s on PostgreSQL", async (t) => {
  const skip = await needServer("PostgreSQL", "127.0.0.1", 5432);
  if (skip) return t.skip(skip);
  await cluster("postgres");
});

test("a PM2 cluster of 4 with node-cron every 2 s on Redis (ledger in a JSONL file)", async (t) => {
  const skip = (await needServer("PostgreSQL", "127.0.0.1", 5432)) || (await needServer("Redis", "127.0.0.1", 6379));
  if (skip) return t.skip(skip);
  await cluster("redis");
});
