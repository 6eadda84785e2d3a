-- Concurrency keys: at most Config.ConcurrencyLimits (default one) executing
-- instances per concurrency_key. The picker gives each row it leases a
-- free slot below the key's limit; the unique index over executing rows
-- makes (key, slot) held by one row at a time, so two pickers that race
-- for the last slot of a key cannot both win. With a limit of one, every
-- slot is 0: the index then says "one executing row per key".
ALTER TABLE durable_instance ADD COLUMN concurrency_slot integer NOT NULL DEFAULT 0;

-- Rows executing under an older engine, which did not enforce keys, get
-- distinct slots, so that the index can be built; the picker leases no
-- more rows of such a key until it is back under its limit.
UPDATE durable_instance i
SET concurrency_slot = r.rn - 1
FROM (SELECT id, row_number() OVER (PARTITION BY concurrency_key ORDER BY id) AS rn
      FROM durable_instance
      WHERE status = 'executing' AND concurrency_key IS NOT NULL) r
WHERE i.id = r.id;

CREATE UNIQUE INDEX durable_instance_concurrency_idx
    ON durable_instance (concurrency_key, concurrency_slot)
    WHERE status = 'executing' AND concurrency_key IS NOT NULL;
