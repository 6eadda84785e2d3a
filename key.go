package idem

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits of namespaces, keys and scopes.
const (
	// MaxNamespaceLen is the longest allowed Namespace, in bytes.
	MaxNamespaceLen = 64
	// MaxKeyLen is the longest allowed key value, in bytes.
	MaxKeyLen = 255
	// MaxScopeLen is the longest allowed key scope, in bytes.
	MaxScopeLen = 128
)

// Namespace names a logical consumer of a store (a service, a queue, the
// HTTP proxy). Records of different namespaces never interact: the same key
// value under two namespaces is two records, and PurgeExpired is scoped to one
// namespace. A valid namespace is 1–64 bytes of a-z, 0-9, '-' and '_'.
//
// The zero Namespace is invalid; build one with NewNamespace or
// MustNamespace.
type Namespace string

// NewNamespace validates s and returns it as a Namespace. The error satisfies
// errors.Is(err, ErrInvalidNamespace).
func NewNamespace(s string) (Namespace, error) {
	if err := Namespace(s).Validate(); err != nil {
		return "", err
	}
	return Namespace(s), nil
}

// MustNamespace is like NewNamespace but panics on an invalid name. It is
// meant for package-level constants, where an invalid name is a programming
// error, never for external input.
func MustNamespace(s string) Namespace {
	ns, err := NewNamespace(s)
	if err != nil {
		panic(err)
	}
	return ns
}

// Validate reports whether ns is a valid namespace.
func (ns Namespace) Validate() error {
	switch {
	case len(ns) == 0:
		return fmt.Errorf("%w: empty", ErrInvalidNamespace)
	case len(ns) > MaxNamespaceLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidNamespace, len(ns), MaxNamespaceLen)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: a-z 0-9 - _)", ErrInvalidNamespace, string(ns), c, i)
		}
	}
	return nil
}

// Key identifies one operation in a store: a namespace, an optional scope
// (the caller the key belongs to, for example a hash of the HTTP
// Authorization header) and a value of 1–255 bytes of UTF-8 without control
// characters.
//
// Keys come only from the header parser (ParseKey, ParseHeader), from
// NewKey and from a Minter, so every Key in a program satisfies these
// rules. The zero Key is invalid and is rejected by every store.
type Key struct {
	ns    Namespace
	scope string
	value string
}

// Namespace returns the namespace of k.
func (k Key) Namespace() Namespace { return k.ns }

// Scope returns the scope of k; empty when the key is not scoped.
func (k Key) Scope() string { return k.scope }

// Value returns the key value: the header value or the minted key.
func (k Key) Value() string { return k.value }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.ns == "" }

// String returns "namespace/value", or "namespace/scope/value" when scoped.
// It is meant for logs; stores keep the three parts apart.
func (k Key) String() string {
	if k.scope == "" {
		return string(k.ns) + "/" + k.value
	}
	return string(k.ns) + "/" + k.scope + "/" + k.value
}

// WithScope returns k scoped to scope: the same value under another scope is
// another record, so no caller can read or probe another caller's records.
// A scope is at most 128 bytes of UTF-8 without control characters; an empty
// scope removes the scope.
func (k Key) WithScope(scope string) (Key, error) {
	if len(scope) > MaxScopeLen {
		return Key{}, &KeyError{Kind: ErrKeyTooLong, Detail: fmt.Sprintf("scope is %d bytes, the limit is %d", len(scope), MaxScopeLen)}
	}
	if err := checkText(scope, "scope"); err != nil {
		return Key{}, err
	}
	k.scope = scope
	return k, nil
}

// NewKey returns the key of namespace ns whose value is value exactly as
// given, for keys an application already holds: a message id, an order
// number. Unlike ParseKey, which reads an Idempotency-Key header, it trims
// no spaces, reads no sf-string quotes and accepts commas, so that two
// different values are always two different keys. A value must be 1–255
// bytes of UTF-8 without control characters; derive a key from a longer
// or composite natural key with a Minter.
//
// Errors are *KeyError values (errors.Is(err, ErrInvalidKey) holds):
// ErrKeyEmpty, ErrKeyTooLong, ErrKeyControl for control characters and
// ErrKeyMalformed for invalid UTF-8. An invalid namespace gives an error
// satisfying errors.Is(err, ErrInvalidNamespace).
func NewKey(ns Namespace, value string) (Key, error) { return newKey(ns, value) }

// newKey validates value and builds a key. Every constructor ends here.
func newKey(ns Namespace, value string) (Key, error) {
	if err := ns.Validate(); err != nil {
		return Key{}, err
	}
	switch {
	case len(value) == 0:
		return Key{}, &KeyError{Kind: ErrKeyEmpty, Detail: "key is empty"}
	case len(value) > MaxKeyLen:
		return Key{}, &KeyError{Kind: ErrKeyTooLong, Detail: fmt.Sprintf("key is %d bytes, the limit is %d", len(value), MaxKeyLen)}
	}
	if err := checkText(value, "key"); err != nil {
		return Key{}, err
	}
	return Key{ns: ns, value: value}, nil
}

// checkText rejects invalid UTF-8 and control characters.
func checkText(s, what string) error {
	if printableASCII(s) {
		return nil
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return &KeyError{Kind: ErrKeyMalformed, Detail: fmt.Sprintf("%s has invalid UTF-8 at byte %d", what, i)}
			}
		}
		if unicode.IsControl(r) {
			return &KeyError{Kind: ErrKeyControl, Detail: fmt.Sprintf("%s has control character %U at byte %d", what, r, i)}
		}
	}
	return nil
}

// printableASCII reports whether s is all printable ASCII (0x20 to 0x7E),
// as keys and scopes almost always are: such text needs no decoding.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// Errors about keys. Every invalid-key error is a *KeyError that also
// satisfies errors.Is(err, ErrInvalidKey); ErrKeyMissing is not an invalid
// key (a request without a key may be allowed).
var (
	ErrInvalidNamespace = errors.New("idem: invalid namespace")
	ErrInvalidKey       = errors.New("idem: invalid idempotency key")
	ErrKeyMissing       = errors.New("idem: idempotency key missing")
	ErrKeyEmpty         = errors.New("idem: idempotency key empty")
	ErrKeyTooLong       = errors.New("idem: idempotency key too long")
	ErrKeyControl       = errors.New("idem: idempotency key has control characters")
	ErrKeyMalformed     = errors.New("idem: idempotency key malformed")
	ErrKeyMultiple      = errors.New("idem: several idempotency keys")
)

// KeyError reports why a key was rejected. Kind is one of ErrKeyEmpty,
// ErrKeyTooLong, ErrKeyControl, ErrKeyMalformed or ErrKeyMultiple; Detail is
// a human-readable explanation that never echoes the whole key.
type KeyError struct {
	Kind   error
	Detail string
}

func (e *KeyError) Error() string { return "idem: invalid idempotency key: " + e.Detail }

// Unwrap returns Kind.
func (e *KeyError) Unwrap() error { return e.Kind }

// Is reports true for ErrInvalidKey, so callers can test for any invalid key.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }
