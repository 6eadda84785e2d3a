package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemgo/idem"
)

type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	TraceID string `json:"trace_id"` // transient: must not affect the fingerprint
}

// TestTypedCustomMarshal: a custom encoder projects the request to a stable
// shape, so a field that changes on every retry does not cause a mismatch.
func TestTypedCustomMarshal(t *testing.T) {
	s := newMem(t, nil)
	ctx := context.Background()
	opts := &idem.TypedOpts{Marshal: func(v any) ([]byte, error) {
		if r, ok := v.(sendEmail); ok {
			r.TraceID = ""
			return json.Marshal(r)
		}
		return json.Marshal(v)
	}}
	typed := idem.NewTyped[sendEmail, string](s, opts)
	k := testKey(t, "email")
	o, err := typed.Begin(ctx, k, sendEmail{To: "a@x", Subject: "hi", TraceID: "t1"}, nil)
	if err != nil || o.Kind != idem.Fresh {
		t.Fatal(o.Kind, err)
	}
	if err := typed.Commit(ctx, k, o.Lease, "msg-1"); err != nil {
		t.Fatal(err)
	}
	p, err := typed.Begin(ctx, k, sendEmail{To: "a@x", Subject: "hi", TraceID: "t2"}, nil)
	if err != nil || p.Kind != idem.PriorResult || p.Result != "msg-1" {
		t.Fatalf("retry with another trace id = %s %q %v, want the replay", p.Kind, p.Result, err)
	}
	plain := idem.NewTyped[sendEmail, string](s, nil)
	m, err := plain.Begin(ctx, k, sendEmail{To: "a@x", Subject: "hi", TraceID: "t2"}, nil)
	if err != nil || m.Kind != idem.Mismatch {
		t.Fatalf("default encoder = %s %v, want mismatch", m.Kind, err)
	}
}

// TestTypedFailPermanentNilError: recording "no error" as a permanent
// failure is a caller's mistake (an err variable never set), refused
// before anything is written: the key stays reserved for a FailTransient
// or a Commit.
func TestTypedFailPermanentNilError(t *testing.T) {
	s := newMem(t, nil)
	ctx := context.Background()
	typed := idem.NewTyped[string, string](s, nil)
	k := testKey(t, "fail-nil")
	o, err := typed.Begin(ctx, k, "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := typed.FailPermanent(ctx, k, o.Lease, nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("FailPermanent(nil) = %v, want ErrInvalidArgument", err)
	}
	rec, err := s.Get(ctx, k)
	if err != nil || rec.Status != idem.StatusInProgress {
		t.Fatalf("record after FailPermanent(nil) = %+v, %v; want still in progress", rec, err)
	}
	if err := typed.Commit(ctx, k, o.Lease, "done"); err != nil {
		t.Fatalf("Commit after the refused FailPermanent: %v", err)
	}
}

func TestTypedStrict(t *testing.T) {
	s := newMem(t, nil)
	ctx := context.Background()
	type wide struct{ A, B int }
	type narrow struct{ A int }
	k := testKey(t, "strict")
	w := idem.NewTyped[string, wide](s, nil)
	o, _ := w.Begin(ctx, k, "r", nil)
	if err := w.Commit(ctx, k, o.Lease, wide{1, 2}); err != nil {
		t.Fatal(err)
	}
	if p, err := idem.NewTyped[string, narrow](s, nil).Begin(ctx, k, "r", nil); err != nil || p.Result.A != 1 {
		t.Errorf("lenient decode: %+v %v", p.Result, err)
	}
	_, err := idem.NewTyped[string, narrow](s, &idem.TypedOpts{Strict: true}).Begin(ctx, k, "r", nil)
	if !errors.Is(err, idem.ErrIncompatibleState) {
		t.Errorf("strict decode of a wider result: %v, want ErrIncompatibleState", err)
	}
}

func TestTypedFailPermanent(t *testing.T) {
	s := newMem(t, nil)
	ctx := context.Background()
	typed := idem.NewTyped[string, string](s, nil)
	k := testKey(t, "fail")
	o, _ := typed.Begin(ctx, k, "r", nil)
	if err := typed.FailPermanent(ctx, k, o.Lease, idem.Permanent("quota.exceeded", errors.New("quota"))); err != nil {
		t.Fatal(err)
	}
	p, err := typed.Begin(ctx, k, "r", nil)
	if err != nil || p.Kind != idem.PriorError || p.Error.Class != "quota.exceeded" {
		t.Fatalf("replay = %s %+v %v", p.Kind, p.Error, err)
	}
	var se *idem.StoredError
	if !errors.As(p.Err(), &se) {
		t.Errorf("TypedOutcome.Err() = %v", p.Err())
	}
	if _, err := typed.Begin(ctx, k, "r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := idem.NewTyped[func(), string](s, nil).Begin(ctx, k, func() {}, nil); err == nil {
		t.Error("an unencodable request was accepted")
	}
}
