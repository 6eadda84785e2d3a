package dedup

import "strconv"

// Filter drops duplicate operations in two layers, in the order of the
// design's receiver: first the session's sequence high-water mark (cheap,
// unbounded in time), then the window of recent operation keys (bounded,
// catches a duplicate the mark cannot, such as one replayed after the
// session's mark was forgotten or restored from an older snapshot).
//
// The zero Filter is ready to use: it knows no session and its window
// remembers DefaultCapacity keys (see Window). A Filter must not be copied
// after first use.
//
// A Filter is safe for concurrent use.
type Filter struct {
	seqs   SeqTracker
	window Window
}

// NewFilter returns a Filter whose window remembers the last capacity
// operation keys; see NewWindow for the memory this takes and the capacities
// it accepts. NewFilter panics with a *CapacityError if capacity is out of
// range; NewFilterChecked returns the error instead.
func NewFilter(capacity int) *Filter {
	f, err := NewFilterChecked(capacity)
	if err != nil {
		panic(err)
	}
	return f
}

// NewFilterChecked is NewFilter for a capacity that may be out of range: it
// returns a nil Filter and a *CapacityError if capacity is below 1 or above
// 1<<28 - 1 (less on 32-bit platforms; see CapacityError), and never
// panics.
func NewFilterChecked(capacity int) (*Filter, error) {
	if err := checkCapacity(capacity); err != nil {
		return nil, err
	}
	f := new(Filter)
	f.window.c = newLRU(capacity)
	return f, nil
}

// Accept reports whether the operation should be applied: false if seq is
// at or below the session's high-water mark, or if the window remembers the
// operation's key; true otherwise, and the key is recorded. A seq above the
// mark raises the mark to it in either case, also when the window then
// answers false. Of several concurrent Accepts of one operation, exactly one
// returns true.
//
// An accepted operation counts as seen whether or not the caller manages to
// apply it; as in the design, a failed apply is not retried by redelivery.
//
// Check is Accept telling why an operation is dropped.
func (f *Filter) Accept(session [16]byte, seq uint64, op []byte) bool {
	return f.Check(session, seq, op) == Apply
}

// Verdict is Check's answer: whether an operation is applied and, if not,
// which layer dropped it.
type Verdict int

const (
	// Apply: the operation is new; its key is recorded.
	Apply Verdict = iota + 1
	// BelowMark: seq is at or below the session's high-water mark: a
	// redelivery, an operation delivered late, or a sender that numbered
	// its session again from the start.
	BelowMark
	// Seen: seq is above the mark but the window remembers the operation:
	// replayed after the session's mark was forgotten or restored from an
	// older snapshot.
	Seen
)

// String returns "apply", "below-mark" or "seen".
func (v Verdict) String() string {
	switch v {
	case Apply:
		return "apply"
	case BelowMark:
		return "below-mark"
	case Seen:
		return "seen"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Check is Accept, answering why: Apply where Accept returns true,
// BelowMark or Seen where it returns false, with the same effects.
func (f *Filter) Check(session [16]byte, seq uint64, op []byte) Verdict {
	if !f.seqs.ShouldApply(session, seq) {
		return BelowMark
	}
	if !f.window.CheckAndRecord(Derive(session, seq, op)) {
		return Seen
	}
	return Apply
}

// SeqTracker returns the Filter's first layer, for restoring (Advance) or
// dropping (Forget) a session's high-water mark.
func (f *Filter) SeqTracker() *SeqTracker { return &f.seqs }

// Window returns the Filter's second layer.
func (f *Filter) Window() *Window { return &f.window }
