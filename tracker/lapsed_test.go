package tracker

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestReleaseOwnedOfALapsedReservation: ReleaseOwned answers the owner of
// a lapsed reservation the same whether or not the sweeper has deleted it
// yet, false, as it answers for any key that is free; the key is free
// either way, and its next Reserve wins. The answer does not depend on
// when the sweeper last ran.
func TestReleaseOwnedOfALapsedReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{TTL: ttl, SweepInterval: time.Minute})
		tr.Start()
		defer tr.Stop()

		time.Sleep(30 * time.Second) // off the sweeps' minute ticks
		unswept, _ := tr.Acquire("s", "unswept")
		time.Sleep(ttl + 15*time.Second) // lapsed 15 s ago; the next sweep is 45 s away
		if n := tr.Len(); n != 1 {
			t.Fatalf("Len = %d, want the lapsed reservation still stored", n)
		}
		if tr.ReleaseOwned("s", "unswept", unswept) {
			t.Error("ReleaseOwned of a lapsed reservation not yet swept = true; want false, as once it is swept")
		}

		swept, _ := tr.Acquire("s", "swept")
		time.Sleep(ttl + time.Minute) // lapsed, and the sweeper deleted it
		synctest.Wait()
		if n := tr.Len(); n != 0 {
			t.Fatalf("Len = %d, want every lapsed reservation swept", n)
		}
		if tr.ReleaseOwned("s", "swept", swept) {
			t.Error("ReleaseOwned of a lapsed and swept reservation = true")
		}
		for _, k := range []string{"unswept", "swept"} {
			if tr.Seen("s", k) || !tr.Reserve("s", k) {
				t.Errorf("%s: the lapsed key is not free", k)
			}
		}
	})
}
