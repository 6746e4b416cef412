"use strict";
// The in-process guard: one `batchguard run --link` child per call. The child holds the
// lease, writes the ledger, keeps the deadline and classifies failures; this file only
// turns its JSON lines (docs/node-protocol.md) into a callback call and a result, so no
// store statement or lease rule exists twice.

const { spawn } = require("node:child_process");
const readline = require("node:readline");
const { binaryPath } = require("./binary.js");

/** The protocol's `error` codes, plus the two this side adds. */
const ERROR_CODES = Object.freeze([
  "E_MANIFEST",
  "E_JOB",
  "E_STORE_URL",
  "E_STORE",
  "E_SLOT",
  "E_RUN",
  "E_BINARY",
  "E_OPTIONS",
]);

/** What `run.claim()` rejects with when the claim is refused (a stale holder, or after the deadline). */
const CLAIM_REFUSED = "E_CLAIM_REFUSED";

/** A `done` message carries at most this much of an error's message (run keeps 4 KiB). */
const MESSAGE_LIMIT = 4096;
/** How much of the child's stderr is kept to explain an exit without a result. */
const STDERR_TAIL = 4096;
const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];

/**
 * The calls in progress, and one listener per stop signal while there are any (not one per
 * call: a busy scheduler would pass Node's listener warning). A signal goes to every call's
 * child; once the last call has ended it is raised again when nobody else listens for it,
 * so the process stops as it would have without the guard.
 */
