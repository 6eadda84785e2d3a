package dedup

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"strconv"
	"testing"

	"github.com/zeebo/blake3"
)

// dedupVectors is testdata/dedup_key_vectors.json, produced by an
// independent BLAKE3 implementation for the tidaldb design.
type dedupVectors struct {
	Cases []struct {
		SessionHex string `json:"session_id_hex"`
		Seqno      string `json:"seqno"`
		OpHex      string `json:"op_hex"`
		OpRepeat   *struct {
			ByteHex string `json:"byte_hex"`
			Count   int    `json:"count"`
		} `json:"op_repeat"`
		DigestHex string `json:"digest_hex"`
		KeyHex    string `json:"key_hex"`
		KeyU128LE string `json:"key_u128_le_decimal"`
	} `json:"cases"`
}

// blake3Vectors is testdata/blake3_official_test_vectors.json, from the
// BLAKE3 reference repository.
type blake3Vectors struct {
	Key           string `json:"key"`
	ContextString string `json:"context_string"`
	Cases         []struct {
		InputLen  int    `json:"input_len"`
		Hash      string `json:"hash"`
		KeyedHash string `json:"keyed_hash"`
		DeriveKey string `json:"derive_key"`
	} `json:"cases"`
}

func loadJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// officialInput is the input of the official BLAKE3 vectors: the bytes
// 0, 1, …, 250 repeated.
func officialInput(n int) []byte {
	in := make([]byte, n)
	for i := range in {
		in[i] = byte(i % 251)
	}
	return in
}

