// This file is what the author of a store writes to run the conformance
// suite, in the store's own package: here the store under test is
// wrappedStore, a wrapper around memstore that stands in for a backend of
// your own, and conformance is the body of its test:
//
//	func TestConformance(t *testing.T) { conformance(t) }
package idemtest_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

// wrappedStore is the backend under test. A real one keeps its records in a
// database; this one hands every call of idem.Store to a memstore.Store,
// which its embedding provides.
type wrappedStore struct {
	*memstore.Store
}

// newWrappedStore makes a store whose clock is now and whose default
// retention and lease are the ones the suite requires.
func newWrappedStore(now func() time.Time) (*wrappedStore, error) {
	s, err := memstore.New(memstore.Config{
		Now:        now,
		Retention:  idemtest.Retention,
		Lease:      idemtest.Lease,
		MaxPayload: 1 << 16,
	})
	if err != nil {
		return nil, err
	}
	return &wrappedStore{s}, nil
}

// conformance runs the suite against wrappedStore. The subtests run in
// parallel, each with a store of its own from NewStore.
func conformance(t *testing.T) {
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			s, err := newWrappedStore(now)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		MaxPayload: 1 << 16, // as the stores were made: the limit cases run
	})
}

// A store's author runs the conformance suite from a test of the store's
// package: go test -race -run TestConformance ./yourstore.
func ExampleExercise() {
	_ = conformance // func TestConformance(t *testing.T) { conformance(t) }
}