const active = new Set();
let signalsSeen = [];
function onStopSignal(signal) {
  signalsSeen.push(signal);
  for (const link of active) link.stop(signal);
}
function track(link) {
  if (active.size === 0) for (const signal of STOP_SIGNALS) process.on(signal, onStopSignal);
  active.add(link);
}
function untrack(link) {
  if (!active.delete(link) || active.size > 0) return;
  for (const signal of STOP_SIGNALS) process.removeListener(signal, onStopSignal);
  const [signal] = signalsSeen;
  signalsSeen = [];
  if (signal && process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function codedError(code, message, extra) {
  const err = new Error(message);
  err.code = code;
  if (extra) Object.assign(err, extra);
  return err;
}

function optionError(message) {
  return codedError("E_OPTIONS", `batchguard guard(): ${message}`);
}

/** RFC 3339 for `--scheduled-at`: a Date, a number (ms since the epoch) or a string. */
function slotArgument(value) {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw optionError("scheduledAt is an invalid Date");
    return value.toISOString();
  }
  if (typeof value === "number" && Number.isFinite(value)) return new Date(value).toISOString();
  if (typeof value === "string" && value !== "") return value;
  throw optionError("scheduledAt must be a Date, a time in ms or an RFC 3339 string");
}

/** The argv of `batchguard run --link` for these options (SPEC 7.1, docs/node-protocol.md). */
function runArguments(options) {
  if (options === null || typeof options !== "object") throw optionError("options must be an object");
  for (const name of ["manifest", "job"]) {
    if (typeof options[name] !== "string" || options[name] === "") {
      throw optionError(`option \`${name}\` is required (a non-empty string)`);
    }
  }
  const args = ["run", "--manifest", options.manifest, "--job", options.job, "--link"];
  const flags = { store: "--store", instance: "--instance", ledger: "--ledger", config: "--config" };
  for (const [name, flag] of Object.entries(flags)) {
    const value = options[name];
    if (value === undefined || value === null || value === "") continue;
    if (typeof value !== "string") throw optionError(`option \`${name}\` must be a string`);
    args.push(flag, value);
  }
  const hasSlot = options.scheduledAt !== undefined && options.scheduledAt !== null;
  if (hasSlot) args.push("--scheduled-at", slotArgument(options.scheduledAt));
  // An operator's recovery of a failed, lost or dead-lettered slot (`run --manual`, SPEC 7.1
  // item 11): the slot and the reason are required, as the CLI requires them.
  if (options.manual !== undefined && options.manual !== null && options.manual !== false) {
    if (options.manual !== true) throw optionError("option `manual` must be a boolean");
    if (typeof options.reason !== "string" || options.reason.trim() === "") {
      throw optionError("option `manual: true` needs `reason` (a non-empty string: why the slot is rerun)");
    }
    if (!hasSlot) throw optionError("option `manual: true` needs `scheduledAt` (the slot to recover)");
    args.push("--manual", `--reason=${options.reason}`);
  } else if (options.reason !== undefined && options.reason !== null) {
    throw optionError("option `reason` goes with `manual: true`");
  }
  return args;
}

function errorCodeOf(err) {
  return err && typeof err.code === "string" && err.code !== "" ? err.code : "EXCEPTION";
}

function errorMessageOf(err) {
  let message;
  if (err instanceof Error) message = err.message;
  else {
    try {
      message = typeof err === "string" ? err : JSON.stringify(err);
    } catch {
      message = String(err);
    }
  }
  message = message === undefined ? String(err) : message;
  return message.length > MESSAGE_LIMIT ? message.slice(0, MESSAGE_LIMIT) : message;
}

/**
 * Runs `callback(run)` under the guard once the lease is granted and resolves with what the
 * call came to. Rejects (never calling the callback) when `run` cannot run: the Error's
 * message is the CLI's and its `code` one of ERROR_CODES.
 */
function guard(options, callback) {
  return new Promise((resolve, reject) => {
    let args;
    let bin;
    try {
      if (typeof callback !== "function") throw optionError("the callback must be a function");
      args = runArguments(options);
      bin = binaryPath();
    } catch (err) {
      reject(err);
      return;
    }
    new Link(bin, args, options, callback, resolve, reject).start();
  });
}

/** One call: the child, its lines, the open attempt. */
class Link {
  constructor(bin, args, options, callback, resolve, reject) {
    this.bin = bin;
    this.args = args;
    this.options = options;
    this.callback = callback;
    this.resolve = resolve;
    this.reject = reject;
    this.settled = false;
    this.attempt = null; // the open attempt: { number, controller, outputs: Map, settled }
    this.lastError = undefined; // what the last failed callback threw
    this.nextId = 1;
    this.stderrTail = "";
    this.protocolError = null;
  }

  start() {
    const stderrMode = this.options.stderr === "inherit" ? "inherit" : "pipe";
    try {
      this.child = spawn(this.bin, this.args, {
        stdio: ["pipe", "pipe", stderrMode],
        env: this.options.env ? { ...process.env, ...this.options.env } : process.env,
        cwd: this.options.cwd,
      });
    } catch (err) {
      this.fail(codedError("E_BINARY", `cannot run ${this.bin}: ${err.message}`));
      return;
    }
    this.child.on("error", (err) => {
      this.fail(codedError("E_BINARY", `cannot run ${this.bin}: ${err.message}`));
    });
    // A guard that has died must not kill the app with EPIPE: its exit is handled below.
    this.child.stdin.on("error", () => {});
    if (this.child.stderr) {
      this.child.stderr.setEncoding("utf8");
      this.child.stderr.on("data", (chunk) => {
        this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
        const sink = this.options.stderr;
        if (sink === "ignore") return;
        if (typeof sink === "function") sink(chunk);
        else process.stderr.write(chunk);
      });
    }
    const lines = readline.createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => this.onLine(line));
    // `close` comes after stdout and stderr have ended, so every line has been read.
    this.child.on("close", (code, signal) => this.onExit(code, signal));
    track(this);
  }

  /** The Node process was told to stop: pass it on; `run` aborts the callback and records it. */
  stop(signal) {
    if (this.child && this.child.exitCode === null) this.child.kill(signal);
  }

  send(message) {
    if (this.child.stdin.writable) this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  onLine(line) {
    if (line.trim() === "") return;
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      this.protocolError = `batchguard run --link printed a line that is not JSON: ${line.slice(0, 200)}`;
      return;
    }
    switch (message.event) {
      case "acquired":
        return this.onAcquired(message);
      case "ack":
      case "claimed":
        return this.onAck(message);
      case "abort":
        return this.onAbort(message);
      case "ended":
        return this.onEnded(message);
      case "result":
        return this.onResult(message);
      case "error":
        return this.fail(codedError(message.code || "E_RUN", message.message || "batchguard run failed"));
      default:
      // Events this version does not know are ignored: the guard may say more later.
    }
  }

  onAcquired(message) {
    const controller = new AbortController();
    const attempt = {
      number: message.attempt,
      controller,
      outputs: new Map(),
      settled: false,
      open: true,
    };
    this.attempt = attempt;
    const run = Object.freeze({
      slot: new Date(message.slot),
      attempt: message.attempt,
      fence: BigInt(message.fence),
      runId: message.runId,
      deadline: new Date(message.deadline),
      abortAt: new Date(message.abortAt),
      trigger: message.trigger,
      traceparent: message.traceparent === undefined ? null : message.traceparent,
      signal: controller.signal,
      output: (key) => this.output(attempt, key),
      claim: (key, client) => this.claim(attempt, run, key, client),
    });
    let outcome;
    try {
      outcome = Promise.resolve(this.callback(run));
    } catch (err) {
      outcome = Promise.reject(err);
    }
    outcome.then(
      () => this.done(attempt, { op: "done", status: "success" }),
      (err) => {
        this.lastError = err;
        this.done(attempt, {
          op: "done",
          status: "failure",
          code: errorCodeOf(err),
          message: errorMessageOf(err),
        });
      },
    );
  }

  done(attempt, message) {
    attempt.settled = true;
    // After `ended` the guard has recorded the attempt (the deadline won): nothing to say.
    if (attempt.open && attempt === this.attempt) this.send(message);
  }

  output(attempt, key) {
    if (typeof key !== "string" || key === "") {
      return Promise.reject(codedError("E_OUTPUT", "run.output(key): the key must be a non-empty string"));
    }
    if (!attempt.open || attempt !== this.attempt) {
      return Promise.reject(
        codedError("E_OUTPUT", `run.output(${JSON.stringify(key.slice(0, 100))}) refused: attempt ${attempt.number} has ended`),
      );
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      attempt.outputs.set(id, { resolve, reject, key });
      this.send({ op: "output", id, key });
    });
  }

  /**
   * `run.claim(key, client?)`: the first claim of (job, key) ever resolves true, a key claimed
   * before false; a refusal (a newer holder has the slot, or the attempt has ended) rejects
   * with code E_CLAIM_REFUSED. With a `pg` or `mysql2` client it is the SQL function
   * `batchguard_claim` inside the caller's transaction; without one, the link's `claim`.
   */
  claim(attempt, run, key, client) {
    const bad = badClaimKey(key);
    if (bad) return Promise.reject(codedError("E_CLAIM_KEY", `run.claim(key): ${bad}`));
    if (!attempt.open || attempt !== this.attempt) {
      return Promise.reject(
        codedError(
          CLAIM_REFUSED,
          `run.claim(${JSON.stringify(key.slice(0, 100))}) refused: attempt ${attempt.number} has ended (the lease may be another holder's)`,
        ),
      );
    }
    if (client !== undefined && client !== null) {
      let dialect;
      try {
        dialect = sqlDialect(client);
      } catch (err) {
        return Promise.reject(err);
      }
      return claimInTransaction(dialect, this.options.job, key, run);
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      attempt.outputs.set(id, { resolve, reject, key, claim: true });
      this.send({ op: "claim", id, key });
    });
  }

  onAck(message) {
    const attempt = this.attempt;
    const pending = attempt && attempt.outputs.get(message.id);
    if (!pending) return;
    attempt.outputs.delete(message.id);
    if (pending.claim) return settleClaim(pending, message);
    if (message.ok) pending.resolve();
    else pending.reject(codedError("E_OUTPUT", message.error || `output ${pending.key} refused`));
  }

  onAbort(message) {
    const attempt = this.attempt;
    if (!attempt || attempt.controller.signal.aborted) return;
    const reason =
      message.reason === "deadline"
        ? codedError("TTL_EXCEEDED", "batchguard: the attempt's deadline is near (deadline - grace)")
        : codedError("INTERRUPTED", "batchguard: the process was told to stop");
    attempt.controller.abort(reason);
  }

  onEnded(message) {
    const attempt = this.attempt;
    if (!attempt) return;
    attempt.open = false;
    for (const pending of attempt.outputs.values()) {
      const code = pending.claim ? CLAIM_REFUSED : "E_OUTPUT";
      const what = pending.claim ? `claim of ${pending.key}` : `output ${pending.key}`;
      pending.reject(codedError(code, `${what} refused: the attempt ended first`));
    }
    attempt.outputs.clear();
    if (message.code === "TTL_EXCEEDED" && !attempt.settled) {
      // The attempt is over and its lease released, but nothing stops the callback: it runs
      // on as a stale holder (its writes are refused by the fence, its outputs here).
      this.lastError = codedError("TTL_EXCEEDED", "the callback was still running at the deadline (not stopped)");
      if (this.options.exitOnDeadline) {
        process.stderr.write(
          `batchguard: ${this.options.job}: the callback was still running at the deadline; exiting (exitOnDeadline)\n`,
        );
        process.exit(124);
      }
    }
  }

  /**
   * The call's answer (SPEC 7.1 item 28): `succeeded`, `skipped` with its `reason` (held by …,
   * already succeeded …, dead-lettered: a slot dead-lettered earlier, superseded by run …:
   * this call's attempt lost its lease to a newer holder), `failed`, or `dead_lettered` (only
   * the call whose attempt dead-lettered the slot). The binary decides; nothing is mapped here.
   */
  onResult(message) {
    if (this.settled) return;
    const result = {
      status: message.status,
      reason: message.reason === undefined ? null : message.reason,
      slot: message.slot ? new Date(message.slot) : null,
      runId: message.runId === undefined ? null : message.runId,
      fence: message.fence === undefined || message.fence === null ? null : BigInt(message.fence),
      attempt: message.attempt === undefined ? null : message.attempt,
      code: message.code === undefined ? null : message.code,
      exitCode: message.exitCode,
      error: null,
    };
    if (result.status === "failed" || result.status === "dead_lettered") {
      const last = this.lastError;
      if (last instanceof Error && (!result.code || errorCodeOf(last) === result.code)) {
        result.error = last;
      } else {
        result.error = codedError(result.code || "EXCEPTION", `the attempt failed with ${result.code || "an error"}`);
      }
    }
    this.result = result;
  }

  fail(err) {
    if (this.settled) return;
    this.settled = true;
    this.cleanup();
    if (this.child && this.child.exitCode === null && !this.child.killed) this.child.stdin.end();
    this.reject(err);
  }

  onExit(code, signal) {
    if (this.settled) return;
    if (this.result) {
      this.settled = true;
      this.cleanup();
      this.resolve(this.result);
      return;
    }
    const tail = this.stderrTail.trim().split("\n").slice(-5).join("\n");
    const how = signal ? `was killed by ${signal}` : `exited with ${code}`;
    const detail = this.protocolError || tail || "no message";
    this.fail(codedError("E_RUN", `batchguard run ${how} without a result: ${detail}`, { exitCode: code }));
  }

  cleanup() {
    if (this.attempt) this.attempt.open = false;
    // After the promise has settled, so its handlers run before a re-raised signal acts.
    setImmediate(() => untrack(this));
  }
}

