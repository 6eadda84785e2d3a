package idem

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
)

// tokenPrefix is 96 random bits drawn once per process; tokenCounter
// numbers the tokens of this process.
var (
	tokenPrefix  [12]byte
	tokenCounter atomic.Uint64
)

func init() {
	_, _ = rand.Read(tokenPrefix[:]) // crypto/rand.Read never fails (Go 1.24+)
}

// NewToken returns a new lease token: 96 random bits drawn once per process
// followed by a 64-bit counter, in hex (TokenLen characters). Tokens are
// unique across processes and time, without a system call per token.
// Backends use one for every Fresh reservation, including takeovers, so
// that a token is never current twice even when a record is deleted and
// created again. Tokens are identifiers, not secrets.
func NewToken() string {
	var h [TokenLen]byte
	return string(AppendToken(h[:0]))
}

// TokenLen is the length of a token from NewToken or AppendToken.
const TokenLen = 40

// AppendToken appends a new token, as NewToken returns, to dst: for a
// backend that keeps the token in a buffer of its own.
func AppendToken(dst []byte) []byte {
	var b [20]byte
	copy(b[:12], tokenPrefix[:])
	binary.BigEndian.PutUint64(b[12:], tokenCounter.Add(1))
	return hex.AppendEncode(dst, b[:])
}
