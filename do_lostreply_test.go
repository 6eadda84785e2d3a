package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
)

// lostReplyCommit is a store whose Commit writes, then fails as when the
// reply is lost on the way back.
type lostReplyCommit struct{ idem.Store }

func (s lostReplyCommit) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := s.Store.Commit(ctx, key, lease, result); err != nil {
		return err
	}
	return idem.Unavailable(errors.New("connection reset"))
}

// TestDoReleaseAfterAppliedCommitKeepsResult: Do releases the key after a
// Commit that failed, and that release cannot undo a Commit that was
// applied all the same (a lost reply): the store rejects it with
// ErrStaleToken, the result stays recorded, and the next Do replays it
// without running fn.
func TestDoReleaseAfterAppliedCommitKeepsResult(t *testing.T) {
	mem := newMem(t, nil)
	k := testKey(t, "lost-reply")
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 42, nil }
	res, err := idem.Do(context.Background(), lostReplyCommit{mem}, k, "req", fn, nil)
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
