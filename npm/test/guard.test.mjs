// guard() against the real binary on a SQLite store: what the callback sees, every outcome,
// the deadline, bad input, and a Node.js process killed inside its callback.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { guard } from "../batchguard/index.js";
import { binary, packageDir, run, scratch, until } from "./helpers.mjs";
import { manifest } from "./fixtures/manifest.mjs";

process.env.BATCHGUARD_BINARY = binary();

/** A folder with the manifest and a fresh SQLite store; options for guard(). */
function setup(name) {
  const dir = scratch(name);
  const file = path.join(dir, "app.batchguard.yaml");
  fs.writeFileSync(file, manifest());
  return { dir, options: { manifest: file, job: "settle", store: `sqlite:${path.join(dir, "store.db")}`, stderr: "ignore" } };
}

/** The ledger's events (the store's own table, read as the audit reads it). */
function events(options, where = "1=1") {
  const db = options.store.slice("sqlite:".length);
  const out = execFileSync("sqlite3", ["-json", db, `select * from batchguard_events where ${where} order by rowid`]).toString();
  return out.trim() === "" ? [] : JSON.parse(out);
}

const S = new Date("2026-11-30T10:00:00Z");
const minute = (n) => new Date(S.getTime() + n * 60_000);

test("succeeded: the callback gets the lease's slot, attempt, fence and deadline; outputs reach the ledger", async () => {
  const { options } = setup("ok");
  let seen;
  const result = await guard({ ...options, scheduledAt: S, instance: "node-a" }, async (run) => {
    seen = run;
    await run.output("inv-1");
    await run.output("inv-2");
  });
  assert.equal(result.status, "succeeded");
  assert.deepEqual(result.slot, S);
  assert.deepEqual(seen.slot, S);
  assert.equal(seen.attempt, 1);
  assert.equal(typeof seen.fence, "bigint");
  assert.equal(result.fence, seen.fence);
  assert.equal(result.runId, seen.runId);
  assert.ok(seen.deadline > new Date(), "the deadline lies ahead of the call");
  assert.equal(seen.signal.aborted, false);
  const rows = events(options);
  assert.deepEqual(rows.map((e) => [e.event, e.status, e.instance]), [["start", null, "node-a"], ["end", "success", "node-a"]]);
  assert.equal(BigInt(rows[0].fence), seen.fence);
  const db = options.store.slice("sqlite:".length);
  const outputs = execFileSync("sqlite3", [db, "select output_key from batchguard_outputs order by output_key"]).toString();
  assert.equal(outputs, "inv-1\ninv-2\n");

  let again = false;
  const second = await guard({ ...options, scheduledAt: S }, () => { again = true; });
  assert.equal(again, false, "a slot that succeeded never runs again");
  assert.equal(second.status, "skipped");
  assert.equal(second.reason, `already succeeded (run ${seen.runId})`);
});

test("skipped: a second caller on a held slot names the holder and never runs", async () => {
  const { options } = setup("held");
  let release;
  let started;
  const startedP = new Promise((r) => (started = r));
  const holder = guard({ ...options, scheduledAt: S, instance: "node-a" }, (run) => {
    started(run);
    return new Promise((r) => (release = r));
  });
  const run = await startedP;
  let ran = false;
  const other = await guard({ ...options, scheduledAt: S, instance: "node-b" }, () => { ran = true; });
  assert.equal(ran, false);
  assert.equal(other.status, "skipped");
  assert.match(other.reason, new RegExp(`^held by node-a \\(run ${run.runId}, fence ${run.fence}, lease ends in \\d+ s\\)`));
  release();
  assert.equal((await holder).status, "succeeded");
  const skip = events(options, "event = 'skip'");
  assert.equal(skip.length, 1);
  assert.equal(skip[0].instance, "node-b");
});

