package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// callAll makes every call of s once with valid arguments and returns
// each call's error by name; a call that panics is reported as an error
// saying so.
func callAll(ctx context.Context, s idem.Store, k idem.Key, req idem.Request) map[string]error {
	lease := idem.Lease{Token: "some-token", Fence: 1, ExpiresAt: time.Now().Add(time.Minute), TTL: time.Minute}
	calls := map[string]func() error{
		"Begin": func() error { _, err := s.Begin(ctx, k, req, nil); return err },
		"Commit": func() error {
			return s.Commit(ctx, k, lease, []byte(`1`))
		},
		"FailPermanent": func() error {
			return s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "x", Message: "y"})
		},
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

// wantInvalidArgument fails t unless every call of s returns an error
// satisfying errors.Is(err, idem.ErrInvalidArgument) whose text contains
// what.
func wantInvalidArgument(t *testing.T, s idem.Store, k idem.Key, req idem.Request, what string) {
	t.Helper()
	if b, ok := s.(idem.TxBound); !ok || !b.TxBound() {
		t.Error("not TxBound")
	}
	for name, err := range callAll(ctxT(t), s, k, req) {
		if !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want idem.ErrInvalidArgument", name, err)
			continue
		}
		if errors.Is(err, idem.ErrUnavailable) {
			t.Errorf("%s: %v also satisfies ErrUnavailable: retrying cannot help", name, err)
		}
		if !strings.Contains(strings.ToLower(err.Error()), what) {
			t.Errorf("%s: %q does not say %q", name, err, what)
		}
	}
}

// TestTxNilTransaction: the stores WithTx and WithSQLTx return for a nil
// transaction (a nil interface, or a nil pointer in it) do not panic:
// every call fails with idem.ErrInvalidArgument, and nothing is sent.
func TestTxNilTransaction(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{"a":1}`)
	t.Run("WithTx(nil)", func(t *testing.T) {
		wantInvalidArgument(t, tb.store.WithTx(nil), k, req, "nil")
	})
	t.Run("WithTx((*pgxpool.Tx)(nil))", func(t *testing.T) {
		wantInvalidArgument(t, tb.store.WithTx((*pgxpool.Tx)(nil)), k, req, "nil")
	})
	t.Run("WithSQLTx(nil)", func(t *testing.T) {
		wantInvalidArgument(t, tb.store.WithSQLTx(nil), k, req, "nil")
	})
	t.Run("NoPool", func(t *testing.T) {
		s, err := pgstore.New(nil, pgstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wantInvalidArgument(t, s.WithTx(nil), k, req, "nil")
		wantInvalidArgument(t, s.WithSQLTx(nil), k, req, "nil")
	})
}

// TestTxEndedTransaction: a store bound to a transaction that has been
// committed or rolled back does not panic: every call fails with
// idem.ErrInvalidArgument (not ErrUnavailable: retrying cannot help), and
// nothing is written.
func TestTxEndedTransaction(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{"a":1}`)
	db := stdlib.OpenDBFromPool(tb.pool)
	t.Cleanup(func() { _ = db.Close() })
	for _, commit := range []bool{true, false} {
		end := "RolledBack"
		if commit {
			end = "Committed"
		}
		t.Run("pgx/"+end, func(t *testing.T) {
			tx, err := tb.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			wantInvalidArgument(t, tb.store.WithTx(tx), k, req, "ended")
		})
		t.Run("database/sql/"+end, func(t *testing.T) {
			tx, err := db.BeginTx(ctx, nil)
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
			wantInvalidArgument(t, tb.store.WithSQLTx(tx), k, req, "ended")
		})
	}
	if _, err := tb.store.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after the calls on ended transactions: %v, want ErrNotFound", err)
	}
}
