package dedup

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/zeebo/blake3"
)

// FuzzDerive checks Derive against a plain BLAKE3 hash of session ‖ seq
// (8 bytes little-endian) ‖ op, across the stack buffers and the pooled
// hasher (op is padded past their sizes), twice in a row so that a
// hasher's state never leaks into the next key; that op is not modified;
// and that the key's String is its 16 bytes in lowercase hex.
func FuzzDerive(f *testing.F) {
	var vs dedupVectors
	data, err := os.ReadFile("testdata/dedup_key_vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(data, &vs); err != nil {
		f.Fatal(err)
	}
	for _, c := range vs.Cases {
		session, _ := hex.DecodeString(c.SessionHex)
		seq, _ := strconv.ParseUint(c.Seqno, 10, 64)
		op, _ := hex.DecodeString(c.OpHex)
		pad := uint16(0)
		if c.OpRepeat != nil {
			op, _ = hex.DecodeString(c.OpRepeat.ByteHex)
			pad = uint16(c.OpRepeat.Count - 1) // the padding repeats byte(pad): only a seed, not the vector
		}
		f.Add(session, seq, op, pad)
	}
	for _, n := range []uint16{deriveBlock - deriveHeader, deriveBlock - deriveHeader + 1, deriveSmall - deriveHeader, deriveSmall - deriveHeader + 1,
		deriveChunk - deriveHeader, deriveChunk - deriveHeader + 1, 4096} {
		f.Add([]byte("session"), uint64(n), []byte{0xab}, n-1)
	}
	f.Fuzz(func(t *testing.T, s []byte, seq uint64, op []byte, pad uint16) {
		var session [16]byte
		copy(session[:], s)
		op = append(op, bytes.Repeat([]byte{byte(pad)}, int(pad)%3000)...)
		orig := bytes.Clone(op)
		for range 2 {
			in := append(append(session[:], binary.LittleEndian.AppendUint64(nil, seq)...), op...)
			sum := blake3.Sum256(in)
			got := Derive(session, seq, op)
			if !bytes.Equal(got[:], sum[:16]) {
				t.Fatalf("Derive(%x, %d, %d bytes) = %s, want %x", session, seq, len(op), got, sum[:16])
			}
			if !bytes.Equal(op, orig) {
				t.Fatalf("Derive modified op")
			}
			if s := got.String(); s != hex.EncodeToString(sum[:16]) {
				t.Fatalf("String() = %q", s)
			}
			op = op[:len(op)/2]
			orig = orig[:len(orig)/2]
		}
	})
}
