package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/tracker"
)

// TestUnmadeConsumerFails: a Consumer declared without New (or a nil one)
// fails every message with a *ConfigError instead of panicking on its
// missing functions; the handler is not run and nothing is claimed.
func TestUnmadeConsumerFails(t *testing.T) {
	var zero consumer.Consumer[msg]
	var nilConsumer *consumer.Consumer[msg]
	for name, c := range map[string]*consumer.Consumer[msg]{"zero": &zero, "nil": nilConsumer} {
		o, err := c.Handle(context.Background(), msg{ID: "m"})
		var ce *consumer.ConfigError
		if o != consumer.Failed || o.Ack() || !errors.As(err, &ce) {
			t.Errorf("%s Consumer: Handle = %s, %v; want Failed and a *ConfigError", name, o, err)
		}
	}
}

// TestStoreLedgerBadArguments: a StoreLedger without a store, or with a
// negative lease or retention, is refused by New with a *ConfigError, and
// its Claim, used directly, returns the same error instead of panicking or
// failing every message with the store's complaint.
func TestStoreLedgerBadArguments(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	ns := idem.MustNamespace("orders")
	for _, tc := range []struct {
		name   string
		ledger consumer.Ledger
		field  string
		text   string
	}{
		{"nil store", consumer.StoreLedger(nil, ns, nil), "Config.Ledger",
			"consumer: Config.Ledger is a StoreLedger without a store (a nil idem.Store)"},
		{"nil store with options", consumer.StoreLedger(nil, ns, &consumer.StoreLedgerOpts{Lease: time.Minute}), "Config.Ledger",
			"consumer: Config.Ledger is a StoreLedger without a store (a nil idem.Store)"},
		{"negative retention", consumer.StoreLedger(s, ns, &consumer.StoreLedgerOpts{Retention: -time.Hour}), "StoreLedgerOpts.Retention",
			"consumer: StoreLedgerOpts.Retention must not be negative, got -1h0m0s"},
		{"negative lease", consumer.StoreLedger(s, ns, &consumer.StoreLedgerOpts{Lease: -time.Second}), "StoreLedgerOpts.Lease",
			"consumer: StoreLedgerOpts.Lease must not be negative, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				var ce *consumer.ConfigError
				if !errors.As(err, &ce) || ce.Field != tc.field || err.Error() != tc.text {
					t.Errorf("%s: %v; want a *ConfigError %q", what, err, tc.text)
				}
			}
			err := newWithLedger(tc.ledger)
			check("New", err)
			claim, _, err := tc.ledger.Claim(context.Background(), "m")
			if claim != nil {
				t.Error("Claim returned a Claim")
			}
			check("Claim", err)
		})
	}
}

// claimlessLedger breaks Ledger's contract: it answers Claimed without a
// Claim.
type claimlessLedger struct{}

func (claimlessLedger) Claim(context.Context, string) (consumer.Claim, consumer.State, error) {
	return nil, consumer.Claimed, nil
}

