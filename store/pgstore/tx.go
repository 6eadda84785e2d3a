package pgstore

import (
	"database/sql"

	"github.com/idemgo/idem"
	"github.com/jackc/pgx/v5"
)

// WithTx returns the store bound to tx (transactional mode): every call
// runs in tx, so the record is created, settled and removed together with
// the caller's own writes in tx, and vanishes if tx rolls back. The store
// never begins, commits or rolls back tx. Like tx, the returned store is
// for one goroutine at a time, and must not be used after tx ends; it
// implements idem.TxBound, so idem.Do and idem.KeepAlive do not extend its
// leases from another goroutine (while tx is open, the transaction, not
// the lease, keeps other callers out).
//
// Begin takes a transaction-level advisory lock on the key when it is
// about to write the record, held until tx ends; a Begin of the same key in
// another transaction, or in lease mode, then answers InFlight at once
// instead of waiting for tx's uncommitted row. Commit, FailPermanent,
// FailTransient and Heartbeat take the same lock, waiting for it, so that
// a transaction settling a key never leaves a row lock that another
// transaction's Begin would wait behind.
//
// A PostgreSQL error aborts the caller's transaction, as any failed
// statement does; the store checks its arguments first so that invalid
// input does not get that far (see the package documentation).
func (s *Store) WithTx(tx pgx.Tx) idem.Store {
	return binding{s: s, q: pgxQuerier{tx}, tx: true}
}

// WithSQLTx is WithTx for database/sql programs: tx must be a transaction
// of a *sql.DB opened with the pgx driver (github.com/jackc/pgx/v5/stdlib,
// for example with stdlib.OpenDBFromPool or sql.Open("pgx", url)), since the
// store passes pgx argument types through it.
func (s *Store) WithSQLTx(tx *sql.Tx) idem.Store {
	return binding{s: s, q: sqlQuerier{tx}, tx: true}
}
