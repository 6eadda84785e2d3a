package bench

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// mapStore is the baseline: a mutex-guarded map doing the reads and writes
// a Begin+Commit and a replay need, and nothing else.
type mapStore struct {
	mu   sync.Mutex
	recs map[string]*mapRec
}

type mapRec struct {
	fp      idem.Fingerprint
	status  uint8
	result  []byte
	expires time.Time
}

func (m *mapStore) begin(k string, fp idem.Fingerprint, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[k]; ok && now.Before(r.expires) {
		return false
	}
	m.recs[k] = &mapRec{fp: fp, expires: now.Add(time.Hour)}
	return true
}

func (m *mapStore) commit(k string, result []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[k]; ok {
		r.status, r.result = 1, result
	}
}

func (m *mapStore) replay(k string, fp idem.Fingerprint) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[k]; ok && r.fp == fp {
		return r.result
	}
	return nil
}

func keys(b *testing.B, n int) ([]idem.Key, []string) {
	ns := idem.MustNamespace("bench")
	ks := make([]idem.Key, n)
	ss := make([]string, n)
	for i := range ks {
		s := "key-" + strconv.Itoa(i)
		k, err := idem.ParseKey(ns, s)
		if err != nil {
			b.Fatal(err)
		}
		ks[i], ss[i] = k, s
	}
	return ks, ss
}

var (
	benchReq    = mustReq(`{"amount":100,"currency":"EUR"}`)
	benchResult = []byte(`{"id":"ch_1","amount":100}`)
)

func mustReq(s string) idem.Request {
	r, err := idem.NewRequest([]byte(s))
	if err != nil {
		panic(err)
	}
	return r
}

func baselineBeginCommit(b *testing.B) func(n int) time.Duration {
	return func(n int) time.Duration {
		m := &mapStore{recs: map[string]*mapRec{}}
		_, ss := keys(b, n)
		start := time.Now()
		for i := range n {
			if m.begin(ss[i], benchReq.Fingerprint, time.Now()) {
				m.commit(ss[i], benchResult)
			}
		}
		return time.Since(start)
	}
}

// BenchmarkMemstoreBeginCommit: a fresh key begun and committed, per op.
func BenchmarkMemstoreBeginCommit(b *testing.B) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ks, _ := keys(b, b.N)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o, err := s.Begin(ctx, ks[i], benchReq, nil)
		if err != nil || o.Kind != idem.Fresh {
			b.Fatal(o.Kind, err)
		}
		if err := s.Commit(ctx, ks[i], o.Lease, benchResult); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, baselineBeginCommit(b))
}

func baselineReplay(b *testing.B) func(n int) time.Duration {
	return func(n int) time.Duration {
		m := &mapStore{recs: map[string]*mapRec{}}
		_, ss := keys(b, 1024)
		for _, k := range ss {
			m.begin(k, benchReq.Fingerprint, time.Now())
			m.commit(k, benchResult)
		}
		start := time.Now()
		for i := range n {
			if m.replay(ss[i%1024], benchReq.Fingerprint) == nil {
				b.Fatal("no result")
			}
		}
		return time.Since(start)
	}
}

// BenchmarkMemstoreReplay: Begin on a committed key, per op.
func BenchmarkMemstoreReplay(b *testing.B) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ks, _ := keys(b, 1024)
	ctx := context.Background()
	for _, k := range ks {
		o, _ := s.Begin(ctx, k, benchReq, nil)
		if err := s.Commit(ctx, k, o.Lease, benchResult); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o, err := s.Begin(ctx, ks[i%1024], benchReq, nil)
		if err != nil || o.Kind != idem.PriorResult {
			b.Fatal(o.Kind, err)
		}
	}
	reportRatio(b, baselineReplay(b))
}
