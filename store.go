package idem

import (
	"context"
	"reflect"
	"time"
)

// Defaults shared by every backend.
const (
	// DefaultRetention is how long a record is kept (and replayed) after Begin
	// when neither the store's configuration nor BeginOpts says otherwise.
	DefaultRetention = 24 * time.Hour
	// DefaultLease is how long a Fresh reservation is owned before another
	// Begin of the same key may take it over.
	DefaultLease = 30 * time.Second
	// DefaultMaxPayload is the largest request or result payload a store
	// accepts, in bytes.
	DefaultMaxPayload = 4 << 20
)

// Store is the contract every backend implements (memstore, sqlitestore,
// pgstore, redisstore). Most callers use Do or Typed on top of it; the HTTP
// middleware uses it directly. Every backend passes the conformance suite in
// package idemtest.
//
// A store keeps one record per Key. Begin creates the record (state
// in_progress) or answers from the existing one; the owner of a Fresh
// reservation settles it with exactly one of Commit, FailPermanent or
// FailTransient, and may extend its lease with Heartbeat meanwhile.
//
// Lease mode: a Fresh reservation is visible to every process at once. It
// carries a lease that expires; after that a Begin with the same fingerprint
// takes the record over, which bumps the fence and hands out a new token. The
// settle calls and Heartbeat require the current Lease (token and fence) and
// fail with ErrStaleToken, changing nothing, when it is not current. A
// rejected caller never releases a reservation it does not own.
//
// Transactional mode (SQL backends bound to the caller's transaction): the
// record is written in the caller's transaction, so it appears, is settled
// and disappears together with the caller's own writes.
//
// Expiry is decided from the stored expires_at, not only by a backend's TTL:
// a record past it counts as absent everywhere (Begin, Get). A record lives
// at least as long as its lease: Begin and Heartbeat move expires_at to the
// lease's end when that is later, so that a run outlasting the retention
// (a lease longer than it, or heartbeats past it) is never joined by a
// second one. The retention still counts from Begin: a key settled after
// it is kept only until its last lease would have ended. A takeover is a
// Begin like any other: it sets expires_at to now plus its own retention,
// or to its lease's end if later, whatever the record's expires_at was
// (which may move it earlier); CreatedAt may stay that of the first Begin
// or become the takeover's.
//
// Errors: an unreachable or failing backend gives an error satisfying
// errors.Is(err, ErrUnavailable); a cancelled or expired ctx gives an error
// satisfying errors.Is(err, ctx.Err()). Invalid arguments give ErrInvalidKey,
// ErrInvalidFingerprint, ErrInvalidOptions, ErrInvalidPayload or
// *PayloadTooLargeError (payloads, results and encoded
// stored errors all count against a backend's limit; invalid arguments are
// rejected before anything is sent to a server). A failed call never leaves
// a partial write, but its outcome may be unknown: when a backend fails
// after the server applied a write (a lost reply, a context cancelled while
// the statement ran), the write stands. Repeating a settle call with the
// same lease is then safe; a backend may answer the repetition with nil
// (same value) or ErrStaleToken. In transactional mode, any error from the
// store must abort the caller's transaction (some databases have already
// rolled it back).
//
// Buffers: a store keeps copies of what it is given, never the caller's
// slices (Request.Payload, a result), so a caller may reuse its buffers as
// soon as a call returns; and what Begin and Get return (Result, Request)
// belongs to the caller, who may change it without touching the record.
type Store interface {
	// Begin reserves key for req, or reports what is already recorded:
	//   Fresh        no live record, or an in-flight one whose lease expired
	//                (takeover, fence+1): the caller owns the key now;
	//   PriorResult  committed with the same fingerprint: replay Result;
	//   PriorError   failed permanently with the same fingerprint: replay Error;
	//   Mismatch     a record with another fingerprint (in any state; this
	//                takes precedence over InFlight, as far as the record is
	//                visible: a reservation still uncommitted in another
	//                transaction, or being created this very moment, is
	//                InFlight whatever its fingerprint);
	//   InFlight     in progress under a live lease held by someone else;
	//                RetryAfter is a hint (the rest of the lease when known,
	//                else the store's lease duration).
	Begin(ctx context.Context, key Key, req Request, opts *BeginOpts) (Outcome, error)

	// Commit records result (a JSON document, replayed byte for byte) as the
	// outcome of the reservation held by lease.
	Commit(ctx context.Context, key Key, lease Lease, result []byte) error

	// FailPermanent records e as the outcome: later Begins with the same
	// fingerprint get PriorError. e counts against the payload limit by
	// its JSON encoding (encoding/json), as CheckPayload("error", …)
	// measures it.
	FailPermanent(ctx context.Context, key Key, lease Lease, e StoredError) error

	// FailTransient deletes the reservation, so the next Begin is Fresh.
	FailTransient(ctx context.Context, key Key, lease Lease) error

	// Heartbeat extends the lease to now+extend (the store's lease duration
	// when extend is 0 or negative) and returns the extended lease.
	Heartbeat(ctx context.Context, key Key, lease Lease, extend time.Duration) (Lease, error)

	// PurgeExpired deletes the records of namespace ns whose expires_at is at
	// or before asOf and returns how many it deleted. Other namespaces are
	// never touched. asOf is meant to be the present (time.Now(), or the
	// store's clock): a later one deletes records still live, in-progress
	// ones included, whose owners then lose their keys to a retry that runs
	// the work again.
	PurgeExpired(ctx context.Context, ns Namespace, asOf time.Time) (int, error)

	// Get returns the live record of key, for operators and tests. A missing
	// or expired record gives ErrNotFound.
	Get(ctx context.Context, key Key) (Record, error)
}

