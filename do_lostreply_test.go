package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// lostReplyCommit is a store whose Commit writes, then fails as when the
// reply is lost on the way back, every time.
type lostReplyCommit struct{ idem.Store }

func (s lostReplyCommit) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	_ = s.Store.Commit(ctx, key, lease, result)
	return idem.Unavailable(errors.New("connection reset"))
}

// TestDoReleaseAfterAppliedCommitKeepsResult: Do releases the key after a
// Commit that kept failing until its settle time ran out, and that release
// cannot undo a Commit that was applied all the same (a lost reply): the
// store rejects it with ErrStaleToken, the result stays recorded, and the
// next Do replays it without running fn.
func TestDoReleaseAfterAppliedCommitKeepsResult(t *testing.T) {
	mem := newMem(t, nil)
	k := testKey(t, "lost-reply")
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 42, nil }
	res, err := idem.Do(context.Background(), lostReplyCommit{mem}, k, "req", fn, &idem.DoOpts{SettleTimeout: 100 * time.Millisecond})
	if res != 42 || !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Do = %d, %v; want 42 and the Commit's error", res, err)
	}
	if rec, err := mem.Get(context.Background(), k); err != nil || rec.Status != idem.StatusCommitted {
		t.Fatalf("record after the lost reply = %+v, %v; want committed", rec, err)
	}
	res, err = idem.Do(context.Background(), mem, k, "req", fn, nil)
	if res != 42 || err != nil || runs != 1 {
		t.Errorf("second Do = %d, %v after %d runs; want the replayed 42, nil, fn run once", res, err, runs)
	}
}

// failingFirst is a store whose Commit and FailPermanent fail as a
// dropped connection does, the first n calls of each, and then, applied
// or not as applied says, pass to the store; its releases are counted.
type failingFirst struct {
	idem.Store
	n        int
	applied  bool
	calls    int
	releases int
}

func (s *failingFirst) fail(call func() error) error {
	s.calls++
	if s.calls > s.n {
		return call()
	}
	if s.applied {
		_ = call()
	}
	return idem.Unavailable(errors.New("connection reset by peer"))
}

func (s *failingFirst) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	return s.fail(func() error { return s.Store.Commit(ctx, key, lease, result) })
}

func (s *failingFirst) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	return s.fail(func() error { return s.Store.FailPermanent(ctx, key, lease, e) })
}

func (s *failingFirst) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	s.releases++
	return s.Store.FailTransient(ctx, key, lease)
}

// TestOutcomeRecordedAfterTheStoreFailedOnce: after fn has run, a Commit
// or FailPermanent that fails with ErrUnavailable (a connection dropped,
// a failover) is made again under the same lease until it records the
// outcome, rather than the key being released for a retry to run fn
// again; a repeat of a call that was applied, its reply lost, which the
// store answers with ErrStaleToken, counts as recorded when the record
// holds the outcome. Do returns no store error then, and Owner.Run
// reports the result recorded.
func TestOutcomeRecordedAfterTheStoreFailedOnce(t *testing.T) {
	declined := idem.Permanent("card.declined", errors.New("card declined"))
	for _, applied := range []bool{false, true} {
		for _, c := range []struct {
			name  string
			fnErr error
			want  idem.Status
		}{{"commit", nil, idem.StatusCommitted}, {"fail permanent", declined, idem.StatusFailed}} {
			t.Run(fmt.Sprintf("%s/applied=%v", c.name, applied), func(t *testing.T) {
				mem := newMem(t, nil)
				s := &failingFirst{Store: mem, n: 3, applied: applied}
				k := testKey(t, "dropped")
				runs := 0
				fn := func(context.Context) (int, error) { runs++; return 42, c.fnErr }
				_, err := idem.Do(context.Background(), s, k, "req", fn, nil)
				if !errors.Is(err, c.fnErr) || errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrNotRecorded) {
					t.Errorf("Do: %v; want fn's error alone (%v)", err, c.fnErr)
				}
				rec, gerr := mem.Get(context.Background(), k)
				if gerr != nil || rec.Status != c.want || s.releases != 0 || s.calls != 4 {
					t.Fatalf("record %+v, %v after %d calls, %d releases; want %s, 4 calls, no release", rec, gerr, s.calls, s.releases, c.want)
				}
				_, err = idem.Do(context.Background(), mem, k, "req", fn, nil)
				if runs != 1 || (err != nil) != (c.fnErr != nil) {
					t.Errorf("second Do: %v after %d runs; want the replay, fn run once", err, runs)
				}
			})
		}
		t.Run(fmt.Sprintf("owner/applied=%v", applied), func(t *testing.T) {
			mem := newMem(t, nil)
			s := &failingFirst{Store: mem, n: 3, applied: applied}
			k := testKey(t, "owner-dropped")
			o, err := mem.Begin(context.Background(), k, idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}, nil)
			if err != nil || o.Kind != idem.Fresh {
				t.Fatal(o, err)
			}
			told := 0
			owner := idem.Owner{Store: s, Key: k, Lease: o.Lease, OnCommitRetry: func() { told++ }}
			owner.Run(context.Background(), func(context.Context) ([]byte, bool) { return []byte(`{"ok":true}`), true })
			rec, gerr := mem.Get(context.Background(), k)
			if owner.Err != nil || !owner.Recorded || gerr != nil || rec.Status != idem.StatusCommitted || s.releases != 0 || told != 1 {
				t.Errorf("Owner.Run: Err %v, Recorded %v; record %+v, %v; %d releases, OnCommitRetry called %d times; want recorded, no release, called once", owner.Err, owner.Recorded, rec, gerr, s.releases, told)
			}
			// A Commit that succeeds at once is not retried.
			k2 := testKey(t, "owner-healthy")
			o2, err := mem.Begin(context.Background(), k2, idem.Request{Fingerprint: idem.FingerprintBytes([]byte("r"))}, nil)
			if err != nil || o2.Kind != idem.Fresh {
				t.Fatal(o2, err)
			}
			healthy := idem.Owner{Store: mem, Key: k2, Lease: o2.Lease, OnCommitRetry: func() { told++ }}
			healthy.Run(context.Background(), func(context.Context) ([]byte, bool) { return []byte(`{"ok":true}`), true })
			if !healthy.Recorded || told != 1 {
				t.Errorf("healthy Owner.Run: Recorded %v, OnCommitRetry called %d times in all; want recorded, not called", healthy.Recorded, told)
			}
		})
	}
}

// TestFailureRecordedAfterALostReplyAsTheStoreKeepsIt: a FailPermanent
// applied with its reply lost, whose error the store keeps changed (invalid
// UTF-8 replaced, as every store that keeps JSON does), and whose repeat
// the store answers ErrStaleToken, counts as recorded: the record is failed
// under the lease's fence with the error as the store keeps it.
func TestFailureRecordedAfterALostReplyAsTheStoreKeepsIt(t *testing.T) {
	mem := newMem(t, nil)
	s := &failingFirst{Store: mem, n: 1, applied: true}
	k := testKey(t, "lost-reply-utf8")
	declined := idem.Permanent("card.declined", errors.New("card declined: \xff"))
	_, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) { return 0, declined }, nil)
	if !errors.Is(err, declined) || errors.Is(err, idem.ErrNotRecorded) {
		t.Errorf("Do: %v; want fn's error alone", err)
	}
	if rec, gerr := mem.Get(context.Background(), k); gerr != nil || rec.Status != idem.StatusFailed || s.releases != 0 {
		t.Errorf("record %+v, %v, %d releases; want failed, no release", rec, gerr, s.releases)
	}
}