test("failed: a thrown error's code is the attempt's error code; a fatal one dead-letters the slot", async () => {
  const { options } = setup("fatal");
  const thrown = Object.assign(new Error("invoice 7 has no customer"), { code: "VALIDATION_ERROR" });
  let calls = 0;
  const result = await guard({ ...options, scheduledAt: S }, () => { calls++; throw thrown; });
  assert.equal(calls, 1, "no retry follows a fatal code");
  assert.equal(result.status, "dead_lettered");
  assert.equal(result.code, "VALIDATION_ERROR");
  assert.equal(result.error, thrown);
  const end = events(options, "event = 'end'");
  assert.equal(end.length, 1);
  assert.equal(end[0].error_code, "VALIDATION_ERROR");
  assert.match(end[0].detail, /invoice 7 has no customer/);
  assert.equal(events(options, "event = 'dead_letter'").length, 1);
});

test("one status vocabulary: a later call on a dead-lettered slot is skipped (dead-lettered), never dead_lettered again", async () => {
  const { options } = setup("dead-again");
  const thrown = Object.assign(new Error("invoice 8 has no customer"), { code: "VALIDATION_ERROR" });
  const first = await guard({ ...options, scheduledAt: S }, () => { throw thrown; });
  assert.equal(first.status, "dead_lettered", "the call whose attempt dead-lettered the slot");
  assert.deepEqual(events(options).map((e) => [e.event, e.run_id === first.runId]),
    [["start", true], ["end", true], ["dead_letter", true]], "start, end, then dead_letter");

  let ran = false;
  const again = await guard({ ...options, scheduledAt: S }, () => { ran = true; });
  assert.equal(ran, false, "a dead-lettered slot is not run again");
  assert.equal(again.status, "skipped");
  assert.equal(again.reason, "dead-lettered");
  assert.equal(again.error, null);
  assert.equal(again.exitCode, 0);
  assert.deepEqual(events(options, "event = 'skip'").map((e) => e.detail.split(";")[0]), ["dead-lettered"]);
});

test("retried: a retryable code calls the callback again with attempt n+1 and a new fence", async () => {
  const { options } = setup("retry");
  const runs = [];
  const result = await guard({ ...options, scheduledAt: S }, (run) => {
    runs.push(run);
    if (run.attempt === 1) throw Object.assign(new Error("upstream timed out"), { code: "ETIMEDOUT" });
  });
  assert.equal(result.status, "succeeded");
  assert.deepEqual(runs.map((r) => r.attempt), [1, 2]);
  assert.ok(runs[1].fence > runs[0].fence, "a new fencing token per attempt");
  assert.equal(runs[0].signal.aborted, false);
  assert.deepEqual(events(options, "event = 'end'").map((e) => [e.attempt, e.status, e.error_code]),
    [[1, "failure", "ETIMEDOUT"], [2, "success", null]]);
});

test("the deadline wins: a callback that never settles is aborted at deadline - grace and the attempt ends TTL_EXCEEDED", async () => {
  const { options } = setup("deadline");
  let seen;
  let abortedAt;
  const result = await guard({ ...options, job: "stuck", scheduledAt: S }, (run) => {
    seen = run;
    run.signal.addEventListener("abort", () => { abortedAt = new Date(); });
    return new Promise(() => {}); // never settles
  });
  assert.equal(result.code, "TTL_EXCEEDED");
  assert.notEqual(result.status, "succeeded");
  assert.equal(seen.signal.aborted, true);
  assert.equal(seen.signal.reason.code, "TTL_EXCEEDED");
  assert.ok(abortedAt, "the signal fired");
  await assert.rejects(seen.output("late"), { code: "E_OUTPUT" }, "no output after the deadline");
  const end = events(options, "event = 'end'");
  assert.deepEqual(end.map((e) => [e.status, e.error_code]), [["failure", "TTL_EXCEEDED"]]);
});

