package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestNoPoolIsInvalidArgument: the own methods of a Store made without a
// pool, and of the zero Store, fail without panicking, with an error
// satisfying errors.Is(err, idem.ErrInvalidArgument) and not
// ErrUnavailable: a programming error that retrying cannot mend, which the
// HTTP middleware must not answer as a store outage (503) on every
// request.
func TestNoPoolIsInvalidArgument(t *testing.T) {
	noPool, err := pgstore.New(nil, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k := mustKey(t, idemtest.RandomNamespace(t), "k")
	req := mustRequest(t, `{"a":1}`)
	for name, s := range map[string]*pgstore.Store{"New(nil)": noPool, "zero Store": new(pgstore.Store)} {
		t.Run(name, func(t *testing.T) {
			errs := callAll(ctxT(t), s, k, req)
			errs["Migrate"] = s.Migrate(ctxT(t))
			for call, err := range errs {
				if !errors.Is(err, idem.ErrInvalidArgument) || errors.Is(err, idem.ErrUnavailable) {
					t.Errorf("%s: %v, want idem.ErrInvalidArgument alone", call, err)
				}
			}
			if err := s.Drain(context.Background()); err != nil {
				t.Errorf("Drain: %v", err)
			}
		})
	}
}
