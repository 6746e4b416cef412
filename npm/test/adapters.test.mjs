// The schedulers' callbacks wrapped by guarded(), driven by the real node-cron and croner
// (from npm), and node-cron 4.6's RunCoordinator backed by the guard: the tick each library
// passes becomes the slot; a handler with no tick time (NestJS @Cron) gets the store's clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { guarded, runCoordinator, tickTime } from "../batchguard/index.js";
import { binary, scratch, tools } from "./helpers.mjs";
import { manifest } from "./fixtures/manifest.mjs";

process.env.BATCHGUARD_BINARY = binary();
const require = createRequire(path.join(tools(), "package.json"));

/**
 * The live tests tick every second, so a call may still be running when the next tick comes
 * (a loaded CI machine): what they assert holds however long a call takes. Each tick names
 * its own slot (distinct lock keys), and the fixture's wide `retry.catch_up` keeps a call
 * that starts late from being refused as behind the store's clock (SPEC 7.1 item 22).
 */
function setup(name, schedule, dialect) {
  const dir = scratch(name);
  const file = path.join(dir, "app.batchguard.yaml");
  fs.writeFileSync(file, manifest({ schedule, dialect }));
  return { manifest: file, job: "settle", store: `sqlite:${path.join(dir, "store.db")}`, stderr: "ignore" };
}

/** Collects `count` results of a scheduled, guarded callback, then stops the schedule. */
function collect(count, start) {
  return new Promise((resolve, reject) => {
    const results = [];
    let stop;
    const onResult = (result, tick) => {
      results.push({ result, tick });
      if (results.length === count) {
        stop();
        resolve(results);
      }
    };
    stop = start(onResult, reject);
  });
}

test("node-cron 4: the task context's date is the slot", async () => {
  const cron = require("node-cron");
  const options = setup("node-cron", "* * * * * *", "node-cron");
  const results = await collect(2, (onResult, onError) => {
    const tick = guarded(options, (run, context) => ({ slot: run.slot, date: context.date }));
    const task = cron.schedule("* * * * * *", (context) =>
      tick(context).then((result) => onResult(result, context.date), onError));
    return () => task.stop();
  });
  for (const { result, tick } of results) {
    assert.equal(result.status, "succeeded");
    assert.deepEqual(result.slot, tick);
  }
});

test("croner: the run time due at the instance's currentRun() is the slot", async () => {
  const { Cron } = require("croner");
  const options = setup("croner", "* * * * * *", "croner");
  const results = await collect(2, (onResult, onError) => {
    const tick = guarded(options, () => {});
    const job = new Cron("* * * * * *", (self) => {
      const due = new Date(Math.floor(self.currentRun().getTime() / 1000) * 1000);
      tick(self).then((result) => onResult(result, due), onError);
    });
    return () => job.stop();
  });
  for (const { result, tick } of results) {
    assert.equal(result.status, "succeeded");
    assert.deepEqual(result.slot, tick);
  }
});

test("croner: a tick triggered exactly on the second is that second's slot, not the one before", async () => {
  const { Cron } = require("croner");
  // croner's own instance and previousRuns(); only the trigger time is pinned (croner sets
  // currentRun() to the time its timer fired, which lands on .000 often enough to matter).
  class TriggeredAt extends Cron {
    constructor(pattern, at) {
      super(pattern, { paused: true });
      this.at = at;
    }
    currentRun() {
      return this.at;
    }
  }
  const slot = new Date("2026-11-30T10:05:00Z");
  for (const [pattern, late] of [["*/5 * * * *", 0], ["*/5 * * * *", 4], ["* * * * * *", 0], ["* * * * * *", 999]]) {
    const cron = new TriggeredAt(pattern, new Date(slot.getTime() + late));
    assert.deepEqual(tickTime([cron]), slot, `${pattern} triggered ${late} ms after ${slot.toISOString()}`);
    cron.stop();
  }
  const options = setup("croner-exact", "*/5 * * * *", "croner");
  const cron = new TriggeredAt("*/5 * * * *", slot);
  let seen;
  const result = await guarded(options, (run) => { seen = run.slot; })(cron);
  cron.stop();
  assert.equal(result.status, "succeeded", `${result.status} ${result.reason}`);
  assert.deepEqual(result.slot, slot);
  assert.deepEqual(seen, slot);
});

test("a handler with no tick time (NestJS @Cron) works the slot of the store's clock", async () => {
  const options = setup("nest", "* * * * *", "cron-npm");
  const before = Date.now();
  const result = await guarded(options, () => {})();
  assert.equal(result.status, "succeeded");
  const slot = result.slot.getTime();
  assert.equal(slot % 60_000, 0);
  assert.ok(slot <= Date.now() + 2000 && slot > before - 62_000, `${result.slot.toISOString()} is the minute of the call`);
});

test("node-cron 4.6's RunCoordinator: one of two tasks on the same slot runs, the other is not elected", async () => {
  const cron = require("node-cron");
  const options = setup("coordinator", "* * * * * *", "node-cron");
  const coordinatorResults = [];
  const coordinator = runCoordinator({ ...options, job: () => "settle", onResult: (r) => coordinatorResults.push(r) });
  const ran = [];
  const skipped = [];
  const tasks = ["a", "b"].map((who) => {
    const task = cron.schedule("* * * * * *", (context) => { ran.push([who, context.date.getTime()]); },
      { name: "settle", distributed: true, runCoordinator: coordinator });
    task.on("execution:skipped", (context) => skipped.push([who, context.date.getTime(), context.reason]));
    return task;
  });
  await new Promise((resolve) => {
    const check = setInterval(() => {
      if (coordinatorResults.length >= 4) { clearInterval(check); resolve(); }
    }, 50);
  });
  tasks.forEach((task) => task.stop());
  const slots = new Set(ran.map(([, slot]) => slot));
  assert.equal(slots.size, ran.length, `one run per slot: ${JSON.stringify(ran)}`);
  assert.ok(skipped.some(([, , reason]) => reason === "not-elected"), JSON.stringify(skipped));
  for (const r of coordinatorResults) assert.ok(["succeeded", "skipped"].includes(r.status), `${r.status} ${r.reason}`);
  const held = coordinatorResults.filter((r) => r.status === "skipped");
  assert.ok(held.every((r) => /^(held by|already succeeded)/.test(r.reason)));
});