test("a callback that settles after the deadline changes nothing", async () => {
  const { options } = setup("late");
  const result = await guard({ ...options, job: "stuck", scheduledAt: S }, (run) =>
    new Promise((resolve) => run.signal.addEventListener("abort", () => setTimeout(resolve, 2000))));
  assert.equal(result.code, "TTL_EXCEEDED");
  assert.deepEqual(events(options, "event = 'end'").map((e) => e.error_code), ["TTL_EXCEEDED"]);
});

test("the deadline is honest: a callback still running at the deadline is said to be running, and the hint printed is a guard() call that reruns the slot", async () => {
  const { options } = setup("overrun");
  let stderr = "";
  let settle;
  let settled = false;
  const result = await guard({ ...options, job: "stuck", scheduledAt: S, stderr: (chunk) => { stderr += chunk; } }, () =>
    new Promise((resolve) => { settle = () => { settled = true; resolve(); }; }));
  // `stuck` has one attempt and TTL_EXCEEDED is not classified (on_unknown: dead_letter).
  assert.equal(result.status, "dead_lettered");
  assert.equal(result.code, "TTL_EXCEEDED");
  assert.equal(result.error.code, "TTL_EXCEEDED");
  assert.equal(settled, false, "nothing stopped the callback: it is still pending after the call");
  const [end] = events(options, "event = 'end'");
  assert.equal(end.error_code, "TTL_EXCEEDED");
  assert.equal(end.detail, "callback still running, not stopped");
  assert.doesNotMatch(stderr, /stopped at the deadline/);
  assert.match(stderr, /failed: TTL_EXCEEDED \(callback still running, not stopped: `run --link` cannot stop it/);
  assert.doesNotMatch(stderr, /batchguard run --manifest|--manual/, "no `run --manual` line: it exits 125 for a job without a command");
  const hint = /rerun it with: (guard\((\{.*\}), callback\))$/m.exec(stderr);
  assert.ok(hint, stderr);
  assert.equal(hint[1], `guard({ manifest: ${JSON.stringify(options.manifest)}, job: "stuck", store: ${JSON.stringify(options.store)}, scheduledAt: "2026-11-30T10:00:00Z", manual: true, reason: "…" }, callback)`);
  settle();

  // The hint works as printed: the operator's rerun of the dead-lettered slot.
  const printed = new Function(`return (${hint[2]});`)();
  let trigger;
  const rerun = await guard({ ...printed, reason: "the callback no longer hangs", stderr: "ignore" }, (run) => { trigger = run.trigger; });
  assert.equal(rerun.status, "succeeded");
  assert.deepEqual(rerun.slot, S);
  assert.equal(trigger, "manual");
  assert.deepEqual(events(options, "event = 'manual'").map((e) => e.detail), ["the callback no longer hangs"]);
});

/** The pids of a process's children (Linux). */
function children(pid) {
  const dir = `/proc/${pid}/task`;
  return fs.readdirSync(dir).flatMap((task) =>
    fs.readFileSync(path.join(dir, task, "children"), "utf8").trim().split(/\s+/).filter(Boolean).map(Number));
}

test("superseded: a holder frozen past its lease answers skipped (superseded by the newer run) and records no verdict", async () => {
  const { dir, options } = setup("superseded");
  const script = path.join(dir, "worker.js");
  // `brief`: a lease of 3 s, so the frozen holder's lease runs out within the test.
  fs.writeFileSync(script, `
    const { guard } = require(${JSON.stringify(packageDir)});
    guard(${JSON.stringify({ ...options, job: "brief", scheduledAt: S.toISOString(), instance: "frozen" })}, (run) => {
      process.stdout.write("working " + run.runId + "\\n");
      return new Promise(() => {});
    }).then((r) => process.stdout.write("result " + JSON.stringify({ ...r, fence: String(r.fence), error: r.error && r.error.code }) + "\\n"));
  `);
  const worker = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  worker.stdout.on("data", (d) => (out += d));
  const exited = new Promise((resolve) => worker.on("exit", resolve));
  const [, runId] = await until(() => /working (\S+)\n/.exec(out), 10_000, "the callback");
  const [guardPid] = children(worker.pid);
  assert.ok(guardPid, "the worker's guard child");
  // Node and its guard stopped (a paused VM): the lease runs out with nobody to end it.
  process.kill(worker.pid, "SIGSTOP");
  process.kill(guardPid, "SIGSTOP");
  let newer;
  try {
    const db = options.store.slice("sqlite:".length);
    await until(() => {
      const leaseUntil = execFileSync("sqlite3", [db, `select lease_until from batchguard_leases where run_id = '${runId}'`]).toString().trim();
      return leaseUntil !== "" && Date.now() * 1000 > Number(leaseUntil);
    }, 10_000, "the frozen holder's lease to end");
    newer = await guard({ ...options, job: "brief", scheduledAt: S, instance: "newer" }, () => {});
    assert.equal(newer.status, "succeeded");
  } finally {
    process.kill(guardPid, "SIGCONT");
    process.kill(worker.pid, "SIGCONT");
  }
  const line = await until(() => /result (.*)\n/.exec(out), 20_000, "the frozen call's result");
  worker.kill("SIGKILL"); // its callback never settles
  await exited;
  const result = JSON.parse(line[1]);
  assert.equal(result.status, "skipped", line[1]);
  assert.equal(result.reason, `superseded by run ${newer.runId} (fence ${newer.fence})`);
  assert.equal(result.error, null);
  assert.equal(result.exitCode, 0);
  const frozen = events(options, `run_id = '${runId}'`);
  assert.deepEqual(frozen.map((e) => [e.event, e.status, e.error_code]), [["start", null, null], ["end", "superseded", null]]);
  assert.equal(events(options, "event = 'dead_letter'").length, 0);
});

/** What `batchguard run` says on stderr for the same arguments, without the link. */
async function cliMessage(args) {
  const out = await run(binary(), ["run", ...args, "--", "true"]);
  return out.stderr;
}

test("bad input rejects with the CLI's message and a code naming the case; the callback never runs", async (t) => {
  const { dir, options } = setup("bad");
  const cases = [
    ["E_MANIFEST", { ...options, manifest: path.join(dir, "missing.yaml") }],
    ["E_JOB", { ...options, job: "nope" }],
    ["E_STORE_URL", { ...options, store: "ftp://example/store" }],
    ["E_STORE", { ...options, job: "remote", store: "postgres://nobody@127.0.0.1:1/none" }],
    ["E_SLOT", { ...options, scheduledAt: "2026-11-30T10:00:30Z" }],
  ];
  for (const [code, opts] of cases) {
    await t.test(code, async () => {
      let ran = false;
      const err = await guard(opts, () => { ran = true; }).then(
        () => assert.fail("resolved"),
        (e) => e,
      );
      assert.equal(ran, false);
      assert.ok(err instanceof Error);
      assert.equal(err.code, code, err.message);
      const args = ["--manifest", opts.manifest, "--job", opts.job, "--store", opts.store];
      if (opts.scheduledAt) args.push("--scheduled-at", String(opts.scheduledAt));
      const said = await cliMessage(args);
      assert.ok(said.includes(err.message.split("\n")[0]), `CLI said:\n${said}\nguard said:\n${err.message}`);
    });
  }
});

test("a Node.js process killed with kill -9 inside its callback: the run ends INTERRUPTED within seconds and the next call catches the slot up", async () => {
  const { dir, options } = setup("kill9");
  const script = path.join(dir, "worker.js");
  fs.writeFileSync(script, `
    const { guard } = require(${JSON.stringify(packageDir)});
    guard(${JSON.stringify({ ...options, scheduledAt: S.toISOString(), instance: "doomed" })}, (run) => {
      process.stdout.write("working " + run.runId + "\\n");
      return new Promise(() => {});
    });
  `);
  const worker = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] });
  const runId = await new Promise((resolve) => {
    worker.stdout.on("data", (d) => { const m = /working (\S+)/.exec(String(d)); if (m) resolve(m[1]); });
  });
  assert.equal(events(options, "event = 'start'").length, 1);
  worker.kill("SIGKILL");
  const end = await until(() => events(options, `event = 'end' and run_id = '${runId}'`)[0], 10_000, "the interrupted end");
  assert.equal(end.status, "failure");
  assert.equal(end.error_code, "INTERRUPTED");

  let trigger;
  const next = await guard({ ...options, scheduledAt: minute(1), instance: "survivor" }, (run) => { trigger = run.trigger; });
  assert.equal(next.status, "succeeded");
  assert.deepEqual(next.slot, S, "the interrupted slot is the one worked");
  assert.equal(trigger, "catch_up");
});

