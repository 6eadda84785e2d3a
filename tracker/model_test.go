package tracker

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// model is the reference for Tracker: the contract written as plainly as
// possible, one map and no shards. Owners are the tokens the real tracker
// hands out, which the model cannot predict but only needs to compare.
type model struct {
	ttl  int64
	now  int64
	keys map[scopedKey]entry
}

func (m *model) free(k scopedKey) bool {
	e, ok := m.keys[k]
	return !ok || m.now >= e.deadline
}

func (m *model) acquire(k scopedKey, tok Token) bool {
	if !m.free(k) {
		return false
	}
	m.keys[k] = entry{deadline: m.now + m.ttl, owner: tok.n}
	return true
}

func (m *model) reserveOwned(k scopedKey, tok Token) bool {
	if e := m.keys[k]; !m.free(k) && e.owner != tok.n {
		return false
	}
	m.keys[k] = entry{deadline: m.now + m.ttl, owner: tok.n}
	return true
}

func (m *model) completeOwned(k scopedKey, tok Token) bool {
	if e := m.keys[k]; !m.free(k) && (tok.n == 0 || e.owner != tok.n) {
		return false
	}
	m.keys[k] = entry{deadline: m.now + m.ttl}
	return true
}

func (m *model) releaseOwned(k scopedKey, tok Token) bool {
	if e := m.keys[k]; m.free(k) || tok.n == 0 || e.owner != tok.n {
		return false
	}
	delete(m.keys, k)
	return true
}

func (m *model) sweep() {
	for k, e := range m.keys {
		if m.now >= e.deadline {
			delete(m.keys, k)
		}
	}
}

// unknownToken stands in the model for the token of a reservation taken by
// Reserve, which the caller never sees: it owns no reservation of the
// tracker's, though it is one.
var unknownToken = Token{n: math.MaxUint64}

// TestTrackerMatchesModel runs random sequences of every operation, clock
// advances, clock rewinds and sweeps against the tracker and the model,
// comparing every answer. Few scopes, keys and shards make collisions, takeovers and stale
// tokens common.
func TestTrackerMatchesModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		const ttlNanos = int64(100)
		var now int64
		base := time.Unix(1_700_000_000, 0)
		tr := New(Config{
			TTL:           time.Duration(ttlNanos),
			SweepInterval: 1000 * time.Hour, // sweeps are driven by the test
			Shards:        rapid.SampledFrom([]int{1, 2, 16}).Draw(rt, "shards"),
			Now:           func() time.Time { return base.Add(time.Duration(now)) },
		})
		tr.Start()
		defer tr.Stop()
		m := &model{ttl: ttlNanos, keys: map[scopedKey]entry{}}
		tokens := []Token{{}} // every token handed out, and the zero one

		genKey := rapid.Custom(func(t *rapid.T) scopedKey {
			return scopedKey{
				scope: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "scope"),
				key:   rapid.SampledFrom([]string{"1", "2", "3"}).Draw(t, "key"),
			}
		})
		check := func(rt *rapid.T, op string, k scopedKey, got, want bool) {
			if got != want {
				rt.Fatalf("%s(%q, %q) at %d = %v, model says %v", op, k.scope, k.key, now, got, want)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"Reserve": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				check(rt, "Reserve", k, tr.Reserve(k.scope, k.key), m.acquire(k, unknownToken))
			},
			"Acquire": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok, ok := tr.Acquire(k.scope, k.key)
				check(rt, "Acquire", k, ok, m.acquire(k, tok))
				if ok == tok.IsZero() {
					rt.Fatalf("Acquire returned %v with ok = %v", tok, ok)
				}
				if ok {
					tokens = append(tokens, tok)
				}
			},
			"ReserveOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				if tok.IsZero() {
					return // behaves as Reserve, whose token the model cannot know
				}
				check(rt, "ReserveOwned", k, tr.ReserveOwned(k.scope, k.key, tok), m.reserveOwned(k, tok))
			},
			"Complete": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tr.Complete(k.scope, k.key)
				m.keys[k] = entry{deadline: m.now + m.ttl}
			},
			"CompleteOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				check(rt, "CompleteOwned", k, tr.CompleteOwned(k.scope, k.key, tok), m.completeOwned(k, tok))
			},
			"Release": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tr.Release(k.scope, k.key)
				delete(m.keys, k)
			},
			"ReleaseOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				check(rt, "ReleaseOwned", k, tr.ReleaseOwned(k.scope, k.key, tok), m.releaseOwned(k, tok))
			},
			"Seen": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				check(rt, "Seen", k, tr.Seen(k.scope, k.key), !m.free(k))
			},
			"Reserved": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				d, ok := tr.Reserved(k.scope, k.key)
				e := m.keys[k]
				wantOK := !m.free(k) && e.owner != 0
				var want time.Duration
				if wantOK {
					want = time.Duration(min(e.deadline-m.now, m.ttl)) // never more than the TTL
				}
				if d != want || ok != wantOK {
					rt.Fatalf("Reserved(%q, %q) at %d = %v, %v; model says %v, %v", k.scope, k.key, now, d, ok, want, wantOK)
				}
			},
			"Advance": func(rt *rapid.T) {
				now += rapid.Int64Range(1, 2*ttlNanos).Draw(rt, "nanos")
				m.now = now
			},
			"Rewind": func(rt *rapid.T) { // a clock stepped back (Config.Now)
				now -= rapid.Int64Range(1, 2*ttlNanos).Draw(rt, "nanos")
				m.now = now
			},
			"Sweep": func(rt *rapid.T) {
				tr.sweep()
				m.sweep()
			},
			"Reset": func(rt *rapid.T) {
				tr.Reset()
				clear(m.keys)
			},
			"": func(rt *rapid.T) {
				if got, want := tr.Len(), len(m.keys); got != want {
					rt.Fatalf("Len = %d, model holds %d", got, want)
				}
			},
		})
	})
}

