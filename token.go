package idem

import (
	"crypto/rand"
	"encoding/hex"
)

// NewToken returns a new random lease token (128 bits, hex). Backends use it
// for every Fresh reservation, including takeovers, so that a token is never
// current twice even when a record is deleted and created again.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
