// The JSON-lines protocol as the package parses it (docs/node-protocol.md), against a tiny
// stand-in peer; the guard's behaviour itself is tested against the real binary (guard.test.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { guard, guarded, tickTime } from "../batchguard/index.mjs";

const fake = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "fake-link.mjs");
const options = { manifest: "m.yaml", job: "j", stderr: "ignore" };

function withFake(scenario, fn) {
  const saved = { ...process.env };
  process.env.BATCHGUARD_BINARY = fake;
  process.env.FAKE_SCENARIO = scenario;
  return fn().finally(() => {
    process.env.BATCHGUARD_BINARY = saved.BATCHGUARD_BINARY;
    process.env.FAKE_SCENARIO = saved.FAKE_SCENARIO;
    if (saved.BATCHGUARD_BINARY === undefined) delete process.env.BATCHGUARD_BINARY;
    if (saved.FAKE_SCENARIO === undefined) delete process.env.FAKE_SCENARIO;
  });
}

test("an error line rejects with its code and message, the callback never called", () =>
  withFake("error", async () => {
    let called = false;
    await assert.rejects(guard(options, () => { called = true; }), (err) => {
      assert.equal(err.code, "E_JOB");
      assert.equal(err.message, "no job `nope` in m.yaml");
      return true;
    });
    assert.equal(called, false);
  }));

test("a binary that exits without a result rejects with E_RUN and its stderr", () =>
  withFake("not-link", async () => {
    await assert.rejects(guard(options, () => {}), (err) => {
      assert.equal(err.code, "E_RUN");
      assert.match(err.message, /exited with 2 without a result: error: unexpected argument '--link'/);
      return true;
    });
  }));

test("options become the CLI's flags", () =>
  withFake("args", async () => {
    const result = await guard(
      { ...options, store: "sqlite:s.db", instance: "i-1", ledger: "l.jsonl", config: "b.toml",
        scheduledAt: new Date("2026-03-01T02:00:00.000Z") },
      () => {},
    );
    assert.deepEqual(JSON.parse(result.reason), [
      "run", "--manifest", "m.yaml", "--job", "j", "--link", "--store", "sqlite:s.db",
      "--instance", "i-1", "--ledger", "l.jsonl", "--config", "b.toml",
      "--scheduled-at", "2026-03-01T02:00:00.000Z",
    ]);
  }));

test("manual: true with a reason is run's --manual --reason (an operator's rerun of a dead-lettered slot)", () =>
  withFake("args", async () => {
    const result = await guard(
      { ...options, scheduledAt: "2026-03-01T02:00:00Z", manual: true, reason: "-fixed the customer table" },
      () => {},
    );
    assert.deepEqual(JSON.parse(result.reason), [
      "run", "--manifest", "m.yaml", "--job", "j", "--link",
      "--scheduled-at", "2026-03-01T02:00:00Z", "--manual", "--reason=-fixed the customer table",
    ]);
  }));

test("acquired becomes run (bigint fence past 2^53, Dates), outputs are acked or refused, done is sent", () =>
  withFake("success", async () => {
    let seen;
    const result = await guard(options, async (run) => {
      seen = run;
      await run.output("inv-1");
      await assert.rejects(run.output("refused"), { code: "E_OUTPUT", message: "after the deadline" });
    });
    assert.equal(seen.fence, 9007199254740993n);
    assert.equal(typeof seen.fence, "bigint");
    assert.deepEqual(seen.slot, new Date("2026-03-01T02:00:00Z"));
    assert.deepEqual(seen.deadline, new Date("2026-03-01T02:01:29Z"));
    assert.equal(seen.attempt, 2);
    assert.equal(seen.trigger, "retry");
    assert.equal(seen.signal.aborted, false);
    assert.equal(result.status, "succeeded");
    assert.equal(result.fence, 9007199254740993n);
    const sent = JSON.parse(result.reason);
    assert.deepEqual(sent.map((m) => m.op), ["output", "output", "done"]);
    assert.deepEqual(sent[2], { op: "done", status: "success" });
    await assert.rejects(seen.output("late"), { code: "E_OUTPUT" });
  }));