// TestDeriveMatchesPublishedVectors pins D1: Derive reproduces every key of
// the Rust design's vectors, and the Key's bytes read little-endian are the
// design's u128.
func TestDeriveMatchesPublishedVectors(t *testing.T) {
	t.Parallel()
	var vs dedupVectors
	loadJSON(t, "testdata/dedup_key_vectors.json", &vs)
	if len(vs.Cases) == 0 {
		t.Fatal("no vectors loaded")
	}
	for i, c := range vs.Cases {
		session := [16]byte(mustHex(t, c.SessionHex))
		seq, err := strconv.ParseUint(c.Seqno, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		op := mustHex(t, c.OpHex)
		if c.OpRepeat != nil {
			op = bytes.Repeat(mustHex(t, c.OpRepeat.ByteHex), c.OpRepeat.Count)
		}

		got := Derive(session, seq, op)
		if got.String() != c.KeyHex {
			t.Errorf("case %d: Derive(%s, %d, %d bytes) = %s, want %s", i, c.SessionHex, seq, len(op), got, c.KeyHex)
		}
		if c.DigestHex[:32] != c.KeyHex {
			t.Errorf("case %d: vector's key %s is not the first 16 bytes of its digest %s", i, c.KeyHex, c.DigestHex)
		}
		// The whole digest, not only the half the key keeps: the vector's
		// input is laid out as Derive lays it out.
		in := make([]byte, 0, deriveHeader+len(op))
		in = append(in, session[:]...)
		in = binary.LittleEndian.AppendUint64(in, seq)
		in = append(in, op...)
		if sum := blake3.Sum256(in); hex.EncodeToString(sum[:]) != c.DigestHex {
			t.Errorf("case %d: BLAKE3(session ‖ seq ‖ op) = %x, vector's digest %s", i, sum, c.DigestHex)
		}

		// u128::from_le_bytes: byte 0 is the least significant.
		var be [16]byte
		for j := range got {
			be[15-j] = got[j]
		}
		if u := new(big.Int).SetBytes(be[:]).String(); u != c.KeyU128LE {
			t.Errorf("case %d: key as little-endian u128 = %s, want %s", i, u, c.KeyU128LE)
		}
	}
}

// TestBLAKE3MatchesOfficialVectors checks the BLAKE3 implementation Derive
// stands on against the reference vectors, in all three modes, both the
// default 32-byte output and the extended output.
func TestBLAKE3MatchesOfficialVectors(t *testing.T) {
	t.Parallel()
	var vs blake3Vectors
	loadJSON(t, "testdata/blake3_official_test_vectors.json", &vs)
	if len(vs.Cases) == 0 {
		t.Fatal("no vectors loaded")
	}
	for _, c := range vs.Cases {
		in := officialInput(c.InputLen)

		sum := blake3.Sum256(in)
		if got := hex.EncodeToString(sum[:]); got != c.Hash[:64] {
			t.Errorf("len %d: Sum256 = %s, want %s", c.InputLen, got, c.Hash[:64])
		}

		h := blake3.New()
		_, _ = h.Write(in)
		checkExtended(t, "hash", c.InputLen, h, c.Hash)

		kh, err := blake3.NewKeyed([]byte(vs.Key))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = kh.Write(in)
		checkExtended(t, "keyed_hash", c.InputLen, kh, c.KeyedHash)

		dh := blake3.NewDeriveKey(vs.ContextString)
		_, _ = dh.Write(in)
		checkExtended(t, "derive_key", c.InputLen, dh, c.DeriveKey)
	}
}

func checkExtended(t *testing.T, mode string, n int, h *blake3.Hasher, want string) {
	t.Helper()
	if got := hex.EncodeToString(h.Sum(nil)); got != want[:64] {
		t.Errorf("%s len %d: Sum = %s, want %s", mode, n, got, want[:64])
	}
	out := make([]byte, len(want)/2)
	_, _ = h.Digest().Read(out)
	if got := hex.EncodeToString(out); got != want {
		t.Errorf("%s len %d: extended output = %s, want %s", mode, n, got, want)
	}
}

// TestDeriveOnOfficialVectors runs Derive itself over the official inputs,
// read as session ‖ seq ‖ op, so that each of its paths (the short and
// one-chunk stack buffers, the pooled hasher for long operations) is held
// to the reference hash.
func TestDeriveOnOfficialVectors(t *testing.T) {
	t.Parallel()
	var vs blake3Vectors
	loadJSON(t, "testdata/blake3_official_test_vectors.json", &vs)
	paths := map[string]bool{}
	for _, c := range vs.Cases {
		if c.InputLen < deriveHeader {
			continue
		}
		in := officialInput(c.InputLen)
		session := [16]byte(in[:16])
		seq := binary.LittleEndian.Uint64(in[16:deriveHeader])
		got := Derive(session, seq, in[deriveHeader:])
		if want := c.Hash[:32]; got.String() != want {
			t.Errorf("len %d: Derive = %s, want %s", c.InputLen, got, want)
		}
		switch {
		case c.InputLen <= deriveSmall:
			paths["small"] = true
		case c.InputLen <= deriveChunk:
			paths["chunk"] = true
		default:
			paths["long"] = true
		}
	}
	if len(paths) != 3 {
		t.Errorf("vectors exercised paths %v, want small, chunk and long", paths)
	}
}

// TestDeriveIsDeterministic pins D1's determinism: the same inputs give the
// same key, also when the caller's op buffer is reused in between.
func TestDeriveIsDeterministic(t *testing.T) {
	t.Parallel()
	session := [16]byte{1, 2, 3}
	for _, n := range []int{0, 1, 104, 105, 1000, 1001, 9000} {
		op := officialInput(n)
		first := Derive(session, 99, op)
		scratch := bytes.Repeat([]byte{0xee}, n)
		_ = Derive(session, 100, scratch)
		if again := Derive(session, 99, op); again != first {
			t.Errorf("op of %d bytes: Derive gave %s, then %s", n, first, again)
		}
	}
}

// TestDeriveAllocatesNothing pins Derive's allocation contract on each path.
func TestDeriveAllocatesNothing(t *testing.T) {
	session := [16]byte{9}
	for _, n := range []int{0, 100, 1000, 5000} {
		if raceEnabled && deriveHeader+n > deriveChunk {
			continue // the race detector makes sync.Pool drop values
		}
		op := officialInput(n)
		if allocs := testing.AllocsPerRun(100, func() { Derive(session, 1, op) }); allocs != 0 {
			t.Errorf("op of %d bytes: Derive allocates %.1f times per call, want 0", n, allocs)
		}
	}
}

func TestKeyString(t *testing.T) {
	t.Parallel()
	k := Key{0x00, 0x01, 0xab, 15: 0xff}
	if got, want := k.String(), "0001ab000000000000000000000000ff"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
