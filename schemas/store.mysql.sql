-- batchguard lock store, MySQL 8 / MariaDB 10.5+ (SPEC 7.2): `--store mysql://…`. Created by
-- `batchguard store migrate --store mysql://…` (idempotent), together with the ledger tables
-- of ledger.mysql.sql; `batchguard run` never creates them itself.
-- Lease times are BIGINT microseconds since the Unix epoch in the database's clock
-- (UTC_TIMESTAMP(6)); slots are the ledger's RFC 3339 text.

CREATE TABLE IF NOT EXISTS batchguard_leases (
    `key`        VARCHAR(512) NOT NULL PRIMARY KEY,
    job          VARCHAR(255) NOT NULL,
    scheduled_at VARCHAR(40)  NOT NULL,
    holder       TEXT         NOT NULL,
    run_id       VARCHAR(255) NOT NULL,
    fence        BIGINT       NOT NULL,
    acquired_at  BIGINT       NOT NULL,
    lease_until  BIGINT       NOT NULL,
    state        VARCHAR(16)  NOT NULL CHECK (state IN ('held', 'released'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The fencing counter, apart from the lease rows: deleting leases never makes a token go
-- back. Its one row is also what every acquire locks first, so acquires are serialised
-- and never deadlock on the rows (or gaps) they read next.
CREATE TABLE IF NOT EXISTS batchguard_fence (
    id    TINYINT NOT NULL PRIMARY KEY CHECK (id = 1),
    value BIGINT  NOT NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO batchguard_fence (id, value) VALUES (1, 0);

-- One row per slot: attempts counted across processes and hosts, and whether it is settled.
CREATE TABLE IF NOT EXISTS batchguard_slots (
    job          VARCHAR(255) NOT NULL,
    scheduled_at VARCHAR(40)  NOT NULL,
    attempts     INT          NOT NULL,
    state        VARCHAR(16)  NOT NULL
                 CHECK (state IN ('running', 'failed', 'interrupted', 'succeeded', 'dead_lettered')),
    run_id       VARCHAR(255) NOT NULL,
    PRIMARY KEY (job, scheduled_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Claims (SPEC 7.5): the first claim of (job, output_key) ever, by the run that made it. The
-- key is unique by its SHA-256 (`key_digest`): an InnoDB key holds 3072 bytes, and an output
-- key may be 1 KiB of 4-byte characters. A claim's output row goes into batchguard_outputs in
-- the same transaction. The function `batchguard_claim` is claims.mysql.sql.
CREATE TABLE IF NOT EXISTS batchguard_claims (
    job          VARCHAR(255)  NOT NULL,
    key_digest   BINARY(32)    NOT NULL,
    output_key   VARCHAR(1024) NOT NULL,
    run_id       VARCHAR(255)  NOT NULL,
    fence        BIGINT        NOT NULL,
    at           VARCHAR(40)   NOT NULL,
    PRIMARY KEY (job, key_digest),
    KEY batchguard_claims_run (run_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
