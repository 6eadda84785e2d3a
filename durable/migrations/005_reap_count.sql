-- Reaps in a row: how many consecutive claims of an instance ended with
-- their lease expired, none of them committing an outcome, so that the
-- reaper can fail an instance whose step hangs, or kills its engine, every
-- time it runs (Config.MaxReaps) instead of running it forever. The reaper
-- counts a reap as following the previous one when the row has been
-- claimed once since (claims = reaped_claim + 1); any outcome committed in
-- between took one more claim to lease the row again, and starts the count
-- over.
ALTER TABLE durable_instance
    ADD COLUMN IF NOT EXISTS reaps        integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS reaped_claim bigint  NOT NULL DEFAULT 0;
