package tracker

// Token proves ownership of a reservation. Acquire returns one with each
// reservation it grants; it is unique to that reservation, so only the
// caller that reserved a key can present it.
//
// The zero Token proves nothing. Acquire returns it when it fails open (on
// a nil or unstarted Tracker) and when the key is already taken.
type Token struct {
	n uint64
}

// IsZero reports whether tok is the zero Token.
func (tok Token) IsZero() bool { return tok.n == 0 }

// Acquire is Reserve that also returns the reservation's Token, with which
// the owner's retries bypass reservation (ReserveOwned) and with which it
// can complete or release the key without touching a reservation that is
// no longer its own (CompleteOwned, ReleaseOwned).
//
// Fail-open: Acquire returns the zero Token and true on a nil or unstarted
// Tracker.
func (t *Tracker) Acquire(scope, key string) (Token, bool) {
	if !t.started() {
		return Token{}, true
	}
	now := t.clock()
	k := scopedKey{scope, key}
	s := t.lockRunning(k)
	if s == nil {
		return Token{}, true
	}
	defer s.mu.Unlock()
	if e, ok := s.keys[k]; ok && e.live(now) {
		return Token{}, false
	}
	tok := Token{s.mint()}
	s.put(k, entry{deadline: t.deadline(now), owner: tok.n})
	return tok, true
}

// ReserveOwned is how a retry that already owns key proves it and bypasses
// reservation: it returns true if tok owns the reservation (whose TTL it
// then refreshes, so a long series of retries is not mistaken for an
// abandoned one), or if the key is free (the reservation lapsed and nobody
// took it; it is taken again under tok). It returns false if the key is
// completed or another owner holds a live reservation: the retry must stop.
//
// With the zero Token, ReserveOwned behaves as Reserve.
//
// Fail-open: ReserveOwned returns true on a nil or unstarted Tracker.
func (t *Tracker) ReserveOwned(scope, key string, tok Token) bool {
	if !t.started() {
		return true
	}
	if tok.IsZero() {
		return t.Reserve(scope, key)
	}
	now := t.clock()
	k := scopedKey{scope, key}
	s := t.lockRunning(k)
	if s == nil {
		return true
	}
	defer s.mu.Unlock()
	if e, ok := s.keys[k]; ok && e.owner != tok.n && e.live(now) {
		return false
	}
	s.put(k, entry{deadline: t.deadline(now), owner: tok.n})
	return true
}

// CompleteOwned is Complete unless the key is no longer tok's: it marks key
// completed and returns true if tok owns the reservation or the key is
// free, and returns false, changing nothing, if the key is completed or
// another owner holds a live reservation.
//
// CompleteOwned is a no-op returning false on a nil or unstarted Tracker.
func (t *Tracker) CompleteOwned(scope, key string, tok Token) bool {
	if !t.started() {
		return false
	}
	now := t.clock()
	k := scopedKey{scope, key}
	s := t.lockRunning(k)
	if s == nil {
		return false
	}
	defer s.mu.Unlock()
	if e, ok := s.keys[k]; ok && (tok.IsZero() || e.owner != tok.n) && e.live(now) {
		return false
	}
	s.put(k, entry{deadline: t.deadline(now)})
	return true
}

// ReleaseOwned is Release only for the owner: it frees key and returns true
// if tok owns its reservation (live or lapsed), and otherwise returns false
// and changes nothing, so a caller whose reservation was taken over never
// frees its successor's.
//
// ReleaseOwned is a no-op returning false on a nil or unstarted Tracker.
func (t *Tracker) ReleaseOwned(scope, key string, tok Token) bool {
	if !t.started() || tok.IsZero() {
		return false
	}
	k := scopedKey{scope, key}
	s := t.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[k]; !ok || e.owner != tok.n {
		return false
	}
	delete(s.keys, k)
	return true
}
