package dedup_test

import (
	"errors"
	"fmt"

	"github.com/idemgo/idem/dedup"
)

func ExampleDerive() {
	var session [16]byte // all zero
	k := dedup.Derive(session, 42, []byte(`{"action":"put"}`))
	fmt.Println(k)
	// Output: 0c3ba128156645ab1c7760055e8ec900
}

func ExampleWindow() {
	w := dedup.NewWindow(2)
	a := dedup.Derive([16]byte{1}, 1, []byte("a"))
	b := dedup.Derive([16]byte{1}, 2, []byte("b"))
	c := dedup.Derive([16]byte{1}, 3, []byte("c"))

	fmt.Println(w.CheckAndRecord(a), w.CheckAndRecord(a)) // new, then remembered
	w.CheckAndRecord(b)
	w.CheckAndRecord(c) // the window is full: a is forgotten
	fmt.Println(w.CheckAndRecord(a), w.Len(), w.Cap())
	// Output:
	// true false
	// true 2 2
}

func ExampleSeqTracker() {
	s := dedup.NewSeqTracker()
	session := [16]byte{7}
	for _, seq := range []uint64{1, 2, 2, 1, 3} {
		fmt.Print(s.ShouldApply(session, seq), " ")
	}
	// Output: true true false false true
}

func ExampleFilter() {
	f := dedup.NewFilter(100_000)
	session := [16]byte{7}
	deliveries := []struct {
		seq uint64
		op  string
	}{{1, "put x"}, {2, "put y"}, {1, "put x"}, {3, "del x"}, {2, "put y"}}
	for _, d := range deliveries {
		if f.Accept(session, d.seq, []byte(d.op)) {
			fmt.Println("apply", d.seq, d.op)
		}
	}
	// Output:
	// apply 1 put x
	// apply 2 put y
	// apply 3 del x
}

// A capacity read from configuration goes through NewWindowChecked, which
// reports one out of range instead of panicking.
func ExampleNewWindowChecked() {
	for _, capacity := range []int{-1, 1000} {
		w, err := dedup.NewWindowChecked(capacity)
		var ce *dedup.CapacityError
		if errors.As(err, &ce) {
			fmt.Println("capacity out of range:", ce.Capacity)
			continue
		}
		fmt.Println(w.Cap())
	}
	// Output:
	// capacity out of range: -1
	// 1000
}

// The zero Window is ready to use: it remembers dedup.DefaultCapacity keys.
func ExampleWindow_zero() {
	var w dedup.Window
	k := dedup.Derive([16]byte{1}, 1, []byte("a"))
	fmt.Println(w.CheckAndRecord(k), w.CheckAndRecord(k), w.Cap())
	// Output: true false 100000
}

// A receiver that restarts keeps its sessions' high-water marks elsewhere
// (a database, a checkpoint) and restores them with Advance before taking
// deliveries, so that the sender's replay of what was already applied is
// dropped. The package keeps no list of sessions: the receiver records the
// marks of the sessions it knows, with HighWater.
func ExampleSeqTracker_Advance() {
	session := [16]byte{7}
	before := dedup.NewFilter(1000)
	for seq := uint64(1); seq <= 3; seq++ {
		before.Accept(session, seq, []byte("op"))
	}
	mark, _ := before.SeqTracker().HighWater(session) // saved at a checkpoint

	after := dedup.NewFilter(1000) // the restarted receiver
	after.SeqTracker().Advance(session, mark)
	for seq := uint64(2); seq <= 4; seq++ { // the sender replays from 2
		fmt.Println(seq, after.Accept(session, seq, []byte("op")))
	}
	// Output:
	// 2 false
	// 3 false
	// 4 true
}
