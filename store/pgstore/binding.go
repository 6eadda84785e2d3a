package pgstore

import (
	"time"

	"github.com/idemgo/idem"
)

// binding is the idem.Store of a Store on one querier: the pool (lease
// mode) or a caller's transaction (tx true: transactional mode).
type binding struct {
	s  *Store
	q  querier // nil for the lease binding of a Store without a pool, or a nil tx
	tx bool
	// unbound is the error of every call when q is nil because WithTx or
	// WithSQLTx was given a nil transaction.
	unbound error
}

// noQuerier is the error of a call on a binding without a querier.
func (b binding) noQuerier() error {
	if b.unbound != nil {
		return b.unbound
	}
	return errNoPool
}

var (
	_ idem.Store   = binding{}
	_ idem.TxBound = binding{}
)

// TxBound implements idem.TxBound: true for the stores WithTx and
// WithSQLTx return, so that idem.KeepAlive (and Do, and the HTTP
// middleware) never heartbeats from another goroutine on the caller's
// transaction.
func (b binding) TxBound() bool { return b.tx }

// now is the store's clock, truncated to PostgreSQL's microseconds so
// that what the store returns equals what it stored.
func (b binding) now() time.Time {
	return b.s.cfg.Now().Truncate(time.Microsecond)
}

// after is t+d rounded up to the microsecond, PostgreSQL's unit, so that a
// lease or a retention is never stored shorter than the caller was told
// (pgx truncates what it sends).
func after(t time.Time, d time.Duration) time.Time {
	end := t.Add(d)
	if r := end.Truncate(time.Microsecond); r.Before(end) {
		return r.Add(time.Microsecond)
	}
	return end
}

// keyArgs are the first three parameters of every key statement.
func keyArgs(k idem.Key) (ns, scope, value string) {
	return string(k.Namespace()), k.Scope(), k.Value()
}

// lockText is the text whose hashtextextended is the advisory lock number
// of key k in table t. The unit separator (0x1F) cannot occur in any part:
// table names are [a-z0-9_.], namespaces [a-z0-9_-], and scopes and key
// values have no control characters. Stores on tables of the same name in
// different schemas share lock numbers; a collision, like a 64-bit hash
// collision, can only make a Begin answer InFlight needlessly.
func lockText(t table, k idem.Key) string {
	return t.String() + "\x1f" + string(k.Namespace()) + "\x1f" + k.Scope() + "\x1f" + k.Value()
}
