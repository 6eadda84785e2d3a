// Package idem is the core of the idem toolkit for exactly-once effects.
//
// It defines idempotency keys and namespaces, the header parser and the
// deterministic key minter, canonical-JSON request fingerprints, the Store
// contract that every backend implements, the typed wrapper and the one-call
// helper Do. The core imports only the standard library.
package idem