// Request is what Begin records about the operation a key stands for.
type Request struct {
	// Fingerprint identifies the request; a later Begin with the same key and
	// another fingerprint gets Mismatch. Required.
	Fingerprint Fingerprint
	// Payload is a JSON document recorded for diagnosis and returned as
	// RecordedRequest on Mismatch. Optional: nil is recorded as JSON null.
	Payload []byte
}

// BeginOpts are per-call options of Begin. A nil *BeginOpts means defaults.
type BeginOpts struct {
	// Retention overrides the store's retention for this record: it is kept
	// until now+Retention, or its lease's end if later. Zero means the
	// store's default.
	Retention time.Duration
	// Lease overrides the store's lease duration for this reservation. Zero
	// means the store's default.
	Lease time.Duration
}

// Durations returns the retention and the lease a Begin with o uses, given
// the store's defaults: o's when set, the defaults otherwise. o may be nil.
func (o *BeginOpts) Durations(retention, lease time.Duration) (time.Duration, time.Duration) {
	if o != nil {
		if o.Retention > 0 {
			retention = o.Retention
		}
		if o.Lease > 0 {
			lease = o.Lease
		}
	}
	return retention, lease
}

// Lease is the proof of ownership of a Fresh reservation. Pass it unchanged
// to Commit, FailPermanent, FailTransient and Heartbeat.
type Lease struct {
	// Token is an opaque random value identifying this owner.
	Token string
	// Fence increases by one each time a live record is taken over after its
	// lease lapsed. A record created anew (after FailTransient, expiry or
	// purge) may start again from 1: the fence orders the owners of one
	// record's life, while Token is what identifies an owner.
	Fence int64
	// ExpiresAt is when another Begin may take the key over.
	ExpiresAt time.Time
	// TTL is the length of the lease as granted. KeepAlive extends the
	// lease by it; Heartbeat with extend 0 uses the store's lease instead.
	TTL time.Duration
}

// Status is the state of a record.
type Status string

// Record states.
const (
	StatusInProgress Status = "in_progress"
	StatusCommitted  Status = "committed"
	StatusFailed     Status = "failed_permanent"
)

// Record is a stored record as Get reports it.
type Record struct {
	Key         Key
	Status      Status
	Fingerprint Fingerprint
	Request     []byte       // the recorded request payload (JSON)
	Result      []byte       // the committed result (JSON), when committed
	Error       *StoredError // the stored error, when failed
	Fence       int64
	CreatedAt   time.Time
	ExpiresAt   time.Time
	// LeaseExpiresAt is when the current reservation may be taken over; zero
	// unless the record is in progress.
	LeaseExpiresAt time.Time
}

// TxBound is an optional interface of stores bound to a caller's database
// transaction (transactional mode: pgstore's and sqlitestore's WithTx). In
// that mode the transaction, not the lease, protects the reservation, so
// KeepAlive (and with it Do and the HTTP middleware) does not extend leases,
// and the store must be used by one goroutine at a time, like the
// transaction itself.
type TxBound interface {
	// TxBound reports whether the store is bound to a transaction.
	TxBound() bool
}

// IsNilStore reports whether s is nil, or a nil pointer of a store type,
// such as a store constructor returns with its error: either would panic
// in its first call. Packages that take a Store refuse both with it.
func IsNilStore(s Store) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
