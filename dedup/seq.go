package dedup

import "sync"

// SeqTracker keeps, per session, the high-water mark (HWM): the highest
// sequence number applied so far. It is the unbounded second line of
// defence behind a Window: a seqno at or below its session's HWM is never
// applied again, however long ago it was applied.
//
// ShouldApply claims a seqno: it both checks and advances the HWM, under one
// lock, so of several concurrent deliveries of one (session, seq) exactly
// one is told to apply it. A session's operations must therefore arrive in
// seqno order, as a replication stream delivers them; a seqno that arrives
// after a higher one of its session is treated as a duplicate. Seqnos do
// not wrap around: once a session's mark is the largest uint64, none of its
// operations applies again (0 included) until the session is forgotten.
//
// The zero SeqTracker is ready to use, as a sync.Mutex is: it knows no
// session, as one from NewSeqTracker. A SeqTracker must not be copied after
// first use.
//
// A SeqTracker is safe for concurrent use. It holds one 24-byte entry per
// session it has seen (plus the map's overhead) until Forget is called; a
// Go map keeps the memory of the most entries it ever held, so Forget moves
// the remaining marks to a fresh map once forgetting has left fewer than a
// quarter of that peak (when the peak was 256 sessions or more): after a
// burst of sessions is forgotten, the memory follows the live sessions back
// down.
type SeqTracker struct {
	mu  sync.Mutex
	hwm map[[16]byte]uint64 // nil until a zero SeqTracker records a mark
	// peak is the most marks hwm has held since it was made.
	peak int
}

// seqShrinkFloor is the peak number of sessions below which Forget never
// rebuilds the map: a map that small takes a few KiB at most.
const seqShrinkFloor = 256

// NewSeqTracker returns a SeqTracker that knows no session.
func NewSeqTracker() *SeqTracker {
	return &SeqTracker{hwm: make(map[[16]byte]uint64)}
}

// ShouldApply reports whether seq is above the session's high-water mark,
// and if so raises the mark to seq. A session not seen before has no mark,
// so any seq, 0 included, applies.
func (s *SeqTracker) ShouldApply(session [16]byte, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hwm, ok := s.hwm[session]; ok && seq <= hwm {
		return false
	}
	s.set(session, seq)
	return true
}

// Advance raises the session's high-water mark to seq, as if seq had been
// applied; it never lowers it. Use it to restore marks recorded elsewhere,
// for instance after a restart.
func (s *SeqTracker) Advance(session [16]byte, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hwm, ok := s.hwm[session]; !ok || seq > hwm {
		s.set(session, seq)
	}
}

// set records seq as the session's mark, making the map of a zero
// SeqTracker; s.mu must be held.
func (s *SeqTracker) set(session [16]byte, seq uint64) {
	if s.hwm == nil {
		s.hwm = make(map[[16]byte]uint64)
	}
	s.hwm[session] = seq
	s.peak = max(s.peak, len(s.hwm))
}

// HighWater returns the session's high-water mark, and false if the session
// has none.
func (s *SeqTracker) HighWater(session [16]byte) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hwm, ok := s.hwm[session]
	return hwm, ok
}

// Forget drops the session's high-water mark, so that its memory is freed.
// Call it only for a session that will send nothing more: afterwards any of
// its seqnos applies again.
//
// When forgetting leaves the marks under a quarter of the most the
// SeqTracker has held (256 or more), Forget copies the remaining ones to a
// fresh map and lets the old one go. The copy is of fewer entries than the
// Forgets that led to it deleted, so a Forget costs O(1) amortised.
func (s *SeqTracker) Forget(session [16]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hwm, session)
	if s.peak < seqShrinkFloor || len(s.hwm) >= s.peak/4 {
		return
	}
	fresh := make(map[[16]byte]uint64, len(s.hwm))
	for k, v := range s.hwm {
		fresh[k] = v
	}
	s.hwm = fresh
	s.peak = len(fresh)
}

// Len returns how many sessions have a high-water mark.
func (s *SeqTracker) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hwm)
}
