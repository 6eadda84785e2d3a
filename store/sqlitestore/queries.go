package sqlitestore

import "strings"

// queries are the statements of a Store, with its table name filled in.
// Each one is a single statement, atomic on its own. Parameters are numbered
// (?NNN) so that one argument list serves several statements.
type queries struct {
	// lock takes SQLite's write lock for the transaction it runs in, and
	// changes nothing: a write statement takes the lock when it starts,
	// whatever it matches. No arguments.
	lock string
	// insert creates the record of a new key (Begin's first step): args
	// are those of reserveArgs. It changes nothing when the key has a
	// record.
	insert string
	// replace re-reserves a record that has expired, whatever its state
	// and request; takeover re-reserves an in-progress record of the same
	// request whose lease has lapsed. Both re-check their condition in the
	// statement, bump the fence and return it; args as for insert.
	replace, takeover string
	// read loads a record (expired or not) for Begin: namespace, scope,
	// key_value.
	read string
	// get loads a live record: namespace, scope, key_value, now.
	get string
	// commit, failPermanent, failTransient and heartbeat change a record
	// only if the lease is current: namespace, scope, key_value, token,
	// fence, now, then the value (result, error, new lease expiry).
	commit, failPermanent, failTransient, heartbeat string
	// purge deletes up to a batch of expired records of a namespace:
	// namespace, asOf, batch size.
	purge string
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `status, request_hash, request_payload, result_payload, error_payload,
	fence, created_at, expires_at, lease_expires_at`

// reserveSet writes a fresh reservation over an existing row.
const reserveSet = `SET request_hash = ?4, request_payload = ?5, status = 'in_progress',
	result_payload = NULL, error_payload = NULL, owner_token = ?6, fence = fence + 1,
	created_at = ?7, expires_at = ?8, lease_expires_at = ?9`

const byKey = `namespace = ?1 AND scope = ?2 AND key_value = ?3`

// owned is true for a live in-progress record held by the lease (token ?4,
// fence ?5) at now (?6). The lease's own expiry does not matter: a lapsed
// lease stays valid until someone takes the record over.
const owned = byKey + ` AND status = 'in_progress' AND owner_token = ?4 AND fence = ?5 AND expires_at > ?6`

var queryTemplates = queries{
	lock: `UPDATE "{{table}}" SET fence = fence WHERE 0`,

	insert: `INSERT INTO "{{table}}" (namespace, scope, key_value, request_hash, request_payload,
	status, owner_token, fence, created_at, expires_at, lease_expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, 'in_progress', ?6, 1, ?7, ?8, ?9)
ON CONFLICT (namespace, scope, key_value) DO NOTHING`,

	replace: `UPDATE "{{table}}" ` + reserveSet + `
WHERE ` + byKey + ` AND expires_at <= ?7
RETURNING fence`,

	takeover: `UPDATE "{{table}}" ` + reserveSet + `
WHERE ` + byKey + ` AND expires_at > ?7 AND status = 'in_progress'
	AND request_hash = ?4 AND lease_expires_at <= ?7
RETURNING fence`,

	read: `SELECT ` + recordColumns + ` FROM "{{table}}" WHERE ` + byKey,

	get: `SELECT ` + recordColumns + ` FROM "{{table}}" WHERE ` + byKey + ` AND expires_at > ?4`,

	commit: `UPDATE "{{table}}" SET status = 'committed', result_payload = ?7, lease_expires_at = NULL
WHERE ` + owned,

	failPermanent: `UPDATE "{{table}}" SET status = 'failed_permanent', error_payload = ?7, lease_expires_at = NULL
WHERE ` + owned,

	failTransient: `DELETE FROM "{{table}}" WHERE ` + owned,

	// The record lives at least as long as its lease (see idem.Store).
	heartbeat: `UPDATE "{{table}}" SET lease_expires_at = ?7, expires_at = MAX(expires_at, ?7) WHERE ` + owned,

	purge: `DELETE FROM "{{table}}" WHERE rowid IN (
	SELECT rowid FROM "{{table}}" WHERE namespace = ?1 AND expires_at <= ?2 LIMIT ?3)`,
}

// forTable returns the statements for table, a validated identifier.
func (q queries) forTable(table string) queries {
	f := func(s string) string { return strings.ReplaceAll(s, "{{table}}", table) }
	return queries{
		lock:          f(q.lock),
		insert:        f(q.insert),
		replace:       f(q.replace),
		takeover:      f(q.takeover),
		read:          f(q.read),
		get:           f(q.get),
		commit:        f(q.commit),
		failPermanent: f(q.failPermanent),
		failTransient: f(q.failTransient),
		heartbeat:     f(q.heartbeat),
		purge:         f(q.purge),
	}
}
