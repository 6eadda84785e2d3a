package tracker

import "testing"

// TestTokensAreUniqueAcrossTrackers: a Token proves ownership only in the
// Tracker that minted it. Two one-shard trackers mint their first tokens
// from equal counts; tracker B still answers tracker A's token as it
// answers a stale one (false, changing nothing), whether B's key is held,
// free or completed, so a caller that mixes trackers up cannot complete or
// free a reservation it does not own.
func TestTokensAreUniqueAcrossTrackers(t *testing.T) {
	t.Parallel()
	a, b := started(t, Config{Shards: 1}), started(t, Config{Shards: 1})
	tokA, okA := a.Acquire("s", "k")
	tokB, okB := b.Acquire("s", "k")
	if !okA || !okB {
		t.Fatal("Acquire of a free key failed")
	}
	if tokA == tokB {
		t.Errorf("two trackers handed out the same token %v", tokA)
	}
	b.Complete("s", "done")
	for _, key := range []string{"k", "free", "done"} {
		if b.ReserveOwned("s", key, tokA) {
			t.Errorf("%s: B.ReserveOwned with A's token = true", key)
		}
		if b.CompleteOwned("s", key, tokA) {
			t.Errorf("%s: B.CompleteOwned with A's token = true", key)
		}
		if b.ReleaseOwned("s", key, tokA) {
			t.Errorf("%s: B.ReleaseOwned with A's token = true", key)
		}
	}
	if b.Seen("s", "free") || b.Completed("s", "k") || !b.Completed("s", "done") {
		t.Error("A's token changed B's keys")
	}
	if !b.CompleteOwned("s", "k", tokB) || !a.ReleaseOwned("s", "k", tokA) {
		t.Error("each tracker's own token no longer works")
	}
}
