package redisstore

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestBeginRereadsAReplacedRecord: when Begin's script leaves a record too
// large to answer with to Begin's GET, and the key holds another record
// by the time of the GET (here replaced between the two), Begin decides
// again rather than answer from a record the script did not decide on:
// a record of another request answers Mismatch with that request, one in
// progress InFlight, none Fresh. A key replaced at every read is read
// recordReads times, and then answered by the script whatever the size.
func TestBeginRereadsAReplacedRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	ns := idem.MustNamespace("reread")
	req := mustRequestOf(t, `{"n":1}`)
	other := mustRequestOf(t, `{"n":2}`)
	large := func(i int) []byte { return []byte(`"` + strconv.Itoa(i) + strings.Repeat("r", 2*inlineMax) + `"`) }
	begin := func(key idem.Key, r idem.Request) idem.Lease {
		t.Helper()
		o, err := s.Begin(ctx, key, r, nil)
		if err != nil || o.Kind != idem.Fresh {
			t.Fatalf("Begin in the replacement = %v, %v; want Fresh", o.Kind, err)
		}
		return o.Lease
	}
	// replace deletes the record and makes a new one, with fence 1 again,
	// as once it has expired: committed with result of request r, or in
	// progress when result is nil.
	replace := func(key idem.Key, r idem.Request, result []byte) {
		t.Helper()
		if err := s.client.Del(ctx, s.key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if result == nil {
			begin(key, r)
			return
		}
		if err := s.Commit(ctx, key, begin(key, r), result); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		replace func(key idem.Key, read int) // read counts from 1
		reads   int
		want    func(idem.Outcome) bool
	}{
		{"ByAnotherRequest", func(key idem.Key, _ int) { replace(key, other, []byte(`"other"`)) }, 1,
			func(o idem.Outcome) bool {
				return o.Kind == idem.Mismatch && o.RecordedHash == other.Fingerprint && string(o.RecordedRequest) == `{"n":2}`
			}},
		{"ByOneInProgress", func(key idem.Key, _ int) { replace(key, req, nil) }, 1,
			func(o idem.Outcome) bool { return o.Kind == idem.InFlight }},
		{"ByNone", func(key idem.Key, _ int) {
			if err := s.client.Del(ctx, s.key(key)).Err(); err != nil {
				t.Fatal(err)
			}
		}, 1, func(o idem.Outcome) bool { return o.Kind == idem.Fresh && o.Lease.Fence == 1 }},
		{"AtEveryRead", func(key idem.Key, read int) { replace(key, req, large(read)) }, recordReads,
			func(o idem.Outcome) bool {
				return o.Kind == idem.PriorResult && bytes.Equal(o.Result, large(recordReads))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := idem.ParseKey(ns, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, key, begin(key, req), large(0)); err != nil {
				t.Fatal(err)
			}
			reads := 0
			s.beforeRecordRead = func() {
				reads++
				c.replace(key, reads)
			}
			defer func() { s.beforeRecordRead = nil }()
			o, err := s.Begin(ctx, key, req, nil)
			if err != nil || !c.want(o) {
				t.Errorf("Begin = %v (result of %d bytes, recorded request %.20q), %v", o.Kind, len(o.Result), o.RecordedRequest, err)
			}
			if reads != c.reads {
				t.Errorf("Begin read the record %d times, want %d", reads, c.reads)
			}
		})
	}
}

func mustRequestOf(t *testing.T, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
