-- batchguard ledger, MySQL 8 / MariaDB 10.5+ (SPEC 5). Created by `batchguard store migrate
-- --store mysql://…` (idempotent); read with
-- `--ledger 'mysql://user@host/db?events_table=batchguard_events&outputs_table=batchguard_outputs'`.
-- Times are RFC 3339 text in UTC with six fractional digits (`2026-03-01T02:00:00.000000Z`),
-- as the SQLite ledger keeps them: an instant with its offset, with no 2038 limit. A team's
-- own table may use TIMESTAMP columns (read as the instants they are) or DATETIME columns
-- (no offset: refused row by row unless --assume-tz). Columns may be in any order; other
-- columns are ignored; optional columns may be left out. `id` keeps the order of writing.

CREATE TABLE IF NOT EXISTS batchguard_events (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    run_id          VARCHAR(255) NOT NULL,
    job             VARCHAR(255) NOT NULL,
    scheduled_at    VARCHAR(40)  NOT NULL,
    event           VARCHAR(16)  NOT NULL CHECK (event IN ('start', 'end', 'skip', 'dead_letter', 'manual')),
    at              VARCHAR(40)  NOT NULL,
    instance        TEXT,
    attempt         INT          CHECK (attempt >= 1),
    status          VARCHAR(16)  CHECK (status IN ('success', 'failure', 'superseded')),
    error_code      TEXT,
    snapshot_digest TEXT,
    `trigger`       VARCHAR(16)  NOT NULL DEFAULT 'schedule'
                                 CHECK (`trigger` IN ('schedule', 'retry', 'manual', 'replay', 'catch_up')),
    fence           BIGINT,
    detail          TEXT         CHECK (detail IS NULL OR OCTET_LENGTH(detail) <= 4096),
    KEY batchguard_events_slot (job, scheduled_at),
    KEY batchguard_events_run (run_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS batchguard_outputs (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job          VARCHAR(255)  NOT NULL,
    scheduled_at VARCHAR(40)   NOT NULL,
    run_id       VARCHAR(255)  NOT NULL,
    output_key   VARCHAR(1024) NOT NULL,
    at           VARCHAR(40)   NOT NULL,
    KEY batchguard_outputs_key (job, output_key(191)),
    KEY batchguard_outputs_run (run_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
