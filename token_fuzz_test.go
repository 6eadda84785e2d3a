package idem

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzAppendToken checks the lease token format that backends compare and
// store: AppendToken leaves dst as it was and appends exactly TokenLen
// lowercase hex digits, the process's prefix then a counter that only
// grows, so that no two tokens are equal.
func FuzzAppendToken(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("lease:"))
	f.Add(make([]byte, 0, 64))
	f.Fuzz(func(t *testing.T, dst []byte) {
		orig := bytes.Clone(dst)
		a := AppendToken(dst)
		b := AppendToken(dst[:len(dst):len(dst)])
		n := NewToken()
		if !bytes.Equal(a[:len(orig)], orig) || !bytes.Equal(b[:len(orig)], orig) || len(a) != len(orig)+TokenLen || len(b) != len(a) || len(n) != TokenLen {
			t.Fatalf("AppendToken(%q) = %q, %q; NewToken %q", orig, a, b, n)
		}
		ta, tb := string(a[len(orig):]), string(b[len(orig):])
		for _, tok := range []string{ta, tb, n} {
			raw, err := hex.DecodeString(tok)
			if err != nil || hex.EncodeToString(raw) != tok || !bytes.Equal(raw[:12], tokenPrefix[:]) {
				t.Fatalf("token %q is not lowercase hex of the process prefix and a counter", tok)
			}
		}
		// The counter grows: ta was made before tb, tb before n (the hex
		// of a fixed-width big-endian counter sorts as the number).
		if !(ta < tb && tb < n) {
			t.Fatalf("tokens %q, %q, %q do not grow", ta, tb, n)
		}
	})
}
