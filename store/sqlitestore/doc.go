// Package sqlitestore is the embedded idem.Store: records live in a SQLite
// database file, with no server to run. It is the default store of the idem
// proxy (--store sqlite:PATH) and passes the conformance suite (idemtest).
//
// The package takes a *sql.DB and imports no SQLite driver: the program
// registers one. The project uses the cgo-free modernc.org/sqlite (driver
// name "sqlite"); anything that speaks SQLite 3.37 or later (STRICT tables,
// RETURNING) through database/sql works.
//
// # Opening the database
//
// With modernc.org/sqlite, open the file with this DSN:
//
//	import _ "modernc.org/sqlite"
//
//	db, err := sql.Open("sqlite", "idem.db"+
//		"?_pragma=busy_timeout(5000)"+
//		"&_pragma=journal_mode(WAL)"+
//		"&_pragma=synchronous(FULL)"+
//		"&_pragma=foreign_keys(ON)"+
//		"&_pragma=journal_size_limit(16777216)"+
//		"&_txlock=immediate")
//	db.SetMaxOpenConns(1) // lease mode only; see "Connections" below
//	store, err := sqlitestore.New(db, sqlitestore.Config{})
//	err = store.Migrate(ctx)
//
// Check both errors: a Store comes only from New (the zero Store, and the nil
// *Store New returns with an error, panic when used), and until Migrate has
// run every call fails with idem.ErrUnavailable ("no such table").
//
// The driver runs the pragmas on every connection it opens, busy_timeout
// first. What each one is for:
//
//   - busy_timeout(5000): SQLite admits one writer at a time. A connection
//     that finds the write lock taken waits for it up to 5 s (the driver
//     ends the wait early when the call's ctx is done) instead of failing at
//     once with SQLITE_BUSY. Without it, concurrent Begins on a pool of
//     connections fail. Make it longer than the longest write transaction,
//     the callers' own transactions in transactional mode included. A wait
//     that outlasts it gives an error satisfying
//     errors.Is(err, idem.ErrUnavailable).
//   - journal_mode(WAL): readers and the writer do not block each other, so
//     Get and the caller's own reads proceed while a write is under way
//     (Begin, though, a replay too, waits for the write lock, and holds it
//     until it returns); a commit appends to the -wal file
//     next to the database. WAL is a property of the file and persists. It
//     needs a local file system (not NFS or SMB).
//   - synchronous(FULL): every commit is on disk before it returns. We chose
//     FULL over NORMAL on purpose: in WAL mode NORMAL survives a crash of the
//     process but may lose the last commits on a power loss or an OS crash,
//     and for this store a lost Commit means a retry runs the effect a
//     second time, the one thing the store exists to prevent. Choose NORMAL
//     only if that risk is acceptable and you need the throughput (one fsync
//     per transaction fewer).
//   - journal_size_limit(16777216): SQLite checkpoints the WAL by itself
//     (at the first commit after it holds 1000 pages, some 4 MB), copying
//     its pages into the database, and then writes the -wal file again from
//     its start, so that under steady load it stays near 4 MB. But a file
//     that a large transaction grew (a batch of large results) keeps its
//     size until the last connection closes; with this limit it is cut
//     back to 16 MiB once the log starts over. A process that keeps a read
//     transaction open for long (a caller's own) holds the checkpoint back,
//     and the file grows meanwhile.
//   - foreign_keys(ON): the store's table has no foreign keys; this is for
//     the caller's own tables in transactional mode (SQLite leaves it off).
//   - _txlock=immediate: database/sql's BeginTx then sends BEGIN IMMEDIATE,
//     so a transaction takes the write lock when it starts and waits for it
//     under busy_timeout. A deferred transaction (the default) that reads
//     before its first write, Begin's included, cannot wait at that write:
//     it fails at once with SQLITE_BUSY (idem.ErrUnavailable) if another
//     connection holds the write lock then, a lease-mode Begin for instance,
//     or wrote since the read.
//     Lease mode does not depend on it: the transactions it opens, for
//     Begin and for the batches of Config.Batch, it starts with
//     BEGIN IMMEDIATE itself.
//
// Use a file. ":memory:" gives every pooled connection a database of its own.
// With github.com/mattn/go-sqlite3 (driver "sqlite3") the same settings are
// "?_busy_timeout=5000&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=on&_txlock=immediate"
// (run PRAGMA journal_size_limit in its ConnectHook).
//
// # Connections
//
// Whatever the pool size, SQLite runs one write at a time; connections beyond
// one only let reads (Get, a caller's own) run beside a write: Begin, even
// one that replays, takes the write lock.
//
//   - Lease mode alone, as in the proxy: db.SetMaxOpenConns(1). Each store
//     call holds the connection for a few short statements (Begin: up to
//     five, in a transaction of its own), and
//     callers queue for it in database/sql, in order, instead of polling the
//     write lock in SQLite's busy handler (which sleeps between attempts, up
//     to 100 ms at a time). Measured with synchronous(FULL) and 16
//     concurrent callers (bench/sqlitestore_test.go), one connection gave
//     about twice the Begin+Commit throughput of four and a third of their
//     99th-percentile latency; with synchronous(NORMAL) four connections
//     were some 10% faster, with a somewhat longer tail. While another
//     process, or a transaction of a caller's, holds the write lock, each
//     call in that queue waits out the busy timeout in turn once it has the
//     connection, so the tenth waits some ten times as long: give calls a
//     deadline, or use Config.Batch, whose queued calls share one wait.
//   - Transactional mode: a caller's transaction holds a connection until it
//     ends, so with one connection every other call waits for it (until its
//     ctx is done). Allow a few connections (4 to 8), keep the busy timeout,
//     and keep transactions short: each one blocks every other writer for as
//     long as it is open. Do not use the *sql.DB (or a lease-mode Store on
//     it) from a goroutine that holds a transaction: its call needs another
//     connection, and the others may all be held by writers waiting for the
//     transaction's lock, so it waits until their busy timeout or its ctx
//     ends. With one connection it always deadlocks.
//
// With Config.Batch, the lease-mode writes of concurrent callers share
// transactions: the calls that arrive while a write is under way queue,
// then run together in one transaction, each in a savepoint (a failing
// call is rolled back alone), and one commit, one sync of the log, makes
// them all durable before any returns. A call waits in the queue until its
// batch's transaction holds the write lock, so that while another
// transaction holds it, a call whose context ends returns at once with that
// context's error and never runs; once running, it finishes first. With
// synchronous(FULL) and 16 concurrent callers on one connection it did
// 3.9× the Begin+Commit pairs per second of plain statements
// (bench/sqlitestore_test.go). A lone caller runs at once, as without
// Batch.
//
// Several processes may share one file (two proxies, or a proxy and idem
// purge): each key is still run once in total, with the settings above
// (TestTwoProcessesRaceOnOneFile). But a process waiting for the write lock
// another holds polls for it in SQLite's busy handler, which sleeps up to
// 100 ms between attempts, while the holder, batched and busy, takes it
// again as soon as it commits: under load one process then gets most
// writes and a call in the other may wait seconds, up to the busy timeout
// (then idem.ErrUnavailable). Run one writing process per file; for
// several, use pgstore or redisstore.
//
// # Schema
//
// Migrate creates it; MigrationSQL prints it (Table defaults to
// "idempotency_record"):
//
//	CREATE TABLE IF NOT EXISTS "idempotency_record" (
//	    namespace        TEXT    NOT NULL,
//	    scope            TEXT    NOT NULL DEFAULT '',
//	    key_value        TEXT    NOT NULL,
//	    request_hash     BLOB    NOT NULL,          -- idem.Fingerprint.Bytes()
//	    request_payload  TEXT    NOT NULL,          -- JSON, as submitted
//	    status           TEXT    NOT NULL CHECK (status IN
//	                     ('in_progress', 'committed', 'failed_permanent')),
//	    result_payload   TEXT,                      -- JSON, byte for byte
//	    error_payload    TEXT,                      -- idem.StoredError as JSON
//	    owner_token      TEXT    NOT NULL,          -- lease token
//	    fence            INTEGER NOT NULL CHECK (fence >= 1),
//	    created_at       INTEGER NOT NULL,          -- Unix microseconds
//	    expires_at       INTEGER NOT NULL,          -- Unix microseconds
//	    lease_expires_at INTEGER,                   -- NULL once settled
//	    PRIMARY KEY (namespace, scope, key_value)
//	) STRICT;
//	CREATE INDEX IF NOT EXISTS "idempotency_record_expires_idx"
//	    ON "idempotency_record" (namespace, expires_at);
//
// Payloads are checked as JSON (idem.CheckPayload) and against
// Config.MaxPayload before anything is written, and kept as TEXT exactly as
// given, so a replay returns the committed bytes. Every timestamp comes from
// Config.Now, computed in Go and passed as a parameter; SQLite's own clock is
// never read. To read one in the sqlite3 shell:
// datetime(expires_at / 1000000, 'unixepoch').
//
// # Atomicity
//
// Every state change is one SQL statement whose WHERE clause re-checks the
// state it changes, or a transaction holding the write lock, so no
// interleaving of callers, connections or processes can break it:
//
//   - Begin runs in one transaction (its own in lease mode, the caller's in
//     transactional mode, its batch's with Config.Batch) whose first
//     statement takes the write lock, held until the transaction ends, so
//     every Begin, a replay too, waits for a writer that holds it. Only then
//     does Begin read Config.Now: a Begin that waited for the lock grants a
//     full lease and retention from the time it holds it, and judges the
//     record it finds at that time. It inserts the record (INSERT … ON
//     CONFLICT DO NOTHING): of any number of concurrent Begins of a new key
//     exactly one inserts and gets Fresh. The others read the record and
//     decide with idem.Decide (replay, Mismatch, InFlight) without writing
//     anything. An expired record, or an in-progress one of the same
//     request whose lease lapsed, is re-reserved by an UPDATE … WHERE <that
//     condition> … RETURNING fence. No other writer can change the record
//     between these statements, so Begin decides once.
//   - Commit, FailPermanent, FailTransient and Heartbeat are one UPDATE or
//     DELETE each, conditioned on the lease (in progress, same token and
//     fence, not expired); when nothing matches they return
//     idem.ErrStaleToken and have changed nothing.
//   - PurgeExpired deletes at most 1000 records of its namespace per
//     statement, until none is left.
//
// # Modes
//
// Lease mode (Store): each call commits on its own and is visible to every
// connection and process at once; reservations carry a lease and a fencing
// token, as idem.Store describes.
//
// Transactional mode (Store.WithTx): the calls run in the caller's *sql.Tx,
// so the record commits or rolls back with the caller's writes. Because
// SQLite has a single writer, this mode differs from a server database in
// one respect: while a transaction that called Begin is open, it holds the
// database's write lock, and a second transaction's Begin, of any key, waits
// for that lock (up to busy_timeout) instead of answering InFlight at once.
// When the first transaction ends, the second sees its outcome: Fresh after
// a rollback, PriorResult or PriorError after a committed settlement,
// InFlight after a committed but unsettled reservation. Exactly-once holds;
// only the immediate InFlight answer is missing (the conformance suite runs
// with idemtest.Harness.SingleWriter for this). Lease-mode Begins on the
// same database wait for the lock too: keep transactions short.
//
// # Errors
//
// Invalid arguments are rejected before any I/O with the errors of the idem
// package (idem.ErrInvalidKey, idem.ErrInvalidPayload,
// *idem.PayloadTooLargeError, …). A done ctx gives an error satisfying
// errors.Is(err, ctx.Err()); the interrupted statement is rolled back by
// SQLite (in transactional mode SQLite may roll back the caller's whole
// transaction: treat every error as fatal for it). In transactional mode,
// every call of a store bound to a nil *sql.Tx, or to one that has already
// been committed or rolled back, fails with an error satisfying
// errors.Is(err, idem.ErrInvalidArgument). Every other database
// failure (a closed *sql.DB, a missing table, an I/O error, a full disk, a
// busy timeout) satisfies errors.Is(err, idem.ErrUnavailable), with the
// driver's error in the chain.
//
// # Crashes
//
// A record is durable once the call that wrote it has returned (with
// synchronous(FULL), across power loss too). A process that dies mid-way
// leaves its reservations in_progress: they answer InFlight until their lease
// lapses and are then taken over by the next Begin of the same request.
package sqlitestore