/** A claimed key's limits, as the binary checks them (an output line; MySQL keeps 1024 characters). */
function badClaimKey(key) {
  if (typeof key !== "string" || key === "") return "a claimed key is a non-empty string";
  if (/[\n\r\0]/.test(key)) return "a claimed key is one line, without NUL";
  if (Buffer.byteLength(key) > 1024) return "a claimed key is at most 1024 bytes (hash a longer one: `sha256:…`)";
  return null;
}

/** The link's answer to a `claim`: `claimed` (bool), or a refusal with its `code`. */
function settleClaim(pending, message) {
  if (message.ok !== false && typeof message.claimed === "boolean") {
    pending.resolve(message.claimed);
    return;
  }
  const code = typeof message.code === "string" && message.code !== "" ? message.code : CLAIM_REFUSED;
  pending.reject(codedError(code, message.error || message.message || `claim of ${pending.key} refused`));
}

/**
 * Which SQL a client speaks, from what it is (never from a query that would have to be
 * undone): a `mysql2` connection has `execute()` next to `query()` and either `promise()`
 * (the callback API's connection) or the callback connection in `.connection` (the promise
 * API's); a `pg` client (`new pg.Client()`, or a pool's client from `pool.connect()`) has
 * `connectionParameters`. A pool is refused: its `query()` takes any connection, never the
 * one the caller's transaction is open on.
 */
