-- A step may still run when its instance is cancelled: Cancel ends the row
-- at once, but the engine that runs the step learns of it at its next
-- heartbeat, and the step returns when it returns. A row cancelled while
-- executing keeps its lease until then (the engine clears it when the step
-- has ended, the reaper once it has expired) and, with the lease, its
-- concurrency slot, so that its key's limit holds while the step runs.
DROP INDEX IF EXISTS durable_instance_concurrency_idx;
CREATE UNIQUE INDEX durable_instance_concurrency_idx
    ON durable_instance (concurrency_key, concurrency_slot)
    WHERE concurrency_key IS NOT NULL
      AND (status = 'executing' OR (status = 'cancelled' AND lease_owner IS NOT NULL));

-- The reaper's look at the cancelled rows whose lease has expired.
CREATE INDEX IF NOT EXISTS durable_instance_cancelled_lease_idx
    ON durable_instance (lease_expires_at)
    WHERE status = 'cancelled' AND lease_owner IS NOT NULL;
