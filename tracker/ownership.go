package tracker

import "sync/atomic"

// Token proves ownership of a reservation. Acquire returns one with each
// reservation it grants; it is unique to that reservation in the process,
// so only the caller that reserved a key can present it. It proves nothing
// to another Tracker: ReserveOwned, CompleteOwned and ReleaseOwned answer
// a Token from another Tracker as they answer a stale one, with false.
//
// The zero Token proves nothing. Acquire returns it when it fails open (on
// a nil or unstarted Tracker) and when the key is already taken.
type Token struct {
	tracker uint64 // the minting Tracker's id; 0 only in the zero Token
	n       uint64 // unique among the minting Tracker's reservations
}

// IsZero reports whether tok is the zero Token.
func (tok Token) IsZero() bool { return tok == Token{} }

// trackerIDs numbers the Trackers of the process, from 1, so that no two
// mint equal Tokens. It is read once per Tracker, never on a call's path.
var trackerIDs atomic.Uint64

// foreign reports whether tok is neither the zero Token nor one of t's.
func (t *Tracker) foreign(tok Token) bool {
	return tok.tracker != t.id && !tok.IsZero()
}

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
	tok := Token{tracker: t.id, n: s.mint()}
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
// With the zero Token, ReserveOwned behaves as Reserve. With a Token of
// another Tracker it returns false, changing nothing.
//
// Fail-open: ReserveOwned returns true on a nil or unstarted Tracker.
func (t *Tracker) ReserveOwned(scope, key string, tok Token) bool {
	if !t.started() {
		return true
	}
	if tok.IsZero() {
		return t.Reserve(scope, key)
	}
	if t.foreign(tok) {
		return false
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
// another owner holds a live reservation, or if tok is another Tracker's.
//
// CompleteOwned is a no-op returning false on a nil or unstarted Tracker.
func (t *Tracker) CompleteOwned(scope, key string, tok Token) bool {
	if !t.started() || t.foreign(tok) {
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
// if tok owns its live reservation, and otherwise returns false and changes
// nothing, so a caller whose reservation was taken over never frees its
// successor's. A reservation of tok's that has lapsed is free already: for
// it ReleaseOwned returns false, as for any free key, whether or not the
// sweeper has deleted it yet. A Token of another Tracker owns nothing here.
//
// ReleaseOwned is a no-op returning false on a nil or unstarted Tracker.
func (t *Tracker) ReleaseOwned(scope, key string, tok Token) bool {
	if !t.started() || tok.IsZero() || t.foreign(tok) {
		return false
	}
	now := t.clock()
	k := scopedKey{scope, key}
	s := t.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[k]; !ok || e.owner != tok.n || !e.live(now) {
		return false
	}
	delete(s.keys, k)
	return true
}
