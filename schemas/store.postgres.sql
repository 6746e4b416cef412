-- batchguard lock store, PostgreSQL (SPEC 7.2): `--store postgres://…`. Created by
-- `batchguard store migrate --store postgres://…` (idempotent), together with the ledger
-- tables of ledger.postgres.sql; `batchguard run` never creates them itself.
-- Every time that decides a lease is the database's `now()`.

CREATE TABLE IF NOT EXISTS batchguard_leases (
    key          text        PRIMARY KEY,
    job          text        NOT NULL,
    scheduled_at timestamptz NOT NULL,
    holder       text        NOT NULL,
    run_id       text        NOT NULL,
    fence        bigint      NOT NULL,
    acquired_at  timestamptz NOT NULL,
    lease_until  timestamptz NOT NULL,
    -- `succeeded` and `dead_lettered` are releases that also settle the row's slot: an
    -- acquire racing the holder's finish re-reads this row under its lock and sees them.
    state        text        NOT NULL
                 CHECK (state IN ('held', 'released', 'succeeded', 'dead_lettered'))
);

-- The fencing counter, apart from the lease rows: deleting leases never makes a token go
-- back. A sequence never hands out a value twice and takes no row lock.
CREATE SEQUENCE IF NOT EXISTS batchguard_fence AS bigint;

-- One row per slot: attempts counted across processes and hosts, and whether it is settled.
CREATE TABLE IF NOT EXISTS batchguard_slots (
    job          text        NOT NULL,
    scheduled_at timestamptz NOT NULL,
    attempts     integer     NOT NULL,
    state        text        NOT NULL
                 CHECK (state IN ('running', 'failed', 'interrupted', 'succeeded', 'dead_lettered')),
    run_id       text        NOT NULL,
    PRIMARY KEY (job, scheduled_at)
);
