-- Version 1 indexed expiry as (namespace, expires_at) under another name;
-- 001 now creates the (expires_at, namespace) index that replaces it.
DROP INDEX IF EXISTS {{old_index}};
