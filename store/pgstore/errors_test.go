package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestInvalidPayloads: JSON that encoding/json accepts but PostgreSQL does
// not is rejected with ErrInvalidPayload and writes nothing, and in
// transactional mode it leaves the caller's transaction usable.
func TestInvalidPayloads(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	ns := idemtest.RandomNamespace(t)
	fp := mustRequest(t, `{}`).Fingerprint
	requests := map[string]string{
		"NUL escape":          `{"a":"x\u0000y"}`,
		"lone high surrogate": `["\ud800"]`,
		"lone low surrogate":  `"\udc00"`,
		"high then non-low":   `"\ud800\u0041"`,
		"invalid UTF-8":       "\"\xff\"",
		"numeric overflow":    `1e1000000`, // passes the Go checks; PostgreSQL refuses it
	}
	for name, payload := range requests {
		t.Run("Request/"+name, func(t *testing.T) {
			k := mustKey(t, ns, "req-"+strings.ReplaceAll(name, " ", "-"))
			_, err := tb.store.Begin(ctx, k, idem.Request{Fingerprint: fp, Payload: []byte(payload)}, nil)
			if !errors.Is(err, idem.ErrInvalidPayload) || errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("Begin: %v, want ErrInvalidPayload", err)
			}
			if _, err := tb.store.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("a rejected Begin left a record: %v", err)
			}
		})
	}
	t.Run("Request/ValidSurrogatePair", func(t *testing.T) {
		k := mustKey(t, ns, "pair")
		o, err := tb.store.Begin(ctx, k, idem.Request{Fingerprint: fp, Payload: []byte(`"\ud83d\ude00 \\u0000"`)}, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin = %v, %v; want Fresh", o.Kind, err)
		}
	})

	t.Run("Result", func(t *testing.T) {
		k := mustKey(t, ns, "result")
		o, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.store.Commit(ctx, k, o.Lease, []byte("\"\xff\"")); !errors.Is(err, idem.ErrInvalidPayload) {
			t.Fatalf("Commit with invalid UTF-8: %v, want ErrInvalidPayload", err)
		}
		// The json column keeps what jsonb cannot: replayed byte for byte.
		result := []byte(`{"nul":"a\u0000b", "lone":"\udc00",  "dup":1, "dup":2}`)
		if err := tb.store.Commit(ctx, k, o.Lease, result); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		p, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
		if err != nil || p.Kind != idem.PriorResult || string(p.Result) != string(result) {
			t.Fatalf("replay = %v %q, %v; want %q", p.Kind, p.Result, err, result)
		}
	})

	t.Run("StoredErrorWithNUL", func(t *testing.T) {
		k := mustKey(t, ns, "nul-error")
		o, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		se := idem.StoredError{Class: "c", Message: "bad\x00byte", Cause: "x"}
		if err := tb.store.FailPermanent(ctx, k, o.Lease, se); err != nil {
			t.Fatalf("FailPermanent: %v", err)
		}
		p, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
		if err != nil || p.Kind != idem.PriorError {
			t.Fatalf("replay = %v, %v", p.Kind, err)
		}
		if want := (idem.StoredError{Class: "c", Message: "bad\uFFFDbyte", Cause: "x"}); *p.Error != want {
			t.Errorf("replayed error = %+v, want %+v", *p.Error, want)
		}
	})

	t.Run("TransactionSurvivesRejection", func(t *testing.T) {
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		s := tb.store.WithTx(tx)
		k := mustKey(t, ns, "in-tx")
		if _, err := s.Begin(ctx, k, idem.Request{Fingerprint: fp, Payload: []byte(`"\u0000"`)}, nil); !errors.Is(err, idem.ErrInvalidPayload) {
			t.Fatalf("Begin: %v, want ErrInvalidPayload", err)
		}
		o, err := s.Begin(ctx, k, mustRequest(t, `{}`), nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin after a rejected one in the same transaction = %v, %v", o.Kind, err)
		}
		if err := s.Commit(ctx, k, o.Lease, []byte("\"\xfe\"")); !errors.Is(err, idem.ErrInvalidPayload) {
			t.Fatalf("Commit: %v, want ErrInvalidPayload", err)
		}
		if err := s.Commit(ctx, k, o.Lease, []byte(`true`)); err != nil {
			t.Fatalf("Commit after a rejected one in the same transaction: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestErrorPayloadLimit: an encoded stored error over MaxPayload is
// rejected before anything is written.
func TestErrorPayloadLimit(t *testing.T) {
	tb := setup(t, pgstore.Config{MaxPayload: 64})
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "big-error")
	o, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tooLarge *idem.PayloadTooLargeError
	err = tb.store.FailPermanent(ctx, k, o.Lease, idem.StoredError{Class: "c", Message: strings.Repeat("m", 64)})
	if !errors.As(err, &tooLarge) || tooLarge.What != "error" {
		t.Fatalf("FailPermanent with a large error: %v, want *PayloadTooLargeError for the error", err)
	}
	if rec, err := tb.store.Get(ctx, k); err != nil || rec.Status != idem.StatusInProgress {
		t.Fatalf("record after the rejected call = %v, %v", rec.Status, err)
	}
}

// TestUnavailable: a server that cannot be reached, or a store whose
// table is missing, gives ErrUnavailable; argument errors are still
// reported first, without touching the server.
func TestUnavailable(t *testing.T) {
	srv := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Config{MaxPayload: 32})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{}`)

	// Not migrated: the table is missing.
	if _, err := s.Begin(ctx, k, req, nil); !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Begin without the table: %v, want ErrUnavailable", err)
	} else if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "42P01" {
		t.Errorf("Begin without the table: %v, want the *pgconn.PgError (42P01) in the chain", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := s.Begin(ctx, k, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	lease := o.Lease
	calls := map[string]func() error{
		"Begin":         func() error { _, err := s.Begin(ctx, k, req, nil); return err },
		"Commit":        func() error { return s.Commit(ctx, k, lease, []byte(`1`)) },
		"FailPermanent": func() error { return s.FailPermanent(ctx, k, lease, idem.StoredError{Class: "c"}) },
		"FailTransient": func() error { return s.FailTransient(ctx, k, lease) },
		"Heartbeat":     func() error { _, err := s.Heartbeat(ctx, k, lease, 0); return err },
		"Get":           func() error { _, err := s.Get(ctx, k); return err },
		"PurgeExpired":  func() error { _, err := s.PurgeExpired(ctx, k.Namespace(), time.Now()); return err },
		"Migrate":       func() error { return s.Migrate(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, idem.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
	}
	// Invalid arguments are reported as such even now: nothing was sent.
	var tooLarge *idem.PayloadTooLargeError
	if _, err := s.Begin(ctx, k, idem.Request{Fingerprint: req.Fingerprint, Payload: []byte(`"0123456789abcdef0123456789abcdef"`)}, nil); !errors.As(err, &tooLarge) {
		t.Errorf("Begin with an oversized payload: %v, want *PayloadTooLargeError", err)
	}
	if err := s.Commit(ctx, k, lease, []byte(`{`)); !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Commit with invalid JSON: %v, want ErrInvalidPayload", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, k, lease, []byte(`1`)); err != nil {
		t.Errorf("Commit after the restart: %v", err)
	}
}

// TestCancelledContext: a context cancelled before or during a call gives
// context.Canceled, not ErrUnavailable, and writes nothing.
func TestCancelledContext(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tb.store.Begin(ctx, k, req, nil); !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Begin: %v, want context.Canceled only", err)
	}
	if _, err := tb.store.PurgeExpired(ctx, k.Namespace(), time.Now()); !errors.Is(err, context.Canceled) {
		t.Errorf("PurgeExpired: %v, want context.Canceled", err)
	}
	if err := tb.store.Migrate(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Migrate: %v, want context.Canceled", err)
	}
	if _, err := tb.store.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after a cancelled Begin: %v, want ErrNotFound", err)
	}
}

// TestNoPool: a Store made without a pool works only through WithTx.
func TestNoPool(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	s, err := pgstore.New(nil, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	if _, err := s.Begin(ctx, k, mustRequest(t, `{}`), nil); !errors.Is(err, idem.ErrInvalidArgument) || errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Begin on a Store without a pool: %v, want idem.ErrInvalidArgument", err)
	}
	if err := s.Migrate(ctx); err == nil {
		t.Error("Migrate on a Store without a pool succeeded")
	}
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	o, err := s.WithTx(tx).Begin(ctx, k, mustRequest(t, `{}`), nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatalf("WithTx Begin = %v, %v", o.Kind, err)
	}
}

// TestConstraintViolation: a constraint the store does not know of (here
// one an operator added) fails the call with the database's error, which
// is neither ErrUnavailable nor ErrInvalidPayload, and writes nothing.
func TestConstraintViolation(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	if _, err := tb.pool.Exec(ctx, `ALTER TABLE `+pgstore.DefaultTable+` ADD CONSTRAINT no_forbidden CHECK (key_value <> 'forbidden')`); err != nil {
		t.Fatal(err)
	}
	k := mustKey(t, idemtest.RandomNamespace(t), "forbidden")
	_, err := tb.store.Begin(ctx, k, mustRequest(t, `{}`), nil)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23514" || errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrInvalidPayload) {
		t.Fatalf("Begin violating a CHECK: %v, want the check violation alone", err)
	}
	if _, err := tb.store.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after the failed Begin: %v, want ErrNotFound", err)
	}
}
