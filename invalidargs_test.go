package idem_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// noPanic runs f and fails t, instead of crashing, when f panics.
func noPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", name, p)
		}
	}()
	f()
}

// TestInvalidArgumentsAreErrors: a nil Store, a nil function, a zero or
// nil Typed, an Owner without a store, key or lease, a nil *Minter: every
// one is a typed error (ErrInvalidArgument), never a panic, and nothing
// runs.
func TestInvalidArgumentsAreErrors(t *testing.T) {
	ctx := context.Background()
	s := newMem(t, nil)
	k := testKey(t, "invalid-args")
	ran := false
	fn := func(context.Context) (int, error) { ran = true; return 1, nil }

	noPanic(t, "Do with a nil Store", func() {
		if _, err := idem.Do(ctx, nil, k, "req", fn, nil); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do with a nil Store = %v, want ErrInvalidArgument", err)
		}
	})
	var failed *memstore.Store // what a constructor returns with its error
	noPanic(t, "Do with a nil *memstore.Store", func() {
		if _, err := idem.Do(ctx, failed, k, "req", fn, nil); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do with a nil *memstore.Store = %v, want ErrInvalidArgument", err)
		}
	})
	noPanic(t, "Do with a nil fn", func() {
		if _, err := idem.Do[string, int](ctx, s, k, "req", nil, nil); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do with a nil fn = %v, want ErrInvalidArgument", err)
		}
	})
	if _, err := s.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("an invalid Do left a record: %v", err)
	}

	var zero idem.Typed[string, int]
	var nilTyped *idem.Typed[string, int]
	for name, typed := range map[string]*idem.Typed[string, int]{
		"NewTyped(nil)":                     idem.NewTyped[string, int](nil, nil),
		"NewTyped of a nil *memstore.Store": idem.NewTyped[string, int](failed, nil),
		"zero Typed":                        &zero,
		"nil *Typed":                        nilTyped,
	} {
		noPanic(t, name, func() {
			if _, err := typed.Begin(ctx, k, "req", nil); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s: Begin = %v, want ErrInvalidArgument", name, err)
			}
			lease := idem.Lease{Token: "t", Fence: 1}
			if err := typed.Commit(ctx, k, lease, 1); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s: Commit = %v, want ErrInvalidArgument", name, err)
			}
			if err := typed.FailPermanent(ctx, k, lease, errors.New("x")); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s: FailPermanent = %v, want ErrInvalidArgument", name, err)
			}
			if err := typed.FailTransient(ctx, k, lease); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s: FailTransient = %v, want ErrInvalidArgument", name, err)
			}
			if typed.Store() != nil {
				t.Errorf("%s: Store() = %v, want nil", name, typed.Store())
			}
		})
	}
	noPanic(t, "zero Typed Request", func() {
		if r, err := zero.Request("req"); err != nil || r.Fingerprint.IsZero() {
			t.Errorf("zero Typed Request = %+v, %v; want the default encoding", r, err)
		}
	})

	req := mustRequest(t, `"req"`)
	o, err := s.Begin(ctx, k, req, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatal(o, err)
	}
	work := func(context.Context) ([]byte, bool) { ran = true; return []byte(`1`), true }
	for name, own := range map[string]*idem.Owner{
		"no Store": {Key: k, Lease: o.Lease},
		"no Key":   {Store: s, Lease: o.Lease},
		"no Lease": {Store: s, Key: k},
	} {
		noPanic(t, "Owner.Run with "+name, func() {
			own.Run(ctx, work)
			if !errors.Is(own.Err, idem.ErrInvalidArgument) || own.Recorded {
				t.Errorf("Owner.Run with %s: Err %v, Recorded %v; want ErrInvalidArgument", name, own.Err, own.Recorded)
			}
		})
	}
	noPanic(t, "Owner.Run with a nil *memstore.Store", func() {
		own := idem.Owner{Store: failed, Key: k, Lease: o.Lease}
		own.Run(ctx, work)
		if !errors.Is(own.Err, idem.ErrInvalidArgument) || own.Recorded {
			t.Errorf("Owner.Run with a nil *memstore.Store: Err %v, Recorded %v; want ErrInvalidArgument", own.Err, own.Recorded)
		}
	})
	noPanic(t, "Owner.Run with a nil work", func() {
		own := idem.Owner{Store: s, Key: k, Lease: o.Lease}
		own.Run(ctx, nil)
		if !errors.Is(own.Err, idem.ErrInvalidArgument) {
			t.Errorf("Owner.Run with a nil work: Err %v, want ErrInvalidArgument", own.Err)
		}
	})
	if ran {
		t.Error("a function ran in a call with invalid arguments")
	}
	if rec, err := s.Get(ctx, k); err != nil || rec.Status != idem.StatusInProgress {
		t.Errorf("the reservation after invalid Owner.Runs: %+v, %v; want it untouched", rec, err)
	}

	noPanic(t, "KeepAlive with a nil Store", func() {
		lost := 0
		stop := idem.KeepAlive(ctx, nil, k, o.Lease, time.Millisecond, func() { lost++ })
		time.Sleep(5 * time.Millisecond) // a heartbeat would have fired
		stop()
		if lost != 1 {
			t.Errorf("KeepAlive with a nil Store reported the loss %d times, want 1", lost)
		}
	})
	noPanic(t, "KeepAlive with a nil *memstore.Store", func() {
		// No heartbeat comes within the test: a loss is reported at once,
		// or never (a heartbeat, on its timer, would panic and end the
		// process).
		lost := 0
		stop := idem.KeepAlive(ctx, failed, k, o.Lease, time.Hour, func() { lost++ })
		stop()
		if lost != 1 {
			t.Errorf("KeepAlive with a nil *memstore.Store reported the loss %d times, want 1", lost)
		}
	})
	noPanic(t, "nil *Minter", func() {
		var m *idem.Minter
		if ns := m.Namespace(); ns != "" {
			t.Errorf("nil *Minter Namespace = %q", ns)
		}
		if _, err := m.Mint("a"); !errors.Is(err, idem.ErrInvalidNamespace) {
			t.Errorf("nil *Minter Mint = %v, want ErrInvalidNamespace", err)
		}
	})
}

