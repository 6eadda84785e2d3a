package idem

import "github.com/idemgo/idem/internal/canonjson"

// CanonicalLimits bounds the input of CanonicalJSON. Zero fields take the
// defaults: 8 MiB and a nesting depth of 128.
type CanonicalLimits = canonjson.Limits

// JSONError reports where and why CanonicalJSON rejected its input; its
// Unwrap returns one of the ErrJSON… sentinels.
type JSONError = canonjson.Error

// Errors of CanonicalJSON (and of the fingerprints built on it).
var (
	ErrJSONSyntax        = canonjson.ErrSyntax
	ErrJSONDuplicateName = canonjson.ErrDuplicateName
	ErrJSONInvalidUTF8   = canonjson.ErrInvalidUTF8
	ErrJSONLoneSurrogate = canonjson.ErrLoneSurrogate
	ErrJSONNumberRange   = canonjson.ErrNumberRange
	ErrJSONTooDeep       = canonjson.ErrTooDeep
	ErrJSONTooLarge      = canonjson.ErrTooLarge
)

// CanonicalJSON returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text src: members sorted, no insignificant whitespace, minimal
// string escapes, numbers in their shortest ECMAScript form. Documents that
// differ only in member order, whitespace or escape style give the same bytes;
// array order is kept.
//
// Input RFC 8785 cannot canonicalise is rejected with a *JSONError:
// duplicate member names (ErrJSONDuplicateName), invalid UTF-8
// (ErrJSONInvalidUTF8), lone surrogate escapes (ErrJSONLoneSurrogate),
// numbers beyond float64 (ErrJSONNumberRange), nesting deeper than
// lim.MaxDepth (ErrJSONTooDeep), input longer than lim.MaxBytes
// (ErrJSONTooLarge) and anything else that is not JSON (ErrJSONSyntax). A nil
// lim means the defaults. Numbers are IEEE-754 doubles, as RFC 8785 requires:
// integers beyond 2^53 lose precision (fingerprints keep it: see
// FingerprintJSON).
func CanonicalJSON(src []byte, lim *CanonicalLimits) ([]byte, error) {
	var l CanonicalLimits
	if lim != nil {
		l = *lim
	}
	return canonjson.Canonicalize(src, l)
}
