package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idemgo/idem"
)

type declined struct{ reason string }

func (d *declined) Error() string     { return "declined: " + d.reason }
func (d *declined) IdemClass() string { return "payment.declined" }

// asClassified exposes a Classifier through an As method, as errors.As
// allows.
type asClassified struct{}

func (asClassified) Error() string { return "wrapped by As" }
func (asClassified) As(target any) bool {
	if p, ok := target.(*idem.Classifier); ok {
		*p = &declined{"as"}
		return true
	}
	return false
}

func TestErrorOf(t *testing.T) {
	cause := errors.New("issuer unavailable")
	for _, tc := range []struct {
		name string
		err  error
		want idem.StoredError
	}{
		{"plain", errors.New("x"), idem.StoredError{Class: "*errors.errorString", Message: "x"}},
		{"wrapped", fmt.Errorf("charge: %w", cause), idem.StoredError{Class: "*fmt.wrapError", Message: "charge: issuer unavailable", Cause: "issuer unavailable"}},
		{"classifier", &declined{"limit"}, idem.StoredError{Class: "payment.declined", Message: "declined: limit"}},
		{"classifier in chain", fmt.Errorf("op: %w", &declined{"limit"}), idem.StoredError{Class: "payment.declined", Message: "op: declined: limit", Cause: "declined: limit"}},
		{"permanent", idem.Permanent("card.expired", fmt.Errorf("card: %w", cause)), idem.StoredError{Class: "card.expired", Message: "card: issuer unavailable", Cause: "issuer unavailable"}},
		{"stored", &idem.StoredError{Class: "c", Message: "m", Cause: "z"}, idem.StoredError{Class: "c", Message: "m", Cause: "z"}},
		{"wrapped stored", fmt.Errorf("outer: %w", &idem.StoredError{Class: "payment.declined", Message: "m"}), idem.StoredError{Class: "payment.declined", Message: "outer: m", Cause: "m"}},
		{"wrapped permanent without class", fmt.Errorf("op: %w", idem.Permanent("", &declined{"limit"})), idem.StoredError{Class: "payment.declined", Message: "op: declined: limit", Cause: "declined: limit"}},
		{"joined", errors.Join(errors.New("a"), &declined{"limit"}), idem.StoredError{Class: "payment.declined", Message: "a\ndeclined: limit"}},
		{"classifier through As", asClassified{}, idem.StoredError{Class: "payment.declined", Message: "wrapped by As"}},
		{"path error", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, idem.StoredError{Class: "*fs.PathError", Message: "open /x: file does not exist", Cause: "file does not exist"}},
		{"stored marked permanent", idem.Permanent("", &idem.StoredError{Class: "c", Message: "m", Cause: "z"}), idem.StoredError{Class: "c", Message: "m", Cause: "z"}},
		{"stored marked with a class", idem.Permanent("d", &idem.StoredError{Class: "c", Cause: "z"}), idem.StoredError{Class: "d", Cause: "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, idem.ErrorOf(tc.err)); diff != "" {
				t.Errorf("ErrorOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("no")
	p := idem.Permanent("c", base)
	if !errors.Is(p, base) || !idem.IsPermanent(p) || p.Error() != "no" {
		t.Errorf("Permanent wrapper: is=%v permanent=%v text=%q", errors.Is(p, base), idem.IsPermanent(p), p)
	}
	if idem.IsPermanent(base) {
		t.Error("a plain error is permanent")
	}
	if idem.Permanent("c", nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if !idem.IsPermanent(fmt.Errorf("x: %w", &idem.StoredError{Class: "c"})) {
		t.Error("a replayed StoredError is not permanent")
	}
}

func TestOutcomeErrAndKind(t *testing.T) {
	if (idem.Outcome{Kind: idem.Fresh}).Err() != nil || (idem.Outcome{Kind: idem.PriorResult}).Err() != nil {
		t.Error("Fresh/PriorResult give an error")
	}
	if err := (idem.Outcome{Kind: idem.InFlight}).Err(); !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("InFlight.Err() = %v", err)
	}
	if err := (idem.Outcome{}).Err(); err == nil {
		t.Error("zero outcome gives no error")
	}
	for k, want := range map[idem.Kind]string{idem.Fresh: "fresh", idem.PriorResult: "prior_result", idem.PriorError: "prior_error", idem.Mismatch: "mismatch", idem.InFlight: "in_flight", 0: "invalid", 42: "Kind(42)"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
	if err := idem.Unavailable(errors.New("dial tcp: refused")); !errors.Is(err, idem.ErrUnavailable) || errors.Unwrap(err) == nil {
		t.Errorf("Unavailable: %v", err)
	}
	if idem.Unavailable(nil) != nil {
		t.Error("Unavailable(nil) != nil")
	}
}

// TestNilStoredErrorDoesNotPanic: a nil *StoredError returned as an error
// (the typed-nil mistake: a nil pointer in a non-nil error) is an error
// like any other, never a panic: its methods, ErrorOf, and Do, which
// records it as a permanent failure, all take it.
func TestNilStoredErrorDoesNotPanic(t *testing.T) {
	var nilSE *idem.StoredError
	noPanic(t, "(*StoredError)(nil) methods", func() {
		if got := nilSE.Error(); got == "" {
			t.Error("Error() of a nil *StoredError is empty")
		}
		if got := nilSE.IdemClass(); got != "" {
			t.Errorf("IdemClass() of a nil *StoredError = %q, want empty", got)
		}
	})
	noPanic(t, "ErrorOf", func() {
		if se := idem.ErrorOf(nilSE); se.Class == "" {
			t.Errorf("ErrorOf(nil *StoredError) = %+v, want a class", se)
		}
		if se := idem.ErrorOf(idem.Permanent("c", nilSE)); se.Class != "c" {
			t.Errorf("ErrorOf(Permanent(c, nil *StoredError)) = %+v, want class c", se)
		}
	})
	s := newMem(t, nil)
	k := testKey(t, "nil-stored-error")
	noPanic(t, "Do", func() {
		_, err := idem.Do(context.Background(), s, k, "req", func(context.Context) (int, error) { return 0, nilSE }, nil)
		if err == nil {
			t.Error("Do with fn returning a nil *StoredError = nil error")
		}
	})
	if rec, err := s.Get(context.Background(), k); err != nil || rec.Status == idem.StatusInProgress {
		t.Errorf("record after fn returned a nil *StoredError = %+v, %v; want it settled", rec, err)
	}
}

// TestErrorOfMarkedTwice: an error marked with Permanent twice, as one
// layer marks what another has marked already (an inner Do's failure, say),
// is recorded as the error marked once: the outer class if it has one,
// else the inner, the message, and the cause of the error itself, not the
// message again. A replayed StoredError marked twice is recorded whole.
func TestErrorOfMarkedTwice(t *testing.T) {
	insufficient := errors.New("insufficient funds")
	declinedErr := fmt.Errorf("card declined: %w", insufficient)
	stored := &idem.StoredError{Class: "payment.declined", Message: "card declined", Cause: "insufficient funds"}
	for _, tc := range []struct {
		name string
		err  error
		want idem.StoredError
	}{
		{"outer class", idem.Permanent("order.failed", idem.Permanent("payment.declined", declinedErr)),
			idem.StoredError{Class: "order.failed", Message: "card declined: insufficient funds", Cause: "insufficient funds"}},
		{"inner class", idem.Permanent("", idem.Permanent("payment.declined", declinedErr)),
			idem.StoredError{Class: "payment.declined", Message: "card declined: insufficient funds", Cause: "insufficient funds"}},
		{"no class", idem.Permanent("", idem.Permanent("", declinedErr)),
			idem.StoredError{Class: "*fmt.wrapError", Message: "card declined: insufficient funds", Cause: "insufficient funds"}},
		{"three marks", idem.Permanent("", idem.Permanent("order.failed", idem.Permanent("payment.declined", declinedErr))),
			idem.StoredError{Class: "order.failed", Message: "card declined: insufficient funds", Cause: "insufficient funds"}},
		{"stored", idem.Permanent("order.failed", idem.Permanent("", stored)),
			idem.StoredError{Class: "order.failed", Message: "card declined", Cause: "insufficient funds"}},
		{"stored without class", idem.Permanent("", idem.Permanent("", stored)), *stored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, idem.ErrorOf(tc.err)); diff != "" {
				t.Errorf("ErrorOf (-want +got):\n%s", diff)
			}
		})
	}
}
