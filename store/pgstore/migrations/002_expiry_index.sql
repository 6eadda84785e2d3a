-- Earlier versions indexed expiry under other names: version 1 as
-- (namespace, expires_at), version 2 as (expires_at, namespace). 001 now
-- creates the index that replaces them both.
DROP INDEX IF EXISTS {{version1_index}};
DROP INDEX IF EXISTS {{version2_index}};
