// Package idem is the core of the idem toolkit for exactly-once effects:
// retried requests, redelivered messages and restarted processes do their
// work once.
//
// # Keys
//
// A Key names one operation: a Namespace (the consumer: "http", "charges",
// "email-job"), an optional scope (the caller it belongs to) and a value.
// Keys come from three places only, so every Key in a program is valid:
//
//   - ParseKey and ParseHeader read the Idempotency-Key header a client
//     sent (a raw token or an RFC 8941 sf-string; precise *KeyError values
//     for bad input);
//   - NewKey takes a value the application holds (a message id, an order
//     number) exactly as it is;
//   - a Minter derives keys from natural-key parts (tenant, entity,
//     operation) for calling downstream APIs: the same parts give the same
//     key in every process, forever.
//
// # Fingerprints
//
// A Fingerprint identifies the request a key was first used with, so that
// the same key with another request is caught (Mismatch) instead of
// replaying the wrong answer. FingerprintJSON and FingerprintRequest hash
// JSON by its RFC 8785 canonical form (CanonicalJSON), numbers by their
// exact value: member order, whitespace, escape style and the spelling of
// a number do not matter; array order does, and so do digits of a number
// that a double cannot hold (integers beyond 2^53).
//
// # Stores
//
// Store is the contract of the backends (store/memstore,
// store/sqlitestore, store/pgstore, store/redisstore). Begin reserves a key
// or reports what is recorded: Fresh (you own it, with a Lease carrying a
// fencing token), PriorResult, PriorError, Mismatch or InFlight. The owner
// settles the reservation with Commit, FailPermanent or FailTransient; a
// lapsed lease is taken over by the next Begin and the late owner's calls
// fail with ErrStaleToken. The SQL stores can also bind to the caller's
// transaction (TxBound), so that the record and the caller's writes commit
// together. Package idemtest is the conformance suite every backend passes.
//
// # Using it
//
// Do is the one-call form: it runs a function until it succeeds once per
// key and replays its result. Typed gives every outcome with typed values. Package
// idemhttp puts the same semantics in front of HTTP handlers, and cmd/idem
// in front of any HTTP API.
//
// A key a client chooses (an Idempotency-Key header, a message id of its
// making) names an operation only for that client: scope it by who the
// client is (Key.WithScope with the authenticated caller's id) before
// Begin or Do, or two callers sending the same value share one record, and
// one gets the other's result. idemhttp scopes keys itself (Config.KeyScope).
//
// Errors a caller branches on are sentinels (ErrInFlight, ErrMismatch,
// ErrStaleToken, ErrUnavailable, ErrIncompatibleState…) with typed errors
// carrying the details (*InFlightError, *MismatchError, *DecodeError,
// *StoredError…): test them with errors.Is and errors.As.
//
// The package imports only the standard library.
package idem
