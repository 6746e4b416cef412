// Types of the batchguard npm package (CommonJS and ESM entry points share them).

/** How `batchguard run --link` is called: each option is the CLI flag of the same name. */
export interface GuardOptions {
  /** The manifest file (`--manifest`). */
  manifest: string;
  /** The job's name in the manifest (`--job`). */
  job: string;
  /** The store URL (`--store`); else BATCHGUARD_STORE, `[run] store`, or the SQLite default. */
  store?: string;
  /** The scheduler's tick (`--scheduled-at`); without it the store's clock picks the slot. */
  scheduledAt?: Date | string | number;
  /** Who holds the lease (`--instance`); default host/pm2:N/pid. */
  instance?: string;
  /** Where the ledger goes (`--ledger`), when not in the store. */
  ledger?: string;
  /** batchguard.toml (`--config`). */
  config?: string;
  /**
   * Exit the Node.js process (code 124) when the deadline passes with the callback still
   * running. Without it the attempt ends TTL_EXCEEDED ("callback still running, not
   * stopped") and the callback runs on: nothing in the guard can stop it.
   */
  exitOnDeadline?: boolean;
  /** An operator's rerun of a failed, lost or dead-lettered slot (`run --manual`): needs `scheduledAt` and `reason`. */
  manual?: boolean;
  /** Why the manual rerun (`--reason`, recorded in the `manual` event); only with `manual: true`. */
  reason?: string;
  /** The guard's stderr lines (skips, failures): copied to process.stderr by default; "inherit" hands fd 2 over (then a failed start's message is only in the log). */
  stderr?: "inherit" | "ignore" | ((chunk: string) => void);
  /** Extra environment for the binary. */
  env?: Record<string, string>;
  /** Working directory of the binary (relative paths resolve from it). */
  cwd?: string;
}

/** One attempt under a granted lease. */
export interface Run {
  /** The slot being worked (a catch-up may be an earlier slot than the tick's). */
  readonly slot: Date;
  /** 1-based; continues across processes and calls. */
  readonly attempt: number;
  /** The fencing token: refuse writes whose fence is not above the last one seen. */
  readonly fence: bigint;
  readonly runId: string;
  /** When the attempt ends TTL_EXCEEDED whatever the callback does. */
  readonly deadline: Date;
  /** When `signal` fires for the deadline (deadline - grace). */
  readonly abortAt: Date;
  readonly trigger: "schedule" | "retry" | "catch_up" | "manual";
  /** The attempt's span as a W3C traceparent when `run` exports spans (OTEL_EXPORTER_OTLP_ENDPOINT), else null. */
  readonly traceparent: string | null;
  /** Aborted at deadline - grace, or when the process is told to stop. */
  readonly signal: AbortSignal;
  /** Records one applied output in the outputs ledger; rejects after the deadline. */
  output(key: string): Promise<void>;
  /**
   * Claims output `key` for this run: resolves `true` for the first claim of (job, key) ever
   * (the output row is recorded), `false` when it was claimed before (by any run: do not
   * apply it again). Rejects with `code: "E_CLAIM_REFUSED"` when this attempt is no longer
   * its slot's latest holder, or after the deadline: roll back.
   *
   * With `client` (a `pg` Client / pool client, or a `mysql2` connection, promise or callback
   * API, never a pool) it runs `SELECT batchguard_claim(…)` on that connection, inside the
   * transaction the caller opened: the claim commits or rolls back with the caller's write.
   * Without one it is a round trip of its own to the store (SQLite, Redis, data elsewhere).
   * A key is one line of 1 to 1024 bytes (else `E_CLAIM_KEY`).
   */
  claim(key: string, client?: ClaimClient): Promise<boolean>;
}

/**
 * A connection `run.claim()` can run `batchguard_claim` on: a `pg` Client (or the client of
 * `pool.connect()`), told apart by its `connectionParameters`; a `mysql2` connection (promise
 * or callback API), told apart by `execute()` next to `query()`. Anything else (a pool, an
 * unknown driver) is refused with `code: "E_OPTIONS"` before any query.
 */
export interface ClaimClient {
  query(...args: any[]): any;
}

/** Why `run.claim()` or `run.output()` rejected (besides the driver's own SQL errors). */
export interface ClaimError extends Error {
  code: "E_CLAIM_REFUSED" | "E_CLAIM_KEY" | "E_STORE" | "E_OPTIONS";
}

/**
 * `dead_lettered` only for the call whose attempt dead-lettered the slot; a later call on
 * that slot is `skipped` with reason `dead-lettered`.
 */
export type GuardStatus = "succeeded" | "skipped" | "failed" | "dead_lettered";

export interface GuardResult {
  status: GuardStatus;
  /**
   * Why a skip: `held by …`, `already succeeded (run …)`, `dead-lettered`, or
   * `superseded by run … (fence N)` (this call's attempt lost its lease to a newer holder).
   */
  reason: string | null;
  slot: Date | null;
  runId: string | null;
  fence: bigint | null;
  attempt: number | null;
  /** The last attempt's error code. */
  code: string | null;
  /** What `batchguard run` exited with. */
  exitCode: number;
  /** On failed / dead_lettered: what the callback threw (or an Error with `code`). */
  error: (Error & { code?: string }) | null;
}

export type GuardErrorCode =
  | "E_MANIFEST"
  | "E_JOB"
  | "E_STORE_URL"
  | "E_STORE"
  | "E_SLOT"
  | "E_RUN"
  | "E_BINARY"
  | "E_OPTIONS";

/** Why a call could not run: the message is the CLI's. */
export interface GuardError extends Error {
  code: GuardErrorCode;
}

export declare const ERROR_CODES: readonly GuardErrorCode[];

/** Runs `callback` once the lease is granted; resolves with what the call came to. */
export declare function guard<T = unknown>(
  options: GuardOptions,
  callback: (run: Run) => T | Promise<T>,
): Promise<GuardResult>;

/** Guard options whose tick time may come from the scheduler's arguments. */
export interface GuardedOptions extends Omit<GuardOptions, "scheduledAt"> {
  scheduledAt?: GuardOptions["scheduledAt"] | ((...args: any[]) => GuardOptions["scheduledAt"]);
}

/** A scheduler callback (node-cron, croner, `@Cron`) that runs `fn` under the guard. */
export declare function guarded<A extends unknown[]>(
  options: GuardedOptions,
  fn: (run: Run, ...args: A) => unknown,
): (...args: A) => Promise<GuardResult>;

/** node-cron 4.6+'s RunCoordinator (`cron.setRunCoordinator`, `distributed: true`). */
export interface RunCoordinator {
  shouldRun(key: string, ttlMs: number): Promise<boolean>;
  onComplete(key: string): void;
}

export interface CoordinatorOptions extends Omit<GuardOptions, "job" | "scheduledAt"> {
  /** The job name, or a function of node-cron's task name (default: the task name). */
  job?: string | ((taskName: string) => string);
  /** Called with each call's result. */
  onResult?: (result: GuardResult, key: string) => void;
}

/** A node-cron RunCoordinator that guards each run (no outcome, outputs or fence: see README). */
export declare function runCoordinator(options: CoordinatorOptions): RunCoordinator;

/** The tick time a scheduler passed to its callback (node-cron 3/4, croner), if any. */
export declare function tickTime(args: unknown[]): Date | undefined;

/** The binary `guard()` and `npx batchguard` run (BATCHGUARD_BINARY, else the platform package). */
export declare function binaryPath(): string;
