package dedup_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/idemgo/idem/dedup"
)

// TestCheckSaysWhy: Check tells a new operation (Apply) from one at or
// below its session's mark (BelowMark: a redelivery, or a sender that
// numbered again from 1) and one the window remembers under a higher seq
// (Seen: replayed after the mark was forgotten).
func TestCheckSaysWhy(t *testing.T) {
	f := dedup.NewFilter(16)
	s := [16]byte{1}
	steps := []struct {
		seq  uint64
		op   string
		want dedup.Verdict
	}{
		{1, "a", dedup.Apply},
		{2, "b", dedup.Apply},
		{2, "b", dedup.BelowMark}, // redelivered
		{1, "a", dedup.BelowMark}, // late
		{1, "z", dedup.BelowMark}, // numbering restarted
		{3, "c", dedup.Apply},
	}
	for _, st := range steps {
		if got := f.Check(s, st.seq, []byte(st.op)); got != st.want {
			t.Errorf("Check(seq %d, %q) = %v, want %v", st.seq, st.op, got, st.want)
		}
	}
	f.SeqTracker().Forget(s)
	if got := f.Check(s, 3, []byte("c")); got != dedup.Seen {
		t.Errorf("Check of an operation replayed after its mark was forgotten = %v, want %v", got, dedup.Seen)
	}
	for v, name := range map[dedup.Verdict]string{dedup.Apply: "apply", dedup.BelowMark: "below-mark", dedup.Seen: "seen", 0: "Verdict(0)"} {
		if v.String() != name {
			t.Errorf("Verdict %d prints %q, want %q", int(v), v.String(), name)
		}
	}
}

// TestAcceptIsCheckApply: on any sequence of operations, two filters fed
// the same give Accept true exactly where Check says Apply.
func TestAcceptIsCheckApply(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, c := dedup.NewFilter(4), dedup.NewFilter(4)
		for i := range rapid.IntRange(1, 60).Draw(t, "n") {
			s := [16]byte{byte(rapid.IntRange(0, 2).Draw(t, "session"))}
			seq := uint64(rapid.IntRange(0, 8).Draw(t, "seq"))
			op := []byte{byte(rapid.IntRange(0, 5).Draw(t, "op"))}
			if rapid.IntRange(0, 9).Draw(t, "forget") == 0 {
				a.SeqTracker().Forget(s)
				c.SeqTracker().Forget(s)
			}
			if got, v := a.Accept(s, seq, op), c.Check(s, seq, op); got != (v == dedup.Apply) {
				t.Fatalf("step %d: Accept %v, Check %v", i, got, v)
			}
		}
	})
}
