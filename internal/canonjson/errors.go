package canonjson

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by this package is an [*Error] whose
// Unwrap method returns exactly one of these values.
var (
	// ErrSyntax reports input that is not JSON: unexpected or missing
	// characters, trailing data after the top-level value, a leading byte
	// order mark, raw control characters in strings, bad escapes and
	// malformed numbers.
	ErrSyntax = errors.New("canonjson: invalid JSON")

	// ErrDuplicateName reports an object with two members of the same name,
	// compared after unescaping.
	ErrDuplicateName = errors.New("canonjson: duplicate object member name")

	// ErrInvalidUTF8 reports input bytes that are not valid UTF-8.
	ErrInvalidUTF8 = errors.New("canonjson: invalid UTF-8")

	// ErrLoneSurrogate reports a \u escape in the range D800-DFFF that is
	// not part of a high-low surrogate pair.
	ErrLoneSurrogate = errors.New("canonjson: lone UTF-16 surrogate")

	// ErrNumberRange reports a number whose magnitude is too large for an
	// IEEE-754 binary64 value, so that it would round to infinity.
	ErrNumberRange = errors.New("canonjson: number out of range")

	// ErrTooDeep reports arrays and objects nested deeper than
	// Limits.MaxDepth.
	ErrTooDeep = errors.New("canonjson: nesting too deep")

	// ErrTooLarge reports input longer than Limits.MaxBytes.
	ErrTooLarge = errors.New("canonjson: input too large")
)

// Error reports where canonicalisation failed and why.
type Error struct {
	// Offset is the byte offset in the input where the fault was found:
	// the first offending byte, the opening quote of a duplicate name, the
	// backslash of a bad escape, the first byte of an out-of-range number,
	// the bracket that nests too deep, or the limit itself for input that
	// is too large.
	Offset int

	// Err is one of the sentinel errors of this package.
	Err error

	// detail is extra human-readable context for Error, such as the
	// duplicate name or the unexpected character.
	detail string
}

// Error returns a message such as
// `canonjson: duplicate object member name "a" at offset 17`.
func (e *Error) Error() string {
	msg := "canonjson: error"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.detail != "" {
		msg += " " + e.detail
	}
	return msg + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns the sentinel error, so that errors.Is works.
func (e *Error) Unwrap() error { return e.Err }

// maxQuoted bounds how many bytes of input are copied into an error message.
const maxQuoted = 64

// quoteInput quotes b for an error message, shortening long input at a rune
// boundary so that an attacker-sized name cannot blow up the message.
func quoteInput(b []byte) string {
	if len(b) <= maxQuoted {
		return strconv.Quote(string(b))
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strconv.Quote(string(b[:n])) + "..."
}
