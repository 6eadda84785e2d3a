package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem"
)

// StoreLedgerOpts configure StoreLedger. A nil *StoreLedgerOpts means
// defaults.
type StoreLedgerOpts struct {
	// Retention is how long a key is remembered, counted from its claim
	// (and at least until its claim's last lease ends): choose it well
	// above the longest handler and the broker's redelivery horizon.
	// Defaults to the store's retention.
	Retention time.Duration
	// Lease is how long a claim holds its key before another consumer may
	// take it over (a crashed consumer's key becomes free again); it is
	// extended while the handler runs. Defaults to the store's lease.
	Lease time.Duration
}

// StoreLedger keeps keys in an idem.Store under namespace ns, so that every
// consumer process sharing the store sees every other's claims. A message
// key is taken exactly as it is (idem.NewKey: "abc" and `"abc"` are two
// messages) and must be a valid idem key value (1–255 bytes of UTF-8
// without control characters); use an idem.Minter to derive one from a
// longer natural key.
// Give the consumers a namespace of their own: a message whose key has a
// record written by another user of ns (idemhttp, idem.Do) fails, with an
// error wrapping idem.ErrMismatch, and is never taken for a duplicate.
// Consumers of one namespace share one key space: give each stream whose
// keys are unique only within it (partition-offset ids, say) a namespace
// of its own, or a message of one stream is taken for a duplicate of the
// other's.
//
// The ledger is a RetryAfterLedger: a message whose key another consumer
// holds is InProgress, and Handle's error is also an *idem.InFlightError
// whose RetryAfter is the rest of that consumer's lease, as the store
// reports it (see ErrInProgress).
//
// Marking a key done is a Commit. When it fails (other than with
// idem.ErrStaleToken), the key is released within the same settle bound,
// as idem.Do releases its key, rather than left in flight until its lease
// lapses. A Commit that failed may have been applied all the same (a lost
// reply); the store then rejects the release with idem.ErrStaleToken and
// the key stays done, so the release never undoes a done mark. A Commit
// that failed because the settle bound ran out leaves the key to its
// lease.
//
// A nil s (or a nil pointer of a store type, as a constructor returns with
// its error), an invalid ns (see idem.Namespace), or a negative Retention or
// Lease, makes a ledger that New refuses with a *ConfigError, and whose Claim
// returns that error.
func StoreLedger(s idem.Store, ns idem.Namespace, opts *StoreLedgerOpts) Ledger {
	l := &storeLedger{s: s, ns: ns, fp: idem.FingerprintBytes([]byte("idem/consumer/v1"))}
	if opts != nil {
		l.begin = &idem.BeginOpts{Retention: opts.Retention, Lease: opts.Lease}
	}
	switch {
	case s == nil:
		l.err = configErrorf("Config.Ledger", "is a StoreLedger without a store (a nil idem.Store)")
	case idem.IsNilStore(s):
		l.err = configErrorf("Config.Ledger", "is a StoreLedger on a nil %T (was its constructor's error ignored?)", s)
	case ns.Validate() != nil:
		l.err = configErrorf("Config.Ledger", "is a StoreLedger with an invalid namespace: %v", ns.Validate())
	case opts == nil:
	case opts.Retention < 0:
		l.err = configErrorf("StoreLedgerOpts.Retention", "must not be negative, got %v", opts.Retention)
	case opts.Lease < 0:
		l.err = configErrorf("StoreLedgerOpts.Lease", "must not be negative, got %v", opts.Lease)
	}
	return l
}

type storeLedger struct {
	s     idem.Store
	ns    idem.Namespace
	fp    idem.Fingerprint
	begin *idem.BeginOpts
	err   error // a *ConfigError for arguments StoreLedger cannot work with
}

func (l *storeLedger) configErr() error { return l.err }

func (l *storeLedger) Claim(ctx context.Context, key string) (Claim, State, error) {
	c, state, _, err := l.ClaimRetryAfter(ctx, key)
	return c, state, err
}

// ClaimRetryAfter returns, with Busy, the rest of the holder's lease, as
// the store reports it.
func (l *storeLedger) ClaimRetryAfter(ctx context.Context, key string) (Claim, State, time.Duration, error) {
	if l.err != nil {
		return nil, 0, 0, l.err
	}
	k, err := idem.NewKey(l.ns, key)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("consumer: message key %q: %w", truncate(key), err)
	}
	o, err := l.s.Begin(ctx, k, idem.Request{Fingerprint: l.fp}, l.begin)
	if err != nil {
		return nil, 0, 0, err
	}
	switch o.Kind {
	case idem.Fresh:
		// The heartbeats outlive ctx's cancellation, as the handler may, but
		// not the claim: settling cancels a heartbeat under way, so that a
		// store that has stopped answering holds the settle call only until
		// its own context ends.
		kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c := &storeClaim{s: l.s, key: k, lease: o.Lease}
		stop := idem.KeepAlive(kctx, l.s, k, o.Lease, 0, c.lose)
		c.stop = func() { cancel(); stop() }
		return c, Claimed, 0, nil
	case idem.InFlight:
		return nil, Busy, max(o.RetryAfter, 0), nil
	case idem.PriorResult:
		return nil, Done, 0, nil
	default:
		// Mismatch, or PriorError, which no consumer records: the key's
		// record was written by something else sharing the namespace (an
		// HTTP endpoint's idempotency keys, say). It says nothing of this
		// message, which must not be acknowledged as handled.
		return nil, 0, 0, fmt.Errorf("consumer: message key %q is recorded in namespace %q by something other than a consumer (%v): %w",
			truncate(key), l.ns, o.Kind, idem.ErrMismatch)
	}
}

