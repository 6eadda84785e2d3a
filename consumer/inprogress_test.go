package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/consumer"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/tracker"
)

// holdKey has b's handler run for a delivery of id and stay in it until
// the returned function is called; it returns once the handler runs.
func holdKey(t *testing.T, b *bundle, id string) (finish func()) {
	t.Helper()
	b.hold = make(chan struct{})
	b.started = make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if o, err := b.c.Handle(context.Background(), msg{ID: id}); o != consumer.Handled {
			t.Errorf("the holding delivery: %s, %v", o, err)
		}
	}()
	<-b.started
	return func() { close(b.hold); <-done }
}

// TestInProgressCarriesRetryAfter: a delivery whose key another delivery
// is handling is InProgress with an error that is ErrInProgress and an
// *idem.InFlightError whose RetryAfter is what is left of the other
// delivery's lease (StoreLedger) or reservation (TrackerLedger), for a
// broker to delay the redelivery by.
func TestInProgressCarriesRetryAfter(t *testing.T) {
	for name, newLedger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t, newLedger())
			finish := holdKey(t, b, "k1")
			defer finish()
			o, err := b.c.Handle(context.Background(), msg{ID: "k1"})
			if o != consumer.InProgress || !errors.Is(err, consumer.ErrInProgress) {
				t.Fatalf("Handle = %s, %v; want in_progress, ErrInProgress", o, err)
			}
			var ife *idem.InFlightError
			if !errors.As(err, &ife) || ife.RetryAfter <= 0 {
				t.Errorf("Handle's error %v: want an *idem.InFlightError with a positive RetryAfter", err)
			}
		})
	}
}

// TestStoreLedgerRetryAfterIsTheRestOfTheLease: the RetryAfter is the time
// left of the holder's lease, not the lease's length.
func TestStoreLedgerRetryAfterIsTheRestOfTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 30 * time.Second
		s, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ledger := consumer.StoreLedger(s, idem.MustNamespace("orders"), &consumer.StoreLedgerOpts{Lease: lease})
		b := setup(t, ledger)
		finish := holdKey(t, b, "k1")
		defer finish()
		time.Sleep(time.Second) // less than the heartbeats' interval
		o, err := b.c.Handle(context.Background(), msg{ID: "k1"})
		var ife *idem.InFlightError
		if o != consumer.InProgress || !errors.Is(err, consumer.ErrInProgress) || !errors.As(err, &ife) {
			t.Fatalf("Handle = %s, %v; want in_progress, ErrInProgress and an *idem.InFlightError", o, err)
		}
		if want := lease - time.Second; ife.RetryAfter != want {
			t.Errorf("RetryAfter = %v, want %v", ife.RetryAfter, want)
		}
		// Claim, for a caller that is not Handle (a ledger wrapping this
		// one), still answers Busy without an error.
		if c, state, err := ledger.Claim(context.Background(), "k1"); c != nil || state != consumer.Busy || err != nil {
			t.Errorf("Claim = %v, %v, %v; want nil, Busy, nil", c, state, err)
		}
	})
}

