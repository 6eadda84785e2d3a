package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidParts is returned by Minter.Mint for an empty part list, a blank
// part or a part that is not valid UTF-8.
var ErrInvalidParts = errors.New("idem: invalid natural-key parts")

// mintPrefix starts every minted key value. It names the encoding version, so
// a future encoding can never produce the same key as this one.
const mintPrefix = "m1:"

// A Minter makes deterministic keys from natural-key parts (tenant, entity,
// operation…), for calling downstream APIs with keys that survive the loss of
// any local bookkeeping: the same parts in the same order give the same key in
// every process, on every machine, forever.
//
// The key value is "m1:" followed by the lowercase hex SHA-256 of a
// length-prefixed encoding of the namespace and the parts (67 printable ASCII
// characters), so ["ab","c"] and ["a","bc"] differ, and the same parts under
// another namespace give another key. Test vectors are in
// testdata/minter_vectors.json; they are part of the compatibility promise.
//
// A Minter is immutable and safe for concurrent use.
type Minter struct {
	ns Namespace
}

// NewMinter returns a Minter bound to namespace ns.
func NewMinter(ns Namespace) (*Minter, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	return &Minter{ns: ns}, nil
}

// Namespace returns the namespace the minter is bound to; empty for a nil
// *Minter.
func (m *Minter) Namespace() Namespace {
	if m == nil {
		return ""
	}
	return m.ns
}

// Mint returns the key for parts. It fails with an error satisfying
// errors.Is(err, ErrInvalidParts) when parts is empty or a part is blank or
// not valid UTF-8.
func (m *Minter) Mint(parts ...string) (Key, error) {
	if m == nil || m.ns == "" {
		return Key{}, fmt.Errorf("%w: a Minter from NewMinter is needed", ErrInvalidNamespace)
	}
	if len(parts) == 0 {
		return Key{}, fmt.Errorf("%w: no parts", ErrInvalidParts)
	}
	h := sha256.New()
	var n [8]byte
	write := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write("idem/mint/v1")
	write(string(m.ns))
	binary.BigEndian.PutUint64(n[:], uint64(len(parts)))
	h.Write(n[:])
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			return Key{}, fmt.Errorf("%w: part %d is blank", ErrInvalidParts, i)
		}
		if !utf8.ValidString(p) {
			return Key{}, fmt.Errorf("%w: part %d is not valid UTF-8", ErrInvalidParts, i)
		}
		write(p)
	}
	var sum [sha256.Size]byte
	return Key{ns: m.ns, value: mintPrefix + hex.EncodeToString(h.Sum(sum[:0]))}, nil
}
