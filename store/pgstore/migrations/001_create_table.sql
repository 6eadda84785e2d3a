-- idem PostgreSQL schema, version 1. Every statement is idempotent: Migrate
-- runs all of them at every call, under an advisory lock, from any number of
-- processes.
--
-- One row per key (namespace, scope, key_value); scope is '' for keys
-- without one. Timestamps come from the application's clock, never from
-- now(). request_payload and error_payload are JSONB (validated, readable
-- in SQL); result_payload is JSON, which PostgreSQL validates but keeps as
-- text, so that a replay returns the committed bytes exactly.
CREATE TABLE IF NOT EXISTS {{table}} (
    namespace        text        NOT NULL,
    scope            text        NOT NULL DEFAULT '',
    key_value        text        NOT NULL,
    request_hash     bytea       NOT NULL,
    request_payload  jsonb       NOT NULL,
    status           text        NOT NULL
                     CHECK (status IN ('in_progress', 'committed', 'failed_permanent')),
    result_payload   json,
    error_payload    jsonb,
    owner_token      text        NOT NULL,
    fence            bigint      NOT NULL CHECK (fence >= 1),
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    lease_expires_at timestamptz,
    PRIMARY KEY (namespace, scope, key_value),
    CHECK ((status = 'in_progress') = (lease_expires_at IS NOT NULL)),
    CHECK ((status = 'committed') = (result_payload IS NOT NULL)),
    CHECK ((status = 'failed_permanent') = (error_payload IS NOT NULL))
);

-- PurgeExpired deletes by expires_at, oldest first, within a namespace, so
-- namespace leads: with expires_at first, each of its batches walked the
-- expired records of every other namespace not purged yet. The column is
-- indexed in the "C" collation, which only PurgeExpired names: the point
-- lookups compare namespace in the column's collation and cannot use this
-- index, so that a generic plan made while the table is new and has no
-- statistics never prefers it to the primary key (and walks the whole
-- namespace). Equality is the same in both: the column's collation, the
-- database's, is deterministic. On a large table, which CREATE INDEX blocks writes to
-- while it builds, the index can be built first with CREATE INDEX
-- CONCURRENTLY under this name and definition: this statement then finds it.
CREATE INDEX IF NOT EXISTS {{index}} ON {{table}} (namespace COLLATE "C", expires_at);
