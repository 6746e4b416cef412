// A host of the chaos test that schedules its job in-process, as the incident's app does:
// a timer on a fixed step (like node-cron's `*/N * * * * *`), each tick through guard()
// from npm/batchguard with the tick as scheduledAt; calls overlap as a real scheduler's
// do. The callback records `begin` and `apply` in the job's own history (CHAOS_APPLIES),
// then the output. Every call's result goes to CHAOS_RESULTS. It stops ticking when the
// file CHAOS_STOP exists and exits once its calls have returned.
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { guard } = require(process.env.CHAOS_PACKAGE);
const env = process.env;
const step = Number(env.CHAOS_STEP_MS);
const seedSmall = Number(env.CHAOS_SEED_SMALL);
const inflight = new Set();

function rec(ev, run, slot) {
  const line = JSON.stringify({
    ev, t: Date.now() / 1000, fence: Number(run.fence), run: run.runId, slot,
    attempt: run.attempt, host: env.CHAOS_HOST, via: "guard", pid: process.pid,
  });
  fs.appendFileSync(env.CHAOS_APPLIES, line + "\n");
}

function result(obj) {
  fs.appendFileSync(env.CHAOS_RESULTS, JSON.stringify(obj) + "\n");
}

// The same pseudo-random work time and failure choice as job.sh (a function of the fence).
function plan(fence) {
  const f = Number(fence);
  const fail = (f * 7 + seedSmall) % 11 === 0;
  const work = 200 + ((f * 7919 + seedSmall) % 1300);
  return { fail, work };
}

async function tick(at) {
  const slot = new Date(at);
  try {
    const r = await guard(
      {
        manifest: env.CHAOS_MANIFEST, job: env.CHAOS_JOB, store: env.CHAOS_STORE,
        ledger: env.CHAOS_LEDGER || undefined, scheduledAt: slot, instance: env.CHAOS_HOST,
        stderr: (line) => fs.appendFileSync(env.CHAOS_STDERR, `${line}\n`),
      },
      async (run) => {
        const s = run.slot.toISOString();
        rec("begin", run, s);
        const { fail, work } = plan(run.fence);
        if (fail) {
          rec("fail", run, s);
          const err = new Error("chaos: planned failure");
          err.code = "EX_TEMPFAIL";
          throw err;
        }
        await new Promise((r) => setTimeout(r, work));
        // guard() cannot stop a callback (SPEC 7.1 item 25): a callback honours its signal
        // and deadline itself. A process frozen between this check and the write is the
        // window only a fenced write closes (the next issue's claims).
        if (run.signal.aborted || Date.now() >= run.deadline.getTime()) {
          rec("abandon", run, s);
          const err = new Error("chaos: past the deadline, not applied");
          err.code = "TTL_EXCEEDED";
          throw err;
        }
        rec("apply", run, s);
        await run.output(s);
      },
    );
    result({ tick: slot.toISOString(), status: r.status, reason: r.reason ?? null,
             fence: r.fence === undefined ? null : Number(r.fence),
             slot: r.slot ? r.slot.toISOString() : null, code: r.code ?? null });
  } catch (err) {
    result({ tick: slot.toISOString(), status: "error", code: err.code ?? null, reason: String(err.message).slice(0, 300) });
  }
}

function schedule() {
  if (fs.existsSync(env.CHAOS_STOP)) {
    Promise.allSettled([...inflight]).then(() => process.exit(0));
    return;
  }
  const now = Date.now();
  const next = Math.floor(now / step) * step + step;
  setTimeout(() => {
    const p = tick(next).finally(() => inflight.delete(p));
    inflight.add(p);
    schedule();
  }, next - now);
}

schedule();
