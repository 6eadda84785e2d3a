// Package pgstore is the PostgreSQL idem.Store, on pgx v5. It keeps one row
// per key in one table, works in lease mode (on a pool, visible to every
// process at once, as the HTTP proxy needs) and in transactional mode (in
// the caller's own transaction, so that the record and the caller's writes
// commit or roll back together), and passes the idemtest conformance suite
// in both.
//
// # Schema
//
// Migrate creates the table (its name is Config.Table, default
// "idempotency_record"); MigrationSQL prints the same SQL for teams that
// run their own migration tool:
//
//	CREATE TABLE IF NOT EXISTS "idempotency_record" (
//	    namespace        text        NOT NULL,
//	    scope            text        NOT NULL DEFAULT '',
//	    key_value        text        NOT NULL,
//	    request_hash     bytea       NOT NULL,     -- idem.Fingerprint.Bytes()
//	    request_payload  jsonb       NOT NULL,
//	    status           text        NOT NULL,     -- in_progress, committed, failed_permanent
//	    result_payload   json,                     -- when committed
//	    error_payload    jsonb,                    -- when failed_permanent
//	    owner_token      text        NOT NULL,     -- token of the latest reservation
//	    fence            bigint      NOT NULL,     -- +1 at each takeover
//	    created_at       timestamptz NOT NULL,
//	    expires_at       timestamptz NOT NULL,     -- end of retention
//	    lease_expires_at timestamptz,              -- when in_progress
//	    PRIMARY KEY (namespace, scope, key_value),
//	    ...                                        -- CHECKs tying status to the columns
//	);
//	CREATE INDEX IF NOT EXISTS "idempotency_record_purge_idx"
//	    ON "idempotency_record" (namespace COLLATE "C", expires_at);
//
// The columns are those of the design's table plus the key's scope (in the
// primary key, so that scopes never see each other's records) and the
// lease: expiry, owner token and fence. The SQLite store uses the same
// names.
//
// Migrate runs every embedded migration, each written to be idempotent
// (IF NOT EXISTS), in one transaction holding an advisory lock; so it can
// run at every start of every process, and later versions of the schema
// come as further idempotent migrations. There is no version table.
//
// Check the errors of New and Migrate: a Store comes only from New (the zero
// Store, and the nil *Store New returns with an error, panic when used), and
// until the schema exists every call fails with idem.ErrUnavailable
// (relation "idempotency_record" does not exist).
//
// # Lease mode
//
// New(pool, cfg) returns a Store whose methods each run one autocommitted
// statement on the pool (PurgeExpired one per batch). Begin is a single
// statement, so every uncontended Begin is one round trip whatever its
// outcome (Fresh, a replay, Mismatch or InFlight). Commit, FailPermanent,
// FailTransient and Heartbeat are one UPDATE or DELETE each, matching the
// key AND the lease's token AND its fence AND status in_progress AND
// expires_at > now; when no row matches, nothing changed and the error is
// idem.ErrStaleToken, except that a Commit or FailPermanent repeated with
// the same lease and the same value (after a lost reply) succeeds: a second
// statement, on that path only, finds the record settled as asked. As the
// contract asks, a lease that lapsed without a takeover may still settle.
//
// Begin's statement (see beginSQL in queries.go) reads the record, and
// writes only when the record is writable: absent, past expires_at (it
// counts as absent; the fence keeps counting), or in progress under a
// lapsed lease with the same fingerprint (a takeover: fence+1, new token).
// Races are settled by PostgreSQL. A writing Begin first takes the key's
// advisory lock without waiting (see below); a Begin that cannot have it
// answers InFlight. Behind the lock, the UPDATE re-checks its condition on
// the newest row version, so of two takeovers one updates and the other
// finds a live lease, and the INSERT is ON CONFLICT DO NOTHING, so of two
// creations one inserts. A Begin whose snapshot turned out stale runs the
// statement again (a second round trip, only under contention). Every
// other answer comes from the record as read, decided exactly as
// idem.Decide decides.
//
// # Pipelining
//
// With Config.Pipeline, lease-mode calls made at the same time from many
// goroutines share connections. A call that finds one of PipelineLanes
// lanes free and nothing queued runs at once, as above. The calls that
// arrive while every lane is busy queue up, and each freed lane takes up
// to PipelineDepth of them to one pooled connection in PostgreSQL's
// pipeline mode: all their statements in one write, all the answers in
// one read, each statement followed by its own Sync, so each is still its
// own autocommitted transaction and an error stays in its statement. Under
// concurrency this costs both sides far fewer system calls and context
// switches per call; on a two-core machine with 32 workers it did 1.2–1.4×
// the Begin+Commit pairs per second pgbench did with the same statements
// on 32 connections, where the plain store did 0.8×. A call whose context
// ends while it waits in the queue returns at once and is never sent; once
// sent in a batch, it may still take effect. A Begin that so reserves a key
// for a caller who has left is released (as by FailTransient) when its
// answer comes, so that the key is not held in flight under a lease nobody
// holds. Before closing the pool, call Store.Drain: it waits for those
// answers and releases, which closing the pool would cut off. A batch
// whose every caller has given up has the server cancel
// the statement it runs (cut off, the server would run it on), and is cut
// short (its connection closed) if it still runs a second later, so that
// it does not hold its lane while the server is slow to answer. A pool tracer that traces batches (pgx.BatchTracer, as
// OpenTelemetry tracers for pgx do) hears of each batch sent, and of each
// statement in it without its arguments; a plain QueryTracer hears only of
// the calls that ran directly. idem proxy runs its Postgres store
// pipelined.
//
// # Transactional mode
//
// (*Store).WithTx(tx) and (*Store).WithSQLTx(tx) return an idem.Store bound
// to the caller's pgx.Tx or database/sql transaction (of the pgx stdlib
// driver). The store never begins, commits or rolls back. Begin, the
// caller's writes and Commit happen in one transaction: a crash or a
// rollback leaves no trace, so local effects happen exactly once. These
// stores implement idem.TxBound, so idem.Do never heartbeats on the
// caller's transaction from another goroutine.
//
// A plain INSERT … ON CONFLICT would make a second transaction's Begin of
// the same key wait until the first transaction ends. Instead, Begin takes
// pg_try_advisory_xact_lock on a 64-bit hash (hashtextextended) of the
// table, namespace, scope and key before writing; when another transaction
// holds it, Begin answers InFlight at once, with RetryAfter set to
// Config.Lease. The lock is taken only by a Begin about to write; a Begin
// that answers from a live record (a replay, Mismatch, InFlight) takes none,
// so a transaction that merely looked blocks nobody. Nor does a Begin that
// was about to write but found, as it wrote, that another writer had got
// there first (its statement's snapshot was stale): the statement runs
// under a savepoint (pgstore_begin), rolled back to when the statement
// took the lock and did not write, so that neither the key's lock nor a
// row lock outlives the statement for a key the transaction does not own.
// The savepoint is sent with the statement on a pgx transaction (one round
// trip; two on a database/sql one) and otherwise left open: it ends with
// the transaction, or with a savepoint of the caller's that encloses it.
// Each Begin thus opens a subtransaction; more than 64 reserving Begins in
// one transaction overflow PostgreSQL's per-backend cache of
// subtransaction ids. The settle calls take
// the same lock, waiting, so that no transaction holds a row lock on a
// record without also holding its key's lock. Lease-mode Begins take the
// lock too (for the length of their statement), so they do not wait behind
// a transaction's reservation either. (PurgeExpired in a transaction keeps
// the expired rows it deleted locked until the transaction ends; a Begin of
// one of those keys waits for it.)
//
// # Errors
//
// Arguments are checked before anything is sent: key and lease
// (idem.CheckBegin, idem.CheckLease; a lease token that text cannot hold,
// with a NUL or invalid UTF-8, is no record's, so idem.ErrStaleToken),
// sizes (*idem.PayloadTooLargeError; Config.MaxPayload bounds requests,
// also as jsonb prints their numbers back, results and encoded stored
// errors) and
// JSON (idem.ErrInvalidPayload), including what PostgreSQL would refuse
// although encoding/json accepts it: invalid UTF-8, and in the request
// payload (jsonb) the escape \u0000 and unpaired surrogate escapes. So
// invalid input does not abort the caller's transaction. The one refusal
// left to the server, a number beyond the range of numeric in a request
// payload, is also reported as idem.ErrInvalidPayload (in transactional
// mode it aborts the transaction, as any failed statement does).
//
// In transactional mode, every call of a store bound to a nil transaction
// (WithTx(nil), WithSQLTx(nil)) or to one that has already been committed
// or rolled back fails with an error satisfying errors.Is(err,
// idem.ErrInvalidArgument): a programming error, which retrying cannot
// mend.
//
// A done ctx gives an error satisfying errors.Is(err, ctx.Err()). In lease
// mode a ctx that ends while a statement runs (directly, not in a batch)
// has the server cancel the statement, which then wrote nothing; a
// statement that completed first gives its answer, even to a Begin (whose
// lease idem.Do then releases); only a server that does neither within a
// second has the connection cut, as below. A
// violated constraint the store does not know of (one an operator added)
// gives the database's error alone: retrying cannot help. Every other
// failure of the server or the connection (refused, lost, shutting down, a
// missing table, a serialization failure) satisfies errors.Is(err,
// idem.ErrUnavailable). The pgx error, such as a *pgconn.PgError, stays in
// the chain for errors.As. In lease mode a serialization failure, which a
// statement meets when the session's default_transaction_isolation is
// repeatable read or serializable and another writer changed the record
// meanwhile, is not reported: the statement runs again (a few times at
// most), as read committed would have had it. A statement either
// happened or not; if the connection is lost after the server committed it,
// the caller sees ErrUnavailable for a change that was made (for Begin, a
// reservation the caller does not know of: it is taken over when its lease
// lapses).
//
// # Decisions
//
//   - result_payload is json, not jsonb as in the design: jsonb normalises
//     (key order, whitespace, duplicate keys, escapes), and a replay must
//     return the committed bytes exactly. json is validated by PostgreSQL
//     and kept as text. request_payload and error_payload stay jsonb, as
//     the design chose, for validation and querying; the recorded request
//     comes back normalised, which Mismatch reporting allows.
//   - Timestamps are computed in Go from Config.Now and truncated to the
//     microsecond; the SQL never calls now(). Every process must therefore
//     have a reasonably synchronised clock, as with any lease.
//   - The purge index is on (namespace COLLATE "C", expires_at):
//     PurgeExpired reads only its namespace's expired entries, oldest
//     first (with expires_at first, each batch walked the expired records
//     of every namespace). The point lookups compare namespace in the
//     column's collation, so they cannot use it, and the planner never
//     prefers it to the primary key (a generic plan on a new, empty table
//     would otherwise, and walk the whole namespace). Migrate replaces the
//     expiry indexes of earlier versions with it, building it in its
//     transaction; for a large table, build it first with CREATE INDEX
//     CONCURRENTLY under the same name (see MigrationSQL).
//   - PurgeExpired deletes in batches (Config.PurgeBatch) chosen with FOR
//     UPDATE SKIP LOCKED, so it never waits for, or holds up, writers.
//   - Table names are limited to lowercase identifiers, optionally
//     schema-qualified, and quoted with pgx.Identifier. Upper case is
//     refused rather than quoted, because PostgreSQL folds unquoted names,
//     so a quoted "Records" would differ from the Records of hand-written
//     SQL.
//   - NUL characters in a StoredError (jsonb cannot store them) are
//     replaced with U+FFFD, as encoding/json replaces invalid UTF-8, so that
//     a permanent failure can always be recorded.
//   - While another transaction holds a key's lock and the record it is
//     writing cannot be seen yet (uncommitted, or being created this
//     instant), Begin answers InFlight whatever the fingerprint: there is
//     no visible record to compare with. Mismatch takes precedence over
//     InFlight for every record that can be seen.
//   - Begin is one statement that may write, so it cannot run in a
//     read-only transaction, even when it would only replay.
//   - A Store may be made without a pool, for database/sql programs that
//     only use WithSQLTx.
//   - In transactional mode a cancelled ctx makes pgx close the
//     connection it was using, which ends the caller's transaction too.
//     In lease mode the store asks the server to cancel the statement,
//     and closes the connection after its answer: a cancel request can
//     arrive late, and would cancel the connection's next statement.
package pgstore
