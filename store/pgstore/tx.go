package pgstore

import (
	"database/sql"
	"fmt"
	"reflect"

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
// about to write the record, held until tx ends if Begin reserved the key
// (Fresh); a Begin of the same key in another transaction, or in lease
// mode, then answers InFlight at once instead of waiting for tx's
// uncommitted row. Begin runs its statement under a savepoint, rolled back
// to when it took the lock and did not write, so that a Begin that found
// another writer there first (and answers from its record) keeps no lock
// on the key. The savepoint, pgstore_begin, is sent with the statement on
// a pgx transaction (in a round trip of its own on a database/sql one) and
// is otherwise left open, ending with tx or with a savepoint of the
// caller's around it: a subtransaction per Begin. Commit, FailPermanent,
// FailTransient and Heartbeat take the same lock, waiting for it, so that
// a transaction settling a key never leaves a row lock that another
// transaction's Begin would wait behind. A settle call that finds its
// lease no longer current takes no lock, unless the record changed while
// the call ran (the lease was taken over as it settled): then the key
// stays locked until tx ends, which ErrStaleToken tells the caller to end.
//
// A PostgreSQL error aborts the caller's transaction, as any failed
// statement does; the store checks its arguments first so that invalid
// input does not get that far (see the package documentation).
//
// Call it on a Store made by New: the zero Store has no configuration.
// A nil tx (or a nil pointer in it, such as a nil *pgxpool.Tx) gives a
// store whose every call, once its arguments are checked, fails with an
// error satisfying errors.Is(err, idem.ErrInvalidArgument), and sends
// nothing. So does every call on a tx that has been committed or rolled
// back (the pgx error stays in the chain): retrying cannot help.
func (s *Store) WithTx(tx pgx.Tx) idem.Store {
	if isNil(tx) {
		return binding{s: s, tx: true, unbound: errNilTx("WithTx", "pgx.Tx")}
	}
	return binding{s: s, q: pgxQuerier{tx}, tx: true}
}

// WithSQLTx is WithTx for database/sql programs: tx must be a transaction
// of a *sql.DB opened with the pgx driver (github.com/jackc/pgx/v5/stdlib,
// for example with stdlib.OpenDBFromPool or sql.Open("pgx", url)), since the
// store passes pgx argument types through it. A nil tx, or one that has
// ended, fails every call as with WithTx.
func (s *Store) WithSQLTx(tx *sql.Tx) idem.Store {
	if tx == nil {
		return binding{s: s, tx: true, unbound: errNilTx("WithSQLTx", "*sql.Tx")}
	}
	return binding{s: s, q: sqlQuerier{tx}, tx: true}
}

// isNil reports whether tx is nil or holds a nil pointer, on which every
// method of pgx's transactions panics.
func isNil(tx pgx.Tx) bool {
	if tx == nil {
		return true
	}
	v := reflect.ValueOf(tx)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// errNilTx is the error of every call of a store that fn was given a nil
// transaction (of type typ) for.
func errNilTx(fn, typ string) error {
	return fmt.Errorf("pgstore: %s was given a nil %s: %w", fn, typ, idem.ErrInvalidArgument)
}
