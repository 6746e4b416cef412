-- batchguard ledger, PostgreSQL (SPEC 5). Read with
-- `--ledger 'postgres://user@host/db?events_table=batchguard_events&outputs_table=batchguard_outputs'`.
-- Timestamps are timestamptz. TEXT columns holding RFC 3339 with an offset are read too;
-- `timestamp without time zone` is refused row by row unless --assume-tz.
-- Columns may be in any order; other columns are ignored; optional columns may be left out.

CREATE TABLE IF NOT EXISTS batchguard_events (
    run_id          text        NOT NULL,
    job             text        NOT NULL,
    scheduled_at    timestamptz NOT NULL,
    event           text        NOT NULL CHECK (event IN ('start', 'end', 'skip', 'dead_letter', 'manual')),
    at              timestamptz NOT NULL,
    instance        text,
    attempt         integer     CHECK (attempt >= 1),
    status          text        CHECK (status IN ('success', 'failure')),
    error_code      text,
    snapshot_digest text,
    "trigger"       text        NOT NULL DEFAULT 'schedule'
                                CHECK ("trigger" IN ('schedule', 'retry', 'manual', 'replay')),
    fence           bigint,
    detail          text        CHECK (detail IS NULL OR octet_length(detail) <= 4096)
);
CREATE INDEX IF NOT EXISTS batchguard_events_slot ON batchguard_events (job, scheduled_at);
CREATE INDEX IF NOT EXISTS batchguard_events_run ON batchguard_events (run_id);

CREATE TABLE IF NOT EXISTS batchguard_outputs (
    job          text        NOT NULL,
    scheduled_at timestamptz NOT NULL,
    run_id       text        NOT NULL,
    output_key   text        NOT NULL,
    at           timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS batchguard_outputs_key ON batchguard_outputs (job, output_key);
