package pgstore

import "strings"

// queries holds the SQL of one table. Table names are validated by
// parseTable and quoted with pgx.Identifier; every value is a parameter.
// Every timestamp is a parameter too: the store's clock, never now().
type queries struct {
	begin string

	// The settle statements, in lease mode and (…Tx) in transactional
	// mode, where they first take the key's advisory lock.
	commit, commitTx               string
	failPermanent, failPermanentTx string
	failTransient, failTransientTx string
	heartbeat, heartbeatTx         string

	// commitDone and failPermanentDone find the record already settled
	// by the same lease with the same value: a repeated call (after a
	// lost reply) then succeeds instead of failing as stale.
	commitDone, failPermanentDone string

	get   string
	purge string
}

// keyLock is the SQL expression of a key's advisory lock number: a 64-bit
// hash of the lock text made by lockText (table, namespace, scope, key).
const keyLock = "hashtextextended(%s::text, 0)"

func newQueries(t table) queries {
	r := strings.NewReplacer("{{table}}", t.ident())
	q := queries{
		begin: r.Replace(beginSQL),
		get:   r.Replace(getSQL),
		purge: r.Replace(purgeSQL),
	}
	// Settle statements: $1 namespace, $2 scope, $3 key_value, $4 token,
	// $5 fence, $6 now, then their own values, then (…Tx) the lock text.
	const owned = `namespace = $1::text AND scope = $2::text AND key_value = $3::text
  AND owner_token = $4::text AND fence = $5::bigint
  AND status = 'in_progress' AND expires_at > $6::timestamptz`
	update := func(set string, lockParam string) string {
		s := "UPDATE {{table}} SET " + set + "\nWHERE " + owned
		if lockParam != "" {
			s = "WITH lock AS (SELECT pg_advisory_xact_lock(" + strings.Replace(keyLock, "%s", lockParam, 1) + "))\n" +
				"UPDATE {{table}} SET " + set + "\nFROM lock\nWHERE " + owned
		}
		return r.Replace(s)
	}
	const (
		commitSet = "status = 'committed', result_payload = $7::json, lease_expires_at = NULL"
		failSet   = "status = 'failed_permanent', error_payload = $7::jsonb, lease_expires_at = NULL"
		// The record lives at least as long as its lease (see idem.Store).
		heartbeatSet = "lease_expires_at = $7::timestamptz, expires_at = GREATEST(expires_at, $7::timestamptz)"
	)
	q.commit, q.commitTx = update(commitSet, ""), update(commitSet, "$8")
	q.failPermanent, q.failPermanentTx = update(failSet, ""), update(failSet, "$8")
	q.heartbeat, q.heartbeatTx = update(heartbeatSet, ""), update(heartbeatSet, "$8")
	const settled = `namespace = $1::text AND scope = $2::text AND key_value = $3::text
  AND owner_token = $4::text AND fence = $5::bigint AND expires_at > $6::timestamptz`
	q.commitDone = r.Replace("SELECT count(*) FROM {{table}}\nWHERE " + settled +
		"\n  AND status = 'committed' AND result_payload::text = $7::text")
	q.failPermanentDone = r.Replace("SELECT count(*) FROM {{table}}\nWHERE " + settled +
		"\n  AND status = 'failed_permanent' AND error_payload = $7::jsonb")
	q.failTransient = r.Replace("DELETE FROM {{table}}\nWHERE " + owned)
	q.failTransientTx = r.Replace("WITH lock AS (SELECT pg_advisory_xact_lock(" + strings.Replace(keyLock, "%s", "$7", 1) + "))\n" +
		"DELETE FROM {{table}} USING lock\nWHERE " + owned)
	return q
}

