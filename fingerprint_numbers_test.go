package idem_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/idemgo/idem"
)

// Numbers that RFC 8785 would round to the same double (integers beyond
// 2^53, values below the smallest double, digits past a double's
// precision) are different requests: their fingerprints differ, so a key
// reused with another such number is a Mismatch, not a replay of the
// other's answer. Spellings of one value (1e2, 100, 100.0; 0.1, 0.10) and
// member order still do not count.
func TestFingerprintJSONKeepsNumbersExact(t *testing.T) {
	fp := func(doc string) idem.Fingerprint {
		t.Helper()
		f, err := idem.FingerprintJSON([]byte(doc), nil)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		req, err := idem.FingerprintRequest(idem.RequestParts{Method: "POST", Target: "/t", Body: []byte(doc), JSON: true})
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		// Both fingerprints tell the same documents apart: fold them.
		var b [2 * 33]byte
		copy(b[:], f.Bytes())
		copy(b[33:], req.Bytes())
		return idem.FingerprintBytes(b[:])
	}
	differ := [][2]string{
		{`{"account":9007199254740993}`, `{"account":9007199254740992}`},
		{`{"id":12345678901234567890}`, `{"id":12345678901234567000}`},
		{`{"id":12345678901234567890}`, `{"id":12345678901234567891}`},
		{`[-9007199254740993]`, `[-9007199254740992]`},
		{`[1e-400]`, `[0]`},
		{`[1e-400]`, `[2e-400]`},
		{`[-1e-400]`, `[1e-400]`},
		{`[0.1000000000000000055511151231257827021181583404541015625]`, `[0.1]`},
		{`[1.00000000000000000001]`, `[1]`},
		{`[1000000000000000000001]`, `[1e21]`},
		{`[1e-99999999999999999999999]`, `[1e-99999999999999999999998]`},
	}
	for _, c := range differ {
		if fp(c[0]) == fp(c[1]) {
			t.Errorf("%s and %s have the same fingerprint", c[0], c[1])
		}
	}
	same := [][]string{
		{`[9007199254740993]`, `[9007199254740993.0]`, `[90071992547409930e-1]`, `[9.007199254740993e15]`, `[ 9007199254740993 ]`},
		{`[100]`, `[1e2]`, `[1E+2]`, `[100.0]`, `[0.1e3]`},
		{`[0.1]`, `[0.10]`, `[1e-1]`, `[0.100e0]`},
		{`[0]`, `[-0]`, `[0.0]`, `[-0e5]`, `[0E-7]`},
		{`[1e-400]`, `[10e-401]`, `[0.1e-399]`, `[1.0e-400]`},
		{`{"a":9007199254740993,"b":1e-400}`, `{"b":1e-400,"a":9007199254740993}`, `{ "b" : 1.0e-400 , "a" : 9007199254740993.00 }`},
	}
	for _, group := range same {
		for _, doc := range group[1:] {
			if fp(doc) != fp(group[0]) {
				t.Errorf("%s and %s have different fingerprints", group[0], doc)
			}
		}
	}
}

// Through Do: an int64 ID beyond 2^53 with a reused key is caught as a
// Mismatch, not answered with the other ID's result.
func TestDoInt64IDsBeyondDoubles(t *testing.T) {
	s := newMem(t, nil)
	k := testKey(t, "transfer-1")
	type transfer struct{ Account int64 }
	run := func(account int64) (string, error) {
		return idem.Do(context.Background(), s, k, transfer{account}, func(context.Context) (string, error) {
			return strconv.FormatInt(account, 10), nil
		}, nil)
	}
	if got, err := run(9007199254740993); err != nil || got != "9007199254740993" {
		t.Fatalf("first: %q, %v", got, err)
	}
	if got, err := run(9007199254740992); !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("another account with the same key: %q, %v; want ErrMismatch", got, err)
	}
	if got, err := run(9007199254740993); err != nil || got != "9007199254740993" {
		t.Errorf("retry: %q, %v; want the recorded result", got, err)
	}
}
