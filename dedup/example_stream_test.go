package dedup_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/idemgo/idem/dedup"
)

// op is one delivery of a replication stream.
type op struct {
	session string // the sender's session, a connection's id
	seq     uint64 // numbered from 1 per session
	body    string
}

// sessionID turns a session's name into the 16 bytes dedup takes.
func sessionID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	return [16]byte(sum[:16])
}

// A receiver applies two senders' operations. Sender a reconnects after
// applying 2 and resends from 1; sender b's operations interleave with
// a's. Every operation is applied once.
func Example() {
	f := dedup.NewFilter(100_000)
	deliveries := []op{
		{"a", 1, "set x=1"}, {"b", 1, "set y=1"}, {"a", 2, "set x=2"},
		{"a", 1, "set x=1"}, {"a", 2, "set x=2"}, // a's resend after its reconnect
		{"b", 2, "set y=2"}, {"a", 3, "del x"},
	}
	for _, d := range deliveries {
		if !f.Accept(sessionID(d.session), d.seq, []byte(d.body)) {
			fmt.Printf("drop  %s/%d\n", d.session, d.seq)
			continue
		}
		fmt.Printf("apply %s/%d %s\n", d.session, d.seq, d.body)
	}
	// Output:
	// apply a/1 set x=1
	// apply b/1 set y=1
	// apply a/2 set x=2
	// drop  a/1
	// drop  a/2
	// apply b/2 set y=2
	// apply a/3 del x
}

// A Filter needs each session's operations in order: one that arrives after
// a higher seqno of its session is dropped, even though it was never
// applied. HighWater lets a receiver notice the gap before it accepts.
func ExampleFilter_outOfOrder() {
	f := dedup.NewFilter(1000)
	s := sessionID("a")
	for _, seq := range []uint64{1, 3, 2} {
		if hw, ok := f.SeqTracker().HighWater(s); ok && seq > hw+1 {
			fmt.Printf("gap: %d after %d\n", seq, hw)
		}
		fmt.Println(seq, f.Accept(s, seq, []byte("op")))
	}
	// Output:
	// 1 true
	// gap: 3 after 1
	// 3 true
	// 2 false
}

// When a session's operations may arrive in any order, a Window of their
// keys alone drops the duplicates among the last N distinct operations,
// whatever the order; older duplicates are not caught.
func ExampleWindow_anyOrder() {
	w := dedup.NewWindow(1000)
	s := sessionID("a")
	for _, seq := range []uint64{1, 3, 2, 3, 1} {
		fmt.Print(w.CheckAndRecord(dedup.Derive(s, seq, []byte("op"))), " ")
	}
	// Output: true true true false false
}
