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
	p := parserPool.Get().(*parser)
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
