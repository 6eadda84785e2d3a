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

-- PurgeExpired deletes by expires_at, oldest first, within a namespace.
-- expires_at leads, so that no index but the primary key starts with
-- namespace: a generic plan of a point lookup, made while the table is
-- new and has no statistics, would otherwise be as likely to walk every
-- row of the namespace through this index as to use the primary key.
CREATE INDEX IF NOT EXISTS {{index}} ON {{table}} (expires_at, namespace);
