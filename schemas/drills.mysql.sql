-- batchguard drill records, MySQL 8 / MariaDB 10.5+ (SPEC 5.3): one row per
-- `batchguard drill --record mysql://…`. Created by the first recorded drill and by
-- `batchguard store migrate --store mysql://…` (idempotent); `batchguard audit` reads it from
-- the ledger database or `--drills mysql://…` (AU301).
-- Timestamps are RFC 3339 text in UTC with six fractional digits, as the MySQL ledger keeps
-- them; `passed` is 0 or 1; `scenarios` is `name:passed` / `name:failed`, comma-separated
-- (`clean:passed,rerun:failed`). One statement: a drill creates it as one prepared statement.

CREATE TABLE IF NOT EXISTS batchguard_drills (
    job           VARCHAR(255) NOT NULL,
    scheduled_at  VARCHAR(40)  NOT NULL,
    at            VARCHAR(40)  NOT NULL,
    passed        BOOLEAN      NOT NULL CHECK (passed IN (0, 1)),
    scenarios     TEXT         NOT NULL,
    report_digest TEXT         NOT NULL,
    KEY batchguard_drills_job (job, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
