package idemtest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idemgo/idem"
)

func request(t *testing.T, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func begin(t *testing.T, s idem.Store, k idem.Key, r idem.Request, opts *idem.BeginOpts) idem.Outcome {
	t.Helper()
	o, err := s.Begin(context.Background(), k, r, opts)
	if err != nil {
		t.Fatalf("Begin(%s): %v", k, err)
	}
	return o
}

func wantKind(t *testing.T, o idem.Outcome, want idem.Kind) {
	t.Helper()
	if o.Kind != want {
		t.Fatalf("outcome = %s, want %s (%+v)", o.Kind, want, o)
	}
}

func fresh(t *testing.T, s idem.Store, k idem.Key, r idem.Request) idem.Lease {
	t.Helper()
	o := begin(t, s, k, r, nil)
	wantKind(t, o, idem.Fresh)
	return o.Lease
}

func get(t *testing.T, s idem.Store, k idem.Key) idem.Record {
	t.Helper()
	rec, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return rec
}

func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sameJSON compares JSON documents by their canonical form: backends may
// store requests in a normalising column type (JSONB).
func sameJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	g, err := idem.CanonicalJSON(got, nil)
	if err != nil {
		t.Fatalf("stored JSON %q does not parse: %v", got, err)
	}
	w, err := idem.CanonicalJSON(want, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(g, w)
}

func sameTime(a, b time.Time) bool { return a.Equal(b) }

// recordOpts compare idem.Records with cmp: keys and fingerprints by ==,
// times by their Equal method.
var recordOpts = cmp.Options{
	cmp.Comparer(func(a, b idem.Key) bool { return a == b }),
	cmp.Comparer(func(a, b idem.Fingerprint) bool { return a == b }),
}
