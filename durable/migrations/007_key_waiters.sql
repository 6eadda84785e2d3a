-- The rows that wait for a slot of their concurrency key, by key: a step
-- that frees a slot looks up the queues in which rows of its key wait, to
-- wake the engines that serve them (keyWaitersSQL).
CREATE INDEX IF NOT EXISTS durable_instance_key_waiting_idx
    ON durable_instance (concurrency_key, queue)
    WHERE status = 'runnable' AND concurrency_key IS NOT NULL;