test("the Node.js process told to stop (SIGTERM): the callback's signal aborts, the run ends INTERRUPTED, the process then stops", async () => {
  const { dir, options } = setup("term");
  const script = path.join(dir, "worker.js");
  fs.writeFileSync(script, `
    const { guard } = require(${JSON.stringify(packageDir)});
    guard(${JSON.stringify({ ...options, scheduledAt: S.toISOString() })}, (run) => new Promise((resolve) => {
      run.signal.addEventListener("abort", () => {
        process.stdout.write("aborted " + run.signal.reason.code + "\\n");
        resolve();
      });
      process.stdout.write("working\\n");
    })).then((r) => process.stdout.write("result " + r.status + "\\n"), (e) => process.stdout.write("error " + e.code + "\\n"));
  `);
  const worker = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const exited = new Promise((resolve) => worker.on("exit", (code, signal) => resolve({ code, signal })));
  await new Promise((resolve) => worker.stdout.on("data", (d) => { out += d; if (out.includes("working")) resolve(); }));
  worker.kill("SIGTERM");
  const { signal } = await exited;
  assert.match(out, /aborted INTERRUPTED\nresult failed\n/, "the call resolves before the process stops");
  assert.equal(signal, "SIGTERM", `the process stops by the signal it was sent (output: ${out})`);
  const end = events(options, "event = 'end'");
  assert.deepEqual(end.map((e) => [e.status, e.error_code]), [["failure", "INTERRUPTED"]]);
});

