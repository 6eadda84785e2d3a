package pgstore_test

import (
	"testing"

	"github.com/idemgo/idem"
)

func mustKey(t testing.TB, ns idem.Namespace, value string) idem.Key {
	t.Helper()
	k, err := idem.ParseKey(ns, value)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRequest(t testing.TB, payload string) idem.Request {
	t.Helper()
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantOutcome(t testing.TB, o idem.Outcome, want idem.Kind) {
	t.Helper()
	if o.Kind != want {
		t.Fatalf("outcome = %s, want %s (%+v)", o.Kind, want, o)
	}
}
