-- batchguard ledger, SQLite (SPEC 5). Read with `--ledger sqlite:PATH`.
-- Timestamps are TEXT in RFC 3339 with an offset (`2026-03-01T02:00:00Z`,
-- `2026-03-01T11:00:00+09:00`); text without an offset is refused unless --assume-tz.
-- Columns may be in any order; other columns are ignored; optional columns may be left out.

CREATE TABLE IF NOT EXISTS batchguard_events (
    run_id          TEXT    NOT NULL,
    job             TEXT    NOT NULL,
    scheduled_at    TEXT    NOT NULL,
    event           TEXT    NOT NULL CHECK (event IN ('start', 'end', 'skip', 'dead_letter', 'manual')),
    at              TEXT    NOT NULL,
    instance        TEXT,
    attempt         INTEGER CHECK (attempt >= 1),
    status          TEXT    CHECK (status IN ('success', 'failure', 'superseded')),
    error_code      TEXT,
    snapshot_digest TEXT,
    "trigger"       TEXT    NOT NULL DEFAULT 'schedule'
                            CHECK ("trigger" IN ('schedule', 'retry', 'manual', 'replay', 'catch_up')),
    fence           INTEGER,
    detail          TEXT    CHECK (detail IS NULL OR length(CAST(detail AS BLOB)) <= 4096)
);
CREATE INDEX IF NOT EXISTS batchguard_events_slot ON batchguard_events (job, scheduled_at);
CREATE INDEX IF NOT EXISTS batchguard_events_run ON batchguard_events (run_id);

CREATE TABLE IF NOT EXISTS batchguard_outputs (
    job          TEXT NOT NULL,
    scheduled_at TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    output_key   TEXT NOT NULL,
    at           TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS batchguard_outputs_key ON batchguard_outputs (job, output_key);
