-- Rate limits: an instance may name a token bucket, "name" or
-- "name:partition", and a weight, the tokens each of its steps costs. The
-- picker leases such a row only if its bucket holds the tokens, and takes
-- them in the statement that leases it. Config.RateLimits says, by name,
-- how fast a bucket refills and how many tokens it holds at most.
ALTER TABLE durable_instance
    ADD COLUMN IF NOT EXISTS rate_limit  text,
    ADD COLUMN IF NOT EXISTS rate_weight integer NOT NULL DEFAULT 1;

-- One bucket per key, shared by every engine on the database. An insert
-- that names a key creates its bucket, full (tokens NULL), in the same
-- transaction; the picker refills it by the time elapsed since updated_at,
-- up to the limit's burst, whenever it takes tokens. tokens may fall below
-- zero, a debt repaid by the refill, should two pickers ever both find a
-- bucket missing.
CREATE TABLE IF NOT EXISTS durable_rate_limit_bucket (
    key        text             PRIMARY KEY,
    tokens     double precision,
    updated_at timestamptz      NOT NULL DEFAULT now()
);

-- The picker's look at the keys with runnable rows in a queue (a loose
-- index scan), at each key's first due row, whose cost the bucket must hold
-- before any row of the key is leased (strict order), and at the rows of
-- the keys whose buckets hold tokens.
CREATE INDEX IF NOT EXISTS durable_instance_rate_limit_idx
    ON durable_instance (queue, rate_limit, priority, eligible_at, id)
    WHERE status = 'runnable' AND rate_limit IS NOT NULL;

-- The picker's rows that name no bucket, in pick order, so that it reaches
-- them without walking past the rows that wait for tokens.
CREATE INDEX IF NOT EXISTS durable_instance_pick_free_idx
    ON durable_instance (queue, priority, eligible_at, id)
    WHERE status = 'runnable' AND rate_limit IS NULL;