// TestDoEncodingFailures: a request or result that does not encode is
// ErrInvalidPayload; a recorded result that no longer decodes is
// ErrIncompatibleState. fn does not run when the request is at fault.
func TestDoEncodingFailures(t *testing.T) {
	ctx := context.Background()
	s := newMem(t, nil)
	_, err := idem.Do(ctx, s, testKey(t, "bad-request"), func() {}, func(context.Context) (int, error) {
		t.Error("fn ran for a request that does not encode")
		return 1, nil
	}, nil)
	if !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Do with a request that does not encode = %v, want ErrInvalidPayload", err)
	}

	k := testKey(t, "bad-result")
	_, err = idem.Do(ctx, s, k, "req", func(context.Context) (float64, error) { return math.Inf(1), nil }, nil)
	if !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Do with a result that does not encode = %v, want ErrInvalidPayload", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("record after an unencodable result: %v, want the key released", err)
	}

	k = testKey(t, "drifted-result")
	if _, err := idem.Do(ctx, s, k, "req", func(context.Context) (string, error) { return "text", nil }, nil); err != nil {
		t.Fatal(err)
	}
	_, err = idem.Do(ctx, s, k, "req", func(context.Context) (int, error) {
		t.Error("fn ran although a result is recorded")
		return 1, nil
	}, nil)
	var de *idem.DecodeError
	if !errors.Is(err, idem.ErrIncompatibleState) || !errors.As(err, &de) || de.What != "result" {
		t.Errorf("Do with a recorded result that no longer decodes = %v, want a *DecodeError for the result", err)
	}
}