// maxQuotedKey is how many bytes of a message key an error quotes.
const maxQuotedKey = 40

// truncate returns s cut to at most maxQuotedKey bytes, with "…" appended
// when it was cut, for quoting in an error. The cut is at a rune boundary:
// a multi-byte character cut in two would be quoted as bytes escaped one by
// one (\xc3), which reads as invalid UTF-8 that the key never held. Bytes
// that are invalid in s itself stay as they are, for %q to show.
func truncate(s string) string {
	if len(s) <= maxQuotedKey {
		return s
	}
	n := 0
	for i := range s { // i runs over rune starts, and over each invalid byte
		if i > maxQuotedKey {
			break
		}
		n = i
	}
	return s[:n] + "…"
}

type storeClaim struct {
	s     idem.Store
	key   idem.Key
	lease idem.Lease
	stop  func() // ends the heartbeats, cancelling one under way

	mu     sync.Mutex
	lost   bool                    // the lease was lost (see lose)
	cancel context.CancelCauseFunc // the handler's context, once watched
}

// watch has cancel called, with cause idem.ErrLeaseLost, when the claim's
// lease is lost: at once if it already is.
func (c *storeClaim) watch(cancel context.CancelCauseFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = cancel
	if c.lost {
		cancel(idem.ErrLeaseLost)
	}
}

// lose is called by the heartbeats when the lease is lost: taken over by
// another consumer, or lapsed while the store could not be reached.
func (c *storeClaim) lose() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost = true
	if c.cancel != nil {
		c.cancel(idem.ErrLeaseLost)
	}
}

// end stops the heartbeats. A Heartbeat of the store that panicked, which
// idem.KeepAlive's stop raises again as an *idem.PanicError, is returned
// as an error wrapping it and idem.ErrLeaseLost: the claim was counted as
// lost (see lose).
func (c *storeClaim) end() (err error) {
	defer func() {
		if p := recover(); p != nil {
			pe, ok := p.(*idem.PanicError)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("%w: %w", idem.ErrLeaseLost, pe)
		}
	}()
	c.stop()
	return nil
}

// Complete marks the key done (Commit), unless a Heartbeat of the store
// panicked while the handler ran: the store is broken and whether the
// claim is still held cannot be told, so the key is released instead, and
// the error carries the panic (*idem.PanicError).
//
// The Commit is made again while it fails with idem.ErrUnavailable (a
// connection dropped, a failover), within half of what is left of ctx
// (see idem.CommitRetrying):
// the handler's effect has happened, and a key released would let a
// redelivery run it again. A Commit that fails for good, other than with
// idem.ErrStaleToken (the key has another owner, or is settled), is
// followed by a release (FailTransient) within what is left of ctx, as
// idem.Do releases its key, so that the key is not left in flight until
// its lease lapses. That
// is safe even when the Commit was applied all the same (a lost reply, a
// context that ended while the store wrote): a store rejects the release
// of a settled reservation with idem.ErrStaleToken, changing nothing (see
// idem.Store; the conformance suite checks it), and the key stays done. A
// Commit that failed because ctx ended leaves no time for the release: the
// key then stays in flight until its lease lapses. The error is the
// Commit's, joined to the release's when the release failed otherwise than
// with idem.ErrStaleToken.
func (c *storeClaim) Complete(ctx context.Context) error {
	if err := c.end(); err != nil {
		return c.releaseAfter(ctx, err)
	}
	cctx := ctx
	if end, ok := ctx.Deadline(); ok {
		// Half of what is left for the Commit and its repeats, half for
		// the release.
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(end)/2))
		defer cancel()
	}
	err := idem.CommitRetrying(cctx, c.s, c.key, c.lease, []byte("true"))
	if err == nil || errors.Is(err, idem.ErrStaleToken) || ctx.Err() != nil {
		return err
	}
	if rerr := c.s.FailTransient(ctx, c.key, c.lease); rerr != nil && !errors.Is(rerr, idem.ErrStaleToken) {
		return errors.Join(err, fmt.Errorf("releasing the key: %w", rerr))
	}
	return err
}

// Release releases the key. When a Heartbeat of the store panicked while
// the handler ran, the error carries the panic (*idem.PanicError) even
// though the key was released.
func (c *storeClaim) Release(ctx context.Context) error {
	if err := c.end(); err != nil {
		return c.releaseAfter(ctx, err)
	}
	return c.s.FailTransient(ctx, c.key, c.lease)
}

// releaseAfter releases the key after a heartbeat's panic, err, and
// returns err, joined to the release's error if it failed.
func (c *storeClaim) releaseAfter(ctx context.Context, err error) error {
	if rerr := c.s.FailTransient(ctx, c.key, c.lease); rerr != nil {
		return errors.Join(err, fmt.Errorf("releasing the key: %w", rerr))
	}
	return fmt.Errorf("the claim's heartbeat panicked (the key is released): %w", err)
}