function sqlDialect(client) {
  if (typeof client !== "object" || typeof client.query !== "function") {
    throw codedError("E_OPTIONS", "run.claim(key, client): the client must be a pg client or a mysql2 connection (an object with query())");
  }
  const poolMessage =
    "run.claim(key, client): that is a pool, whose query() may use any connection: pass the client the transaction is open on (pg: `await pool.connect()`, mysql2: `await pool.getConnection()`)";
  if (typeof client.getConnection === "function" || (typeof client.totalCount === "number" && typeof client.idleCount === "number")) {
    throw codedError("E_OPTIONS", poolMessage);
  }
  if (typeof client.execute === "function") {
    if (client.connection && typeof client.connection.execute === "function") return { kind: "mysql", client };
    if (typeof client.promise === "function") return { kind: "mysql", client: client.promise() };
  }
  if (client.connectionParameters && typeof client.connectionParameters === "object") return { kind: "postgres", client };
  throw codedError(
    "E_OPTIONS",
    "run.claim(key, client): cannot tell the client's database: a pg Client (or a pg pool's client) or a mysql2 connection is expected",
  );
}

const CLAIM_SQL = {
  postgres: "SELECT batchguard_claim($1, $2, $3, $4) AS claimed",
  mysql: "SELECT batchguard_claim(?, ?, ?, ?) AS claimed",
};