test("run.claim(key) without a client is the link's claim: its answer is the boolean, a refusal its code", () =>
  withFake("success", async () => {
    let seen;
    const result = await guard(options, async (run) => {
      seen = run;
      assert.equal(await run.claim("inv-1"), true);
      assert.equal(await run.claim("inv-1"), false);
      await assert.rejects(run.claim("refused"), { code: "E_CLAIM_REFUSED", message: /no longer its slot's latest holder/ });
      await assert.rejects(run.claim(""), { code: "E_CLAIM_KEY" });
    });
    assert.equal(result.status, "succeeded");
    const sent = JSON.parse(result.reason);
    assert.deepEqual(sent.map((m) => [m.op, m.key]), [["claim", "inv-1"], ["claim", "inv-1"], ["claim", "refused"], ["done", undefined]]);
    assert.ok(sent.slice(0, 3).every((m, i, all) => Number.isInteger(m.id) && all.filter((o) => o.id === m.id).length === 1), "one request id each");
    await assert.rejects(seen.claim("late"), { code: "E_CLAIM_REFUSED", message: /has ended/ });
  }));

test("a thrown error is sent as done failure with err.code, and is the result's error", () =>
  withFake("success", async () => {
    const thrown = Object.assign(new Error("connection reset"), { code: "ECONNRESET" });
    const result = await guard(options, () => { throw thrown; });
    assert.equal(result.status, "failed");
    assert.equal(result.code, "ECONNRESET");
    assert.equal(result.error, thrown);
    const sent = JSON.parse(result.reason);
    assert.deepEqual(sent.at(-1), { op: "done", status: "failure", code: "ECONNRESET", message: "connection reset" });
  }));

test("an error without a string code is EXCEPTION", () =>
  withFake("success", async () => {
    const result = await guard(options, async () => { throw new Error("boom"); });
    assert.equal(result.code, "EXCEPTION");
  }));

test("a missing binary rejects with E_BINARY", async () => {
  const saved = process.env.BATCHGUARD_BINARY;
  process.env.BATCHGUARD_BINARY = "/nonexistent/batchguard";
  try {
    await assert.rejects(guard(options, () => {}), { code: "E_BINARY", message: /BATCHGUARD_BINARY=\/nonexistent\/batchguard: no such file/ });
  } finally {
    if (saved === undefined) delete process.env.BATCHGUARD_BINARY;
    else process.env.BATCHGUARD_BINARY = saved;
  }
});

test("bad options reject with E_OPTIONS before anything runs", async () => {
  await assert.rejects(guard({ job: "j" }, () => {}), { code: "E_OPTIONS", message: /`manifest` is required/ });
  await assert.rejects(guard(options, "not a function"), { code: "E_OPTIONS" });
  await assert.rejects(guard({ ...options, scheduledAt: new Date("x") }, () => {}), { code: "E_OPTIONS" });
  const slot = "2026-03-01T02:00:00Z";
  await assert.rejects(guard({ ...options, scheduledAt: slot, manual: true }, () => {}),
    { code: "E_OPTIONS", message: /`manual: true` needs `reason`/ });
  await assert.rejects(guard({ ...options, manual: true, reason: "fixed" }, () => {}),
    { code: "E_OPTIONS", message: /`manual: true` needs `scheduledAt`/ });
  await assert.rejects(guard({ ...options, scheduledAt: slot, manual: "yes", reason: "fixed" }, () => {}),
    { code: "E_OPTIONS", message: /`manual` must be a boolean/ });
  await assert.rejects(guard({ ...options, scheduledAt: slot, reason: "fixed" }, () => {}),
    { code: "E_OPTIONS", message: /`reason` goes with `manual: true`/ });
});

test("tick times: node-cron 4's context, node-cron 3's Date, croner's instance, none", () => {
  const slot = new Date("2026-03-01T02:00:00Z");
  assert.equal(tickTime([{ date: slot, triggeredAt: new Date(), execution: { reason: "scheduled" } }]), slot);
  assert.equal(tickTime([{ date: slot, triggeredAt: new Date(), execution: { reason: "invoked" } }]), undefined);
  assert.equal(tickTime([slot]), slot);
  // croner's previousRuns(1, t) is the latest run strictly before t (every second here).
  const previousRuns = (n, ref) => [new Date(Math.ceil(ref.getTime() / 1000) * 1000 - 1000)];
  for (const late of [16, 0, 999]) {
    const triggered = new Date(slot.getTime() + late);
    assert.deepEqual(tickTime([{ currentRun: () => triggered, previousRuns }, undefined]), slot, `triggered ${late} ms after`);
  }
  assert.equal(tickTime([]), undefined);
  assert.equal(tickTime(["manual"]), undefined);
});

test("guarded passes the tick time as --scheduled-at and the scheduler's arguments to fn", () =>
  withFake("args", async () => {
    const slot = new Date("2026-03-01T02:00:00Z");
    const result = await guarded(options, () => {})({ currentRun: () => slot, previousRuns: () => [slot] });
    assert.ok(JSON.parse(result.reason).includes("2026-03-01T02:00:00.000Z"));
  }));
