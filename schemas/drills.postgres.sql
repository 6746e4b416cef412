-- batchguard drill records, PostgreSQL (SPEC 5.3): one row per `batchguard drill --record postgres://…`.
-- Created by the first recorded drill and by `batchguard store migrate --store postgres://…`
-- (idempotent); `batchguard audit` reads it from the ledger database or `--drills postgres://…` (AU301).
-- `scenarios` is `name:passed` / `name:failed`, comma-separated (`clean:passed,rerun:failed`).

CREATE TABLE IF NOT EXISTS batchguard_drills (
    job           text        NOT NULL,
    scheduled_at  timestamptz NOT NULL,
    at            timestamptz NOT NULL,
    passed        boolean     NOT NULL,
    scenarios     text        NOT NULL,
    report_digest text        NOT NULL
);
CREATE INDEX IF NOT EXISTS batchguard_drills_job ON batchguard_drills (job, at);
