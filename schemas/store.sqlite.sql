-- batchguard lock store, SQLite (SPEC 7.2): `--store sqlite:PATH`. `batchguard run` creates
-- these tables (and the ledger tables of ledger.sqlite.sql) on first use.
-- Lease times are INTEGER microseconds since the Unix epoch, in the host's clock.

CREATE TABLE IF NOT EXISTS batchguard_leases (
    key          TEXT    PRIMARY KEY,
    job          TEXT    NOT NULL,
    scheduled_at TEXT    NOT NULL,
    holder       TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    fence        INTEGER NOT NULL,
    acquired_at  INTEGER NOT NULL,
    lease_until  INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('held', 'released'))
);

-- The fencing counter, apart from the lease rows: deleting leases never makes a token go back.
CREATE TABLE IF NOT EXISTS batchguard_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO batchguard_fence (id, value) VALUES (1, 0);

-- One row per slot: attempts counted across processes, and whether it is settled.
CREATE TABLE IF NOT EXISTS batchguard_slots (
    job          TEXT    NOT NULL,
    scheduled_at TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    state        TEXT    NOT NULL
                 CHECK (state IN ('running', 'failed', 'interrupted', 'succeeded', 'dead_lettered')),
    run_id       TEXT    NOT NULL,
    PRIMARY KEY (job, scheduled_at)
);

-- Claims (SPEC 7.5): the first claim of (job, output_key) ever, by the run that made it. A
-- claim's output row goes into batchguard_outputs in the same (immediate) transaction.
CREATE TABLE IF NOT EXISTS batchguard_claims (
    job          TEXT    NOT NULL,
    output_key   TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    fence        INTEGER NOT NULL,
    at           TEXT    NOT NULL,
    PRIMARY KEY (job, output_key)
);
CREATE INDEX IF NOT EXISTS batchguard_claims_run ON batchguard_claims (run_id);
