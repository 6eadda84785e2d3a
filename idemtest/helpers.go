package idemtest

import (
	"bytes"
	"context"
	"fmt"
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
		t.Fatalf("outcome = %s, want %s (%s)", o.Kind, want, describeOutcome(o))
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

// describePayload shows a JSON payload as text for a failure message,
// with clobberHint's explanation when it applies.
func describePayload(b []byte) string { return string(b) + clobberHint(b) }

// clobberHint explains a payload of '#' only: the suite wrote it over a
// slice a call had returned (see clobber), so the store handed out its own
// buffer and the record changed with the caller's slice. It is empty for
// any other payload ('#' alone is not JSON).
func clobberHint(b []byte) string {
	if len(b) > 0 && len(bytes.Trim(b, "#")) == 0 {
		return " (the suite wrote '#' over a slice a call returned: the store handed out its own buffer, not a copy; see idem.Store, Buffers)"
	}
	return ""
}

// describeStoredError shows a stored error for a failure message.
func describeStoredError(e *idem.StoredError) string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%+v", *e)
}

// describeRecord shows r for a failure message, its payloads as text.
func describeRecord(r idem.Record) string {
	return fmt.Sprintf("{Key:%v Status:%s Fingerprint:%v Request:%s Result:%s Error:%s Fence:%d CreatedAt:%v ExpiresAt:%v LeaseExpiresAt:%v}",
		r.Key, r.Status, r.Fingerprint, describePayload(r.Request), describePayload(r.Result), describeStoredError(r.Error),
		r.Fence, r.CreatedAt, r.ExpiresAt, r.LeaseExpiresAt)
}

// describeOutcome shows o for a failure message, its payloads as text.
func describeOutcome(o idem.Outcome) string {
	return fmt.Sprintf("{Kind:%s Lease:%+v TakenOver:%v Result:%s Error:%s RecordedHash:%v SubmittedHash:%v RecordedRequest:%s RetryAfter:%v}",
		o.Kind, o.Lease, o.TakenOver, describePayload(o.Result), describeStoredError(o.Error),
		o.RecordedHash, o.SubmittedHash, describePayload(o.RecordedRequest), o.RetryAfter)
}
