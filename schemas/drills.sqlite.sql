-- batchguard drill records, SQLite (SPEC 5.3): one row per `batchguard drill --record sqlite:PATH`.
-- Created by the first recorded drill and by `batchguard store migrate --store sqlite:PATH`;
-- `batchguard audit` reads it from the ledger database or `--drills sqlite:PATH` (AU301).
-- Timestamps are TEXT in RFC 3339 with an offset; `passed` is 0 or 1; `scenarios` is
-- `name:passed` / `name:failed`, comma-separated (`clean:passed,rerun:failed`).

CREATE TABLE IF NOT EXISTS batchguard_drills (
    job           TEXT    NOT NULL,
    scheduled_at  TEXT    NOT NULL,
    at            TEXT    NOT NULL,
    passed        INTEGER NOT NULL CHECK (passed IN (0, 1)),
    scenarios     TEXT    NOT NULL,
    report_digest TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS batchguard_drills_job ON batchguard_drills (job, at);
