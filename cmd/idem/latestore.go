package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
)

// errNotReached is what the calls of a lateStore answer until its store is
// reached: a store error, which --fail-open passes through unprotected.
var errNotReached = fmt.Errorf("%w: not reached since the proxy started", idem.ErrUnavailable)

// lateStoreRetry bounds the wait between two attempts of a lateStore to
// reach its store: from the first, lateStoreFirstRetry, it doubles up to
// this.
const (
	lateStoreFirstRetry = 500 * time.Millisecond
	lateStoreRetry      = 10 * time.Second
)

// lateStore is the store of an idem proxy --fail-open started while its
// store could not be reached: every call answers errNotReached (and the
// proxy forwards the request unprotected) until a goroutine, trying again
// with back-off, has opened the store (and migrated it, or checked its
// table, as open does); from then on every call goes to that store.
type lateStore struct {
	st atomic.Pointer[openedStore] // nil until reached
}

// reachLater returns, for idem proxy --fail-open, the store open opens,
// which could not be reached at start-up (first, an unreachable error):
// a lateStore, trying to reach it in the background and logging on
// logger when it does (and why it does not, at most once a minute, or when
// the reason changes). Its close stops the attempts, waits for them to
// end, and closes the store if it was reached. name is the store as
// messages show it.
func reachLater(name string, first error, open func(context.Context) (*openedStore, error), logger *log.Logger) *openedStore {
	l := &lateStore{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.reach(ctx, name, first, open, logger)
	}()
	return &openedStore{
		Store: l,
		name:  name,
		ping: func(ctx context.Context) error {
			if st := l.st.Load(); st != nil {
				return st.ping(ctx)
			}
			return errNotReached
		},
		failed: func() {
			if st := l.st.Load(); st != nil && st.failed != nil {
				st.failed()
			}
		},
		close: func() {
			cancel()
			<-done
			if st := l.st.Load(); st != nil {
				st.close()
			}
		},
	}
}

// reach tries to open the store until it does or ctx ends.
func (l *lateStore) reach(ctx context.Context, name string, first error, open func(context.Context) (*openedStore, error), logger *log.Logger) {
	start, logged, last := time.Now(), time.Now(), first.Error()
	delay := lateStoreFirstRetry
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := open(ctx)
		if err == nil {
			l.st.Store(st)
			logger.Printf("store %s reached after %s: requests are protected from now on", name, time.Since(start).Round(time.Second))
			return
		}
		if ctx.Err() != nil {
			return
		}
		if err.Error() != last || time.Since(logged) >= time.Minute {
			logger.Printf("store still not reached after %s, requests forwarded unprotected (--fail-open): %v", time.Since(start).Round(time.Second), err)
			logged, last = time.Now(), err.Error()
		}
		delay = min(2*delay, lateStoreRetry)
		t.Reset(delay)
	}
}

// store is the store reached, or nil.
func (l *lateStore) store() (idem.Store, error) {
	if st := l.st.Load(); st != nil {
		return st.Store, nil
	}
	return nil, errNotReached
}

func (l *lateStore) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	s, err := l.store()
	if err != nil {
		return idem.Outcome{}, err
	}
	return s.Begin(ctx, key, req, opts)
}

func (l *lateStore) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	s, err := l.store()
	if err != nil {
		return err
	}
	return s.Commit(ctx, key, lease, result)
}

func (l *lateStore) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	s, err := l.store()
	if err != nil {
		return err
	}
	return s.FailPermanent(ctx, key, lease, e)
}

func (l *lateStore) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	s, err := l.store()
	if err != nil {
		return err
	}
	return s.FailTransient(ctx, key, lease)
}

func (l *lateStore) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	s, err := l.store()
	if err != nil {
		return idem.Lease{}, err
	}
	return s.Heartbeat(ctx, key, lease, extend)
}

func (l *lateStore) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	s, err := l.store()
	if err != nil {
		return 0, err
	}
	return s.PurgeExpired(ctx, ns, asOf)
}

func (l *lateStore) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	s, err := l.store()
	if err != nil {
		return idem.Record{}, err
	}
	return s.Get(ctx, key)
}
