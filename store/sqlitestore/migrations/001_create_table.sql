-- idem SQLite schema, version 1. Every statement is idempotent: Migrate runs
-- it at every start, from any number of processes.
--
-- One row per key (namespace, scope, key_value). Timestamps are Unix
-- microseconds (UTC) taken from the application's clock, never SQLite's.
-- Payloads are JSON documents kept as TEXT, byte for byte as submitted.
CREATE TABLE IF NOT EXISTS "{{table}}" (
    namespace        TEXT    NOT NULL,
    scope            TEXT    NOT NULL DEFAULT '',
    key_value        TEXT    NOT NULL,
    request_hash     BLOB    NOT NULL,
    request_payload  TEXT    NOT NULL,
    status           TEXT    NOT NULL
                     CHECK (status IN ('in_progress', 'committed', 'failed_permanent')),
    result_payload   TEXT,
    error_payload    TEXT,
    owner_token      TEXT    NOT NULL,
    fence            INTEGER NOT NULL CHECK (fence >= 1),
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    lease_expires_at INTEGER,
    PRIMARY KEY (namespace, scope, key_value)
) STRICT;

-- PurgeExpired deletes by namespace and expires_at.
CREATE INDEX IF NOT EXISTS "{{table}}_expires_idx" ON "{{table}}" (namespace, expires_at);