/** True for PostgreSQL's boolean, MySQL's BOOLEAN (TINYINT 1) or its text. */
function truthyColumn(value) {
  return value === true || value === 1 || value === "1" || value === "t" || value === 1n;
}

async function claimInTransaction(dialect, job, key, run) {
  const values = [job, key, run.runId, run.fence.toString()];
  let rows;
  try {
    const answer = await dialect.client.query(CLAIM_SQL[dialect.kind], values);
    rows = dialect.kind === "mysql" ? answer[0] : answer.rows;
  } catch (err) {
    throw claimError(dialect.kind, key, err);
  }
  if (!Array.isArray(rows) || rows.length !== 1 || !("claimed" in rows[0])) {
    throw codedError("E_STORE", `run.claim(${JSON.stringify(key.slice(0, 100))}): batchguard_claim answered no row`);
  }
  return truthyColumn(rows[0].claimed);
}

/**
 * The function's refusal (PostgreSQL: RAISE, SQLSTATE P0001, a message starting with
 * `batchguard:`; MySQL/MariaDB: SIGNAL SQLSTATE 45000 with `batchguard: run …`, the holder
 * check, not the key-length one) becomes E_CLAIM_REFUSED; a database
 * without the function says to migrate; anything else is the driver's error as it came (its
 * code, e.g. 57P01, is what the manifest's retry classifies).
 */
function claimError(kind, key, err) {
  if (!err || typeof err !== "object") return err;
  const message = typeof err.message === "string" ? err.message : String(err);
  const refused =
    kind === "postgres"
      ? err.code === "P0001" && message.startsWith("batchguard:")
      : err.sqlState === "45000" && message.startsWith("batchguard: run ");
  if (refused) return codedError(CLAIM_REFUSED, message, { cause: err });
  const missing =
    kind === "postgres"
      ? err.code === "42883" && message.includes("batchguard_claim")
      : err.errno === 1305 || err.code === "ER_SP_DOES_NOT_EXIST";
  if (missing) {
    return codedError(
      "E_STORE",
      `run.claim(${JSON.stringify(key.slice(0, 100))}): this database has no batchguard_claim(): run \`batchguard store migrate --store URL\` on it (${message})`,
      { cause: err },
    );
  }
  return err;
}

module.exports = { guard, runArguments, sqlDialect, ERROR_CODES, CLAIM_REFUSED };