// TestTrackerLedgerRetryAfterIsTheRestOfTheTTL: with a TrackerLedger, the
// RetryAfter is the time left of the holder's reservation, which lapses a
// TTL after it was taken; Claim still answers Busy without an error, and a
// key handled before is a Duplicate, not InProgress.
func TestTrackerLedgerRetryAfterIsTheRestOfTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		tr := tracker.New(tracker.Config{TTL: ttl})
		tr.Start()
		defer tr.Stop()
		ledger := consumer.TrackerLedger(tr, "orders")
		b := setup(t, ledger)
		finish := sync.OnceFunc(holdKey(t, b, "k1"))
		defer finish()
		time.Sleep(time.Minute)
		o, err := b.c.Handle(context.Background(), msg{ID: "k1"})
		var ife *idem.InFlightError
		if o != consumer.InProgress || !errors.Is(err, consumer.ErrInProgress) || !errors.As(err, &ife) {
			t.Fatalf("Handle = %s, %v; want in_progress, ErrInProgress and an *idem.InFlightError", o, err)
		}
		if want := ttl - time.Minute; ife.RetryAfter != want {
			t.Errorf("RetryAfter = %v, want %v", ife.RetryAfter, want)
		}
		if c, state, err := ledger.Claim(context.Background(), "k1"); c != nil || state != consumer.Busy || err != nil {
			t.Errorf("Claim = %v, %v, %v; want nil, Busy, nil", c, state, err)
		}
		finish()
		if o, err := b.c.Handle(context.Background(), msg{ID: "k1"}); o != consumer.Duplicate || err != nil {
			t.Errorf("after the holder completed: Handle = %s, %v; want duplicate, nil", o, err)
		}
	})
}

// busyLedger answers Busy, with err: a Ledger written without a RetryAfter.
type busyLedger struct{ err error }

func (l busyLedger) Claim(context.Context, string) (consumer.Claim, consumer.State, error) {
	return nil, consumer.Busy, l.err
}

// busyForLedger is a RetryAfterLedger answering Busy for retryAfter.
type busyForLedger struct {
	busyLedger
	retryAfter time.Duration
}

func (l busyForLedger) ClaimRetryAfter(context.Context, string) (consumer.Claim, consumer.State, time.Duration, error) {
	return nil, consumer.Busy, l.retryAfter, l.err
}

// TestUserLedgerBusy: a Ledger that is not a RetryAfterLedger, as every one
// written before RetryAfterLedger, still gives ErrInProgress itself, without
// an *idem.InFlightError, and so does a RetryAfterLedger that cannot tell
// (0); one that tells has its duration carried by Handle's error. An error
// with Busy fails the message, as every error of Claim does.
func TestUserLedgerBusy(t *testing.T) {
	other := errors.New("ledger unreachable")
	for _, tc := range []struct {
		name       string
		ledger     consumer.Ledger
		outcome    consumer.Outcome
		retryAfter time.Duration // 0: no *idem.InFlightError
	}{
		{"a Ledger", busyLedger{}, consumer.InProgress, 0},
		{"a RetryAfterLedger that cannot tell", busyForLedger{}, consumer.InProgress, 0},
		{"a RetryAfterLedger", busyForLedger{retryAfter: 5 * time.Second}, consumer.InProgress, 5 * time.Second},
		{"a Ledger failing", busyLedger{err: other}, consumer.Failed, 0},
		{"a RetryAfterLedger failing", busyForLedger{busyLedger{err: other}, time.Second}, consumer.Failed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			c, err := consumer.New(consumer.Config[msg]{
				Ledger: tc.ledger,
				Key:    func(m msg) (string, error) { return m.ID, nil },
				Handle: func(context.Context, msg) error { runs++; return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			o, err := c.Handle(context.Background(), msg{ID: "k1"})
			if o != tc.outcome || runs != 0 {
				t.Fatalf("Handle = %s, %v, %d runs; want %s, no run", o, err, runs, tc.outcome)
			}
			if o == consumer.Failed {
				if err != other {
					t.Errorf("Handle's error = %v, want the ledger's", err)
				}
				return
			}
			if !errors.Is(err, consumer.ErrInProgress) {
				t.Errorf("Handle's error = %v, want ErrInProgress", err)
			}
			var ife *idem.InFlightError
			switch {
			case tc.retryAfter == 0 && err != consumer.ErrInProgress:
				t.Errorf("Handle's error = %#v, want ErrInProgress itself", err)
			case tc.retryAfter != 0 && (!errors.As(err, &ife) || ife.RetryAfter != tc.retryAfter):
				t.Errorf("Handle's error %v: want an *idem.InFlightError with RetryAfter %v", err, tc.retryAfter)
			}
		})
	}
}
