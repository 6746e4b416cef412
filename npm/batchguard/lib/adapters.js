"use strict";
// Schedulers' callbacks wrapped in the guard. Each scheduler says when its tick was due in
// its own way; that time becomes `--scheduled-at`, so every instance woken by the same tick
// names the same slot. Without one (a NestJS `@Cron` handler) the store's clock decides,
// with the tick tolerance of `run`.

const { guard } = require("./guard.js");

/**
 * The tick time a scheduler passed to its callback, or undefined:
 * - node-cron 4: a TaskContext `{ date, triggeredAt, execution }` (`date` is the slot; a
 *   manual `task.execute()` has `execution.reason === "invoked"` and no slot of its own);
 * - node-cron 3: the Date of the tick (or the strings "manual" / "init");
 * - croner: the Cron instance. Its `currentRun()` is when the callback was triggered (at or
 *   a few ms after the due time), so the slot is the latest run at or before it. croner's
 *   `previousRuns(1, t)` is the latest run strictly before `t`, so it is asked from 1 ms
 *   later: a tick triggered exactly on the second (`…:00.000`) is that second's slot, not
 *   the one before (which had already run: the tick was skipped as "already succeeded").
 */
function tickTime(args) {
  const first = args[0];
  if (first instanceof Date) return first;
  if (first && typeof first === "object") {
    if (first.date instanceof Date && "triggeredAt" in first) {
      return first.execution && first.execution.reason === "invoked" ? undefined : first.date;
    }
    if (typeof first.currentRun === "function" && typeof first.previousRuns === "function") {
      const triggered = first.currentRun();
      if (!(triggered instanceof Date)) return undefined;
      const [due] = first.previousRuns(1, new Date(triggered.getTime() + 1));
      return due instanceof Date ? due : undefined;
    }
  }
  return undefined;
}

/**
 * `guarded(options, fn)`: a function to hand to a scheduler. Each call runs
 * `fn(run, ...schedulerArgs)` under `guard()` with the tick time as `scheduledAt` (unless
 * `options.scheduledAt` is given: a value, or a function of the scheduler's arguments) and
 * resolves with the guard's result.
 */
function guarded(options, fn) {
  if (typeof fn !== "function") throw new TypeError("batchguard guarded(): fn must be a function");
  const wrapper = function batchguardGuarded(...args) {
    let scheduledAt = options && options.scheduledAt;
    if (typeof scheduledAt === "function") scheduledAt = scheduledAt(...args);
    else if (scheduledAt === undefined) scheduledAt = tickTime(args);
    return guard({ ...options, scheduledAt }, (run) => fn.call(this, run, ...args));
  };
  return wrapper;
}

/** node-cron 4's coordination key: `${task name}:${slot.toISOString()}`. */
const COORDINATOR_KEY = /^(.*):(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)$/;

/**
 * A node-cron 4.6+ `RunCoordinator` backed by the guard: `shouldRun(key)` starts a guarded
 * call for the key's slot and answers true once the lease is granted, false when the slot
 * is skipped; `onComplete(key)` ends that attempt as a success. The hook carries no outcome,
 * error or output, so a task that throws is still recorded as succeeded: use `guarded()` for
 * error codes, retries, outputs and the fencing token.
 *
 * `options` are guard()'s; `options.job` may be a function of the task name (default: the
 * task name itself).
 */
function runCoordinator(options) {
  const held = new Map();
  return {
    shouldRun(key) {
      const match = COORDINATOR_KEY.exec(key);
      if (!match) {
        return Promise.reject(new Error(`batchguard coordinator: key ${JSON.stringify(key)} is not name:slot`));
      }
      const [, name, slot] = match;
      const job = typeof options.job === "function" ? options.job(name) : options.job || name;
      return new Promise((answer, refuse) => {
        let granted = false;
        const call = guard({ ...options, job, scheduledAt: slot }, (run) => {
          granted = true;
          return new Promise((finish, abort) => {
            held.set(key, finish);
            run.signal.addEventListener("abort", () => abort(run.signal.reason), { once: true });
            answer(true);
          });
        });
        call.then(
          (result) => {
            held.delete(key);
            if (!granted) answer(false);
            if (options.onResult) options.onResult(result, key);
          },
          (err) => {
            held.delete(key);
            if (!granted) refuse(err);
          },
        );
      });
    },
    onComplete(key) {
      const finish = held.get(key);
      held.delete(key);
      if (finish) finish();
    },
  };
}

module.exports = { guarded, runCoordinator, tickTime };
