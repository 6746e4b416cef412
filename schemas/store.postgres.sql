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

-- A slot's latest run is looked up by its run id (the claim's check, below).
CREATE INDEX IF NOT EXISTS batchguard_slots_run ON batchguard_slots (run_id);

-- Claims (SPEC 7.5): the first claim of (job, output_key) ever, by the run that made it.
-- A claim's output row goes into batchguard_outputs in the same transaction, so what was
-- claimed is what `audit` reads.
CREATE TABLE IF NOT EXISTS batchguard_claims (
    job          text        NOT NULL,
    output_key   text        NOT NULL,
    run_id       text        NOT NULL,
    fence        bigint      NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (job, output_key)
);
CREATE INDEX IF NOT EXISTS batchguard_claims_run ON batchguard_claims (run_id);

-- `SELECT batchguard_claim(job, key, run_id, fence)` inside the job's own transaction:
-- refused (SQLSTATE P0001, the transaction aborts, the job's write rolls back) unless the run
-- is its slot's latest acquisition with this fence; else TRUE when this is the first claim of
-- (job, key) ever (the claim and its output row are written), FALSE when it was claimed before
-- (nothing written). A concurrent claim of the key in another open transaction waits for it
-- (the primary key), then answers FALSE if it committed, TRUE if it rolled back.
CREATE OR REPLACE FUNCTION batchguard_claim(p_job text, p_key text, p_run_id text, p_fence bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_slot timestamptz;
BEGIN
    SELECT s.scheduled_at INTO v_slot FROM batchguard_slots s
     WHERE s.job = p_job AND s.run_id = p_run_id;
    IF v_slot IS NULL OR NOT EXISTS (SELECT 1 FROM batchguard_leases l
                                      WHERE l.run_id = p_run_id AND l.fence = p_fence) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = format(
            'batchguard: run %s (fence %s) is no longer its slot''s latest holder: claim of %s refused',
            p_run_id, p_fence, p_key);
    END IF;
    INSERT INTO batchguard_claims (job, output_key, run_id, fence, at)
    VALUES (p_job, p_key, p_run_id, p_fence, now())
    ON CONFLICT (job, output_key) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at)
    VALUES (p_job, v_slot, p_run_id, p_key, now());
    RETURN true;
END
$$;
