package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// txMisuseCalls makes every call of s once with valid arguments and
// returns each call's error by name; a call that panics is reported as an
// error saying so.
func txMisuseCalls(s idem.Store, k idem.Key, req idem.Request) map[string]error {
	ctx := context.Background()
	lease := idem.Lease{Token: "some-token", Fence: 1, ExpiresAt: time.Now().Add(time.Minute), TTL: time.Minute}
	calls := map[string]func() error{
		"Begin":         func() error { _, err := s.Begin(ctx, k, req, nil); return err },
		"Commit":        func() error { return s.Commit(ctx, k, lease, []byte(`1`)) },
		"FailPermanent": func() error { return s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "x"}) },
		"FailTransient": func() error { return s.FailTransient(ctx, k, lease) },
		"Heartbeat":     func() error { _, err := s.Heartbeat(ctx, k, lease, 0); return err },
		"PurgeExpired":  func() error { _, err := s.PurgeExpired(ctx, k.Namespace(), time.Now()); return err },
		"Get":           func() error { _, err := s.Get(ctx, k); return err },
	}
	errs := make(map[string]error, len(calls))
	for name, call := range calls {
		func() {
			defer func() {
				if p := recover(); p != nil {
					errs[name] = fmt.Errorf("panicked: %v", p)
				}
			}()
			errs[name] = call()
		}()
	}
	return errs
}

// wantTxInvalidArgument fails t unless every call of s returns an error
// satisfying errors.Is(err, idem.ErrInvalidArgument), and not
// ErrUnavailable, whose text contains what.
func wantTxInvalidArgument(t *testing.T, s idem.Store, k idem.Key, req idem.Request, what string) {
	t.Helper()
	if b, ok := s.(idem.TxBound); !ok || !b.TxBound() {
		t.Error("not TxBound")
	}
	for name, err := range txMisuseCalls(s, k, req) {
		switch {
		case !errors.Is(err, idem.ErrInvalidArgument):
			t.Errorf("%s: %v, want idem.ErrInvalidArgument", name, err)
		case errors.Is(err, idem.ErrUnavailable):
			t.Errorf("%s: %v also satisfies ErrUnavailable: retrying cannot help", name, err)
		case !strings.Contains(err.Error(), what):
			t.Errorf("%s: %q does not say %q", name, err, what)
		}
	}
}

// TestTxNilTransaction: the store WithTx returns for a nil *sql.Tx does
// not panic: every call fails with idem.ErrInvalidArgument.
func TestTxNilTransaction(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	wantTxInvalidArgument(t, s.WithTx(nil), k, mustRequest(t, `{"a":1}`), "nil")
}

// TestTxEndedTransaction: a store bound to a transaction that has been
// committed or rolled back does not panic: every call fails with
// idem.ErrInvalidArgument (not ErrUnavailable: retrying cannot help), and
// nothing is written.
func TestTxEndedTransaction(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 2)
	s := newStore(t, db, nil)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{"a":1}`)
	for _, commit := range []bool{true, false} {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		wantTxInvalidArgument(t, s.WithTx(tx), k, req, "ended")
	}
	if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after the calls on ended transactions: %v, want ErrNotFound", err)
	}
}
