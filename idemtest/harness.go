package idemtest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// Suite-wide settings the backend under test must be created with.
const (
	// Retention is the retention the store must use by default.
	Retention = time.Hour
	// Lease is the lease duration the store must use by default.
	Lease = 10 * time.Second
)

// Harness tells the suite how to make stores of the backend under test.
type Harness struct {
	// NewStore returns a store in lease mode whose clock is now, whose
	// default retention is Retention and default lease is Lease. It may
	// share its database with other stores. Required.
	NewStore func(t *testing.T, now func() time.Time) idem.Store

	// NewTx, when set, enables the transactional-mode tests (S6): it
	// returns a store bound to a new database transaction (clock now,
	// defaults as for NewStore), and functions that commit and roll back
	// that transaction. Stores from NewTx and NewStore see the same
	// database.
	NewTx func(t *testing.T, now func() time.Time) (s idem.Store, commit, rollback func() error)

	// MaxPayload, when positive, is the payload limit the stores were
	// created with; the suite then checks that larger payloads are
	// rejected.
	MaxPayload int

	// SingleWriter says the backend's database admits one write
	// transaction at a time (SQLite): a second transaction's Begin waits
	// for the first transaction to end, then answers from what it left,
	// instead of answering InFlight at once. The suite then skips the
	// at-once check of S6; the rollback and commit cases still run.
	SingleWriter bool

	// NewUnreachableStore, when set, enables the outage case: it returns a
	// store (defaults as for NewStore) whose database cannot be reached,
	// say a client of a closed loopback port. Every call must then fail
	// within seconds with an error satisfying errors.Is(err,
	// idem.ErrUnavailable), without panicking, while invalid arguments
	// are still reported as such (they are rejected before anything is
	// sent).
	NewUnreachableStore func(t *testing.T) idem.Store
}

// Exercise runs the conformance suite against the backend h describes.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("idemtest: Harness.NewStore is required")
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newBundle(t, h))
		})
	}
	if h.NewUnreachableStore != nil {
		t.Run("Unavailable/EveryCallFailsTyped", func(t *testing.T) {
			t.Parallel()
			testUnreachable(t, h.NewUnreachableStore(t))
		})
	}
	if h.NewTx != nil {
		for _, c := range txCases() {
			t.Run("Tx/"+c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newBundle(t, h))
			})
		}
	}
}

// bundle is what each subtest gets: a fresh clock, a store, and a random
// namespace.
type bundle struct {
	h     Harness
	clock *Clock
	store idem.Store
	ns    idem.Namespace
}

func newBundle(t *testing.T, h Harness) *bundle {
	c := NewClock()
	return &bundle{h: h, clock: c, store: h.NewStore(t, c.Now), ns: RandomNamespace(t)}
}

// RandomNamespace returns a new namespace "idemtest_<random hex>".
func RandomNamespace(t testing.TB) idem.Namespace {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ns, err := idem.NewNamespace("idemtest_" + hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// key returns a key of the bundle's namespace (or of ns when given).
func (b *bundle) key(t *testing.T, value string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(b.ns, value)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type testCase struct {
	name string
	run  func(t *testing.T, b *bundle)
}