test("exitOnDeadline: the process exits with 124 once the guard has recorded the deadline", async () => {
  const { dir, options } = setup("exit");
  const script = path.join(dir, "worker.js");
  fs.writeFileSync(script, `
    const { guard } = require(${JSON.stringify(packageDir)});
    guard(${JSON.stringify({ ...options, job: "stuck", scheduledAt: S.toISOString(), exitOnDeadline: true })},
      () => new Promise(() => {}));
  `);
  const worker = spawn(process.execPath, [script], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  worker.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise((resolve) => worker.on("exit", (c) => resolve(c)));
  assert.equal(code, 124, stderr);
  assert.match(stderr, /still running at the deadline; exiting \(exitOnDeadline\)/);
  assert.deepEqual(events(options, "event = 'end'").map((e) => e.error_code), ["TTL_EXCEEDED"]);
});

test("with an OTLP endpoint, run.traceparent is the attempt's span, exported when the call ends", async () => {
  const { options } = setup("otel");
  const http = await import("node:http");
  const received = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ url: req.url, body: Buffer.concat(chunks).toString() });
      res.end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${server.address().port}`;
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json";
  try {
    let seen;
    const result = await guard({ ...options, scheduledAt: S }, (run) => { seen = run.traceparent; });
    assert.equal(result.status, "succeeded");
    assert.match(seen, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.equal(received.length, 1);
    assert.equal(received[0].url, "/v1/traces");
    const span = JSON.parse(received[0].body).resourceSpans[0].scopeSpans[0].spans[0];
    assert.equal(seen, `00-${span.traceId}-${span.spanId}-01`);
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
    server.close();
  }
  let without;
  await guard({ ...options, scheduledAt: minute(1) }, (run) => { without = run.traceparent; });
  assert.equal(without, null, "no endpoint, no span");
});