// TestLedgerClaimedWithoutClaim: a Ledger of the caller's that answers
// Claimed without a Claim fails the message without running the handler,
// instead of panicking when the key is to be settled.
func TestLedgerClaimedWithoutClaim(t *testing.T) {
	ran := false
	c, err := consumer.New(consumer.Config[msg]{
		Ledger: claimlessLedger{},
		Key:    func(m msg) (string, error) { return m.ID, nil },
		Handle: func(context.Context, msg) error { ran = true; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Handle(context.Background(), msg{ID: "m"})
	if o != consumer.Failed || err == nil || ran {
		t.Errorf("Handle = %s, %v, handler ran %v; want Failed with an error, handler not run", o, err, ran)
	}
}

// TestStoreLedgerInvalidNamespace: a StoreLedger whose namespace is not a
// valid idem.Namespace (the zero one, upper case) is refused by New with a
// *ConfigError naming the ledger, and its Claim returns it, instead of New
// accepting it and every message failing with an error that blames the
// message's key.
func TestStoreLedgerInvalidNamespace(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, ns := range []idem.Namespace{"", "Orders"} {
		l := consumer.StoreLedger(s, ns, nil)
		err := newWithLedger(l)
		var ce *consumer.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Config.Ledger" || !strings.Contains(ce.Problem, "invalid namespace") {
			t.Errorf("namespace %q: New = %v; want a *ConfigError on Config.Ledger saying the namespace is invalid", ns, err)
		}
		claim, _, err := l.Claim(context.Background(), "m")
		if claim != nil || !errors.As(err, &ce) {
			t.Errorf("namespace %q: Claim = %v, %v; want the *ConfigError", ns, claim, err)
		}
	}
}

// A StoreLedger on a nil pointer of a store type (a constructor's result
// kept although it failed) is refused as a nil store is, instead of
// panicking on the first message.
func TestStoreLedgerNilPointerStore(t *testing.T) {
	var failed *memstore.Store
	l := consumer.StoreLedger(failed, "orders", nil)
	err := newWithLedger(l)
	var ce *consumer.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Ledger" {
		t.Errorf("New = %v; want a *ConfigError on Config.Ledger", err)
	}
}

// TestEmptyKeyFails: a message whose Key is empty (an event without an id)
// fails without running the handler on every ledger, with an error
// satisfying idem.ErrInvalidKey. On a tracker the empty key was claimed and
// completed like any other, so every later message without an id was
// acknowledged as a Duplicate of the first and never handled.
func TestEmptyKeyFails(t *testing.T) {
	for name, mk := range ledgers(t) {
		if name == "postgres" {
			continue // the same StoreLedger as "store"
		}
		t.Run(name, func(t *testing.T) {
			c, runs := countingConsumer(t, mk())
			for i := range 2 {
				o, err := c.Handle(context.Background(), msg{ID: ""})
				if o != consumer.Failed || o.Ack() || !errors.Is(err, idem.ErrInvalidKey) {
					t.Errorf("delivery %d: Handle = %s, %v; want Failed with idem.ErrInvalidKey", i+1, o, err)
				}
			}
			if *runs != 0 {
				t.Errorf("handler ran %d times for messages without a key", *runs)
			}
		})
	}
}

// A TrackerLedger on a nil *tracker.Tracker (tracker.NewChecked's result
// kept although it failed) is refused by New with a *ConfigError, and its
// Claim returns that error, instead of failing open for ever: a nil
// Tracker can never be started, so every duplicate would run its handler.
func TestTrackerLedgerNilTracker(t *testing.T) {
	failed, _ := tracker.NewChecked(tracker.Config{TTL: -time.Second})
	l := consumer.TrackerLedger(failed, "orders")
	err := newWithLedger(l)
	var ce *consumer.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Ledger" {
		t.Errorf("New = %v; want a *ConfigError on Config.Ledger", err)
	}
	claim, _, err := l.Claim(context.Background(), "m")
	if claim != nil || !errors.As(err, &ce) {
		t.Errorf("Claim = %v, %v; want the *ConfigError", claim, err)
	}
}

// TestCancelledContextFails: Handle with a context already cancelled fails
// (not acknowledged, so the message comes again) without claiming the key
// or running the handler, on every ledger alike; a TrackerLedger, which
// makes no call that could fail, ran the handler.
func TestCancelledContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, mk := range ledgers(t) {
		if name == "postgres" {
			continue // the same StoreLedger as "store"
		}
		t.Run(name, func(t *testing.T) {
			c, runs := countingConsumer(t, mk())
			o, err := c.Handle(ctx, msg{ID: "m-1"})
			if o != consumer.Failed || o.Ack() || !errors.Is(err, context.Canceled) || *runs != 0 {
				t.Fatalf("Handle with a cancelled context = %s, %v, %d runs; want Failed with context.Canceled, none", o, err, *runs)
			}
			// The key was not claimed: the redelivery runs.
			if o, err := c.Handle(context.Background(), msg{ID: "m-1"}); o != consumer.Handled || err != nil || *runs != 1 {
				t.Errorf("redelivery = %s, %v, %d runs; want Handled, one run", o, err, *runs)
			}
		})
	}
}

// countingConsumer returns a Consumer on l whose handler counts its runs
// in *runs.
func countingConsumer(t *testing.T, l consumer.Ledger) (c *consumer.Consumer[msg], runs *int) {
	t.Helper()
	runs = new(int)
	c, err := consumer.New(consumer.Config[msg]{
		Ledger: l,
		Key:    func(m msg) (string, error) { return m.ID, nil },
		Handle: func(context.Context, msg) error { *runs++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, runs
}

// newWithLedger returns the error of New for a Consumer on l.
func newWithLedger(l consumer.Ledger) error {
	_, err := consumer.New(consumer.Config[msg]{
		Ledger: l,
		Key:    func(m msg) (string, error) { return m.ID, nil },
		Handle: func(context.Context, msg) error { return nil },
	})
	return err
}
