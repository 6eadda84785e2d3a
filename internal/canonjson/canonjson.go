package canonjson

import "sync"

// Default limits, used for zero fields of [Limits].
const (
	DefaultMaxBytes = 8 << 20 // 8 MiB
	DefaultMaxDepth = 128
)

// Limits bounds the input. Zero (or negative) fields take the defaults.
type Limits struct {
	// MaxBytes is the input size limit in bytes, whitespace included.
	// It defaults to DefaultMaxBytes.
	MaxBytes int

	// MaxDepth is the maximum nesting depth of arrays and objects: with
	// MaxDepth 1, [1] is accepted and [[1]] is not. Scalars at the top
	// level have depth 0. It defaults to DefaultMaxDepth.
	MaxDepth int
}

// withDefaults returns l with zero and negative fields replaced by defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Canonicalize returns the RFC 8785 canonical form of the JSON text src.
// On failure it returns nil and an [*Error].
func Canonicalize(src []byte, lim Limits) ([]byte, error) {
	out, err := AppendCanonical(make([]byte, 0, len(src)), src, lim)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonical appends the RFC 8785 canonical form of the JSON text src
// to dst and returns the extended slice. On failure it returns dst with its
// original length and an [*Error]; the spare capacity of dst may have been
// written to. src is not modified and dst must not overlap it.
func AppendCanonical(dst, src []byte, lim Limits) ([]byte, error) {
	return appendForm(dst, src, lim, false)
}

// AppendExact is AppendCanonical, except that a number whose RFC 8785 form
// does not have its exact value (an integer beyond 2^53 such as
// 9007199254740993, a value below the smallest double such as 1e-400,
// digits past a double's precision) is written with its exact value, in
// the same notation: 9007199254740993, 1e-400. Texts whose numbers all
// keep their value get RFC 8785's form; texts that differ in the value of
// a number get different forms (which is not RFC 8785's for them); texts
// that spell the same values differently (1e2, 100.0) get the same. It is
// the form requests are fingerprinted by, so that two requests differing
// only in such a number are not taken for one.
func AppendExact(dst, src []byte, lim Limits) ([]byte, error) {
	return appendForm(dst, src, lim, true)
}

// appendForm is AppendCanonical, or AppendExact when exact.
func appendForm(dst, src []byte, lim Limits, exact bool) ([]byte, error) {
	p := parserPool.Get().(*parser)
	p.exact = exact
	out, err := p.canonicalize(dst, src, lim.withDefaults())
	p.release()
	parserPool.Put(p)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// parserPool recycles the parser scratch buffers between calls.
var parserPool = sync.Pool{New: func() any { return new(parser) }}