// beginSQL is Begin in one statement, so that every uncontended Begin is
// one round trip whatever its outcome. Parameters: $1 namespace, $2 scope,
// $3 key_value, $4 request_hash, $5 request_payload, $6 now, $7 expires_at,
// $8 lease_expires_at, $9 owner_token, $10 lock text.
//
//   - cur reads the record as the statement's snapshot sees it.
//   - lock takes the key's transaction-level advisory lock, without
//     waiting, but only when the record is writable: absent, expired, or
//     in progress with the same fingerprint and a lapsed lease (takeover).
//     Callers that get a replay, Mismatch or InFlight from a live record
//     take no lock. Holding the lock thus means "this transaction is
//     writing the record"; in transactional mode it is held until the
//     caller's transaction ends, so that another transaction's Begin
//     answers InFlight at once instead of waiting for the uncommitted row.
//     (A lock taken for a write that did not happen, when the snapshot
//     turned out stale, is released by rolling back to the savepoint the
//     statement runs under: see binding.undoSavepoint.)
//   - upd takes over an expired or abandoned record: new request, token,
//     lease and timestamps, fence+1. Its WHERE is evaluated again on the
//     newest row version when another transaction changed the row
//     meanwhile, so of two takeovers at once only one updates.
//   - ins creates the record (fence 1) when the snapshot has none; a row
//     committed since then makes it a no-op (ON CONFLICT DO NOTHING).
//
// The result row: got (NULL when no lock was needed), the new fence when
// the caller got the record, and the snapshot's record, with only the
// payload the outcome needs.
const beginSQL = `WITH cur AS (
  SELECT status, request_hash, request_payload, result_payload, error_payload,
         fence, created_at, expires_at, lease_expires_at
  FROM {{table}}
  WHERE namespace = $1::text AND scope = $2::text AND key_value = $3::text
), lock AS (
  SELECT pg_try_advisory_xact_lock(hashtextextended($10::text, 0)) AS got
  WHERE NOT EXISTS (
    SELECT FROM cur
    WHERE expires_at > $6::timestamptz
      AND NOT (status = 'in_progress' AND lease_expires_at <= $6::timestamptz
               AND request_hash = $4::bytea)
  )
), upd AS (
  UPDATE {{table}} AS r SET
    request_hash = $4::bytea, request_payload = $5::jsonb, status = 'in_progress',
    result_payload = NULL, error_payload = NULL,
    owner_token = $9::text, fence = r.fence + 1,
    created_at = $6::timestamptz, expires_at = $7::timestamptz,
    lease_expires_at = $8::timestamptz
  FROM lock
  WHERE lock.got
    AND r.namespace = $1::text AND r.scope = $2::text AND r.key_value = $3::text
    AND (r.expires_at <= $6::timestamptz
         OR (r.status = 'in_progress' AND r.lease_expires_at <= $6::timestamptz
             AND r.request_hash = $4::bytea))
  RETURNING r.fence
), ins AS (
  INSERT INTO {{table}} (namespace, scope, key_value, request_hash, request_payload,
                         status, owner_token, fence, created_at, expires_at, lease_expires_at)
  SELECT $1::text, $2::text, $3::text, $4::bytea, $5::jsonb,
         'in_progress', $9::text, 1, $6::timestamptz, $7::timestamptz, $8::timestamptz
  FROM lock
  WHERE lock.got AND NOT EXISTS (SELECT FROM cur)
  ON CONFLICT (namespace, scope, key_value) DO NOTHING
  RETURNING fence
)
SELECT (SELECT got FROM lock),
       coalesce((SELECT fence FROM upd), (SELECT fence FROM ins)),
       cur.status, cur.request_hash,
       CASE WHEN cur.request_hash <> $4::bytea THEN cur.request_payload END,
       CASE WHEN cur.request_hash = $4::bytea AND cur.status = 'committed' THEN cur.result_payload END,
       CASE WHEN cur.request_hash = $4::bytea AND cur.status = 'failed_permanent' THEN cur.error_payload END,
       cur.fence, cur.created_at, cur.expires_at, cur.lease_expires_at
FROM (SELECT) AS one LEFT JOIN cur ON true`

// getSQL reads a live record: $1 namespace, $2 scope, $3 key_value, $4 now.
const getSQL = `SELECT status, request_hash, request_payload, result_payload, error_payload,
       fence, created_at, expires_at, lease_expires_at
FROM {{table}}
WHERE namespace = $1::text AND scope = $2::text AND key_value = $3::text
  AND expires_at > $4::timestamptz`

// purgeSQL deletes one batch of a namespace's expired records: $1
// namespace, $2 asOf, $3 batch size. Rows another transaction has locked
// (being written right now) are skipped rather than waited for; the lock
// re-checks the condition on the newest row version. namespace is compared
// in the "C" collation, that of the purge index (see 001_create_table.sql).
const purgeSQL = `DELETE FROM {{table}} AS r
USING (
  SELECT namespace, scope, key_value FROM {{table}}
  WHERE namespace COLLATE "C" = $1::text AND expires_at <= $2::timestamptz
  ORDER BY expires_at
  LIMIT $3::int
  FOR UPDATE SKIP LOCKED
) AS d
WHERE r.namespace = d.namespace AND r.scope = d.scope AND r.key_value = d.key_value`