// TestTrackerMatchesModelAcrossRestarts runs random sequences of the
// owned calls, Completed, clock advances, Stop and Start against the
// model: while stopped, every call fails open (Acquire a zero Token and
// true, ReserveOwned true, the other Owned calls false, Completed false,
// nothing held), Stop forgets every key, and a Token granted before a
// Stop owns nothing afterwards that a newer reservation holds, though it
// may take a free key again. A Token of another Tracker owns nothing here.
func TestTrackerMatchesModelAcrossRestarts(t *testing.T) {
	t.Parallel()
	other := New(Config{})
	other.Start()
	defer other.Stop()
	foreign, _ := other.Acquire("a", "1")
	rapid.Check(t, func(rt *rapid.T) {
		const ttlNanos = int64(100)
		var now int64
		base := time.Unix(1_700_000_000, 0)
		tr := New(Config{
			TTL:           time.Duration(ttlNanos),
			SweepInterval: 1000 * time.Hour,
			Shards:        rapid.SampledFrom([]int{1, 2}).Draw(rt, "shards"),
			Now:           func() time.Time { return base.Add(time.Duration(now)) },
		})
		tr.Start()
		defer tr.Stop()
		running := true
		m := &model{ttl: ttlNanos, keys: map[scopedKey]entry{}}
		tokens := []Token{{}, foreign}

		genKey := rapid.Custom(func(t *rapid.T) scopedKey {
			return scopedKey{
				scope: rapid.SampledFrom([]string{"a", ""}).Draw(t, "scope"),
				key:   rapid.SampledFrom([]string{"1", "2", ""}).Draw(t, "key"),
			}
		})
		// owned is what an Owned call answers: fail is its answer on a
		// stopped Tracker or for the foreign Token, and model the model's.
		owned := func(tok Token, fail bool, model func() bool) bool {
			if !running || tok == foreign {
				return fail
			}
			return model()
		}
		check := func(rt *rapid.T, op string, k scopedKey, tok Token, got, want bool) {
			if got != want {
				rt.Fatalf("%s(%q, %q, %v) at %d, running %v = %v, model says %v", op, k.scope, k.key, tok, now, running, got, want)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"Acquire": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok, ok := tr.Acquire(k.scope, k.key)
				want := !running || m.acquire(k, tok)
				check(rt, "Acquire", k, tok, ok, want)
				if tok.IsZero() == (running && ok) {
					rt.Fatalf("Acquire = %v, %v while running is %v", tok, ok, running)
				}
				if !tok.IsZero() {
					tokens = append(tokens, tok)
				}
			},
			"ReserveOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				if tok.IsZero() {
					return // behaves as Reserve, whose token the model cannot know
				}
				got := tr.ReserveOwned(k.scope, k.key, tok)
				want := !running || tok != foreign && m.reserveOwned(k, tok)
				check(rt, "ReserveOwned", k, tok, got, want)
			},
			"CompleteOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				check(rt, "CompleteOwned", k, tok, tr.CompleteOwned(k.scope, k.key, tok),
					owned(tok, false, func() bool { return m.completeOwned(k, tok) }))
			},
			"ReleaseOwned": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				tok := rapid.SampledFrom(tokens).Draw(rt, "tok")
				check(rt, "ReleaseOwned", k, tok, tr.ReleaseOwned(k.scope, k.key, tok),
					owned(tok, false, func() bool { return m.releaseOwned(k, tok) }))
			},
			"Completed": func(rt *rapid.T) {
				k := genKey.Draw(rt, "k")
				e := m.keys[k]
				check(rt, "Completed", k, Token{}, tr.Completed(k.scope, k.key), running && !m.free(k) && e.owner == 0)
			},
			"Stop": func(rt *rapid.T) {
				tr.Stop()
				running = false
				clear(m.keys)
			},
			"Start": func(rt *rapid.T) {
				tr.Start()
				running = true
			},
			"Advance": func(rt *rapid.T) {
				now += rapid.Int64Range(1, 2*ttlNanos).Draw(rt, "nanos")
				m.now = now
			},
			"": func(rt *rapid.T) {
				if got, want := tr.Len(), len(m.keys); got != want {
					rt.Fatalf("Len = %d, model holds %d", got, want)
				}
			},
		})
	})
}
