// Package tracker is an in-process reserve / complete / release tracker of
// idempotency keys with a TTL: a consumer reserves a message's key before
// handling it, so that a duplicate delivery is dropped instead of running
// its effects twice.
//
// Use it when one process receives the duplicates (a webhook endpoint or a
// queue consumer running as a single instance) and losing the tracked keys
// on a restart is acceptable. It
// keeps no results to replay and shares nothing between processes: for
// several instances, or to replay a recorded answer, use an idem.Store
// (package idem, with idem.Do, or package idemhttp for HTTP). Package
// consumer wraps a message handler with either (consumer.TrackerLedger,
// consumer.StoreLedger), in the right order. For replication streams that
// number each session's operations, package dedup drops duplicates in a
// fixed amount of memory without a TTL.
//
// # Lifecycle
//
//	tr := tracker.New(tracker.Config{TTL: 10 * time.Minute})
//	tr.Start()      // until Start, every delivery runs: see Fail-open
//	defer tr.Stop() // or Close, as an io.Closer
//
// New only configures; Start starts the sweeper goroutine and the tracking;
// Stop stops the sweeper and drops every key. A Tracker can be started
// again after Stop. The zero Tracker is one from New(Config{}), not yet
// started. A started Tracker that is no longer used must be stopped, or its
// sweeper keeps it, and its keys, in memory.
//
// # Contract
//
// Keys live in scopes (a scope names a consumer or a tenant; the same key in
// two scopes is two keys). Scopes and keys are any strings, the empty string
// included; the tracker does not check them. For each key:
//
//   - Reserve is atomic: of many simultaneous first deliveries exactly one
//     gets true and runs; the others get false and treat the delivery as a
//     duplicate. Completed and Reserved tell such a loser whether the work
//     is done (acknowledge the duplicate) or still running (put it off, by
//     as long as Reserved reports).
//   - Complete, after success, keeps the key (Seen true, Reserve false) and
//     refreshes its TTL.
//   - Release, after a failure, frees the key so that a redelivery, or a
//     genuinely new submission, runs.
//   - A reservation neither completed nor released within the TTL is
//     abandoned (its holder crashed or hung) and the key is free again.
//   - Expiry is decided from each key's stored deadline on every call; the
//     sweeper started by Start only reclaims the memory of expired keys
//     (unless a Config.Now goes backwards: see there).
//
// The right way round for a consumer is reserve, handle, complete, and
// release on error; never mark a key before handling it, or a failed
// message is swallowed instead of redelivered. A handler that may panic
// releases its key in a deferred call, or the key stays reserved, and every
// redelivery is turned away, until the TTL passes.
//
// # Retries
//
// A retry that already owns a key (the same delivery, trying again) must
// not be turned away as a duplicate of itself. Ownership is proven by a
// Token: Acquire is Reserve that also returns the reservation's Token, and
// a retry calls ReserveOwned with it, which succeeds for the owner (and
// refreshes the reservation's TTL, so a slow series of retries is not taken
// for an abandoned reservation) and fails for anybody else. Tokens are
// minted by the tracker, so a caller cannot claim ownership it was not
// granted (a Token is unique in the process: one from another Tracker owns
// nothing), and CompleteOwned and ReleaseOwned let an owner finish without
// touching a reservation that has lapsed and been taken over by another
// delivery.
//
// # Fail-open
//
// A Tracker that is not started (New returns one; Stop leaves one; the zero
// Tracker is one), and a nil *Tracker, never panics and never blocks a
// delivery: Reserve, Acquire and ReserveOwned return true, Seen, Completed
// and Reserved report nothing, and Complete, Release and the Owned variants
// do nothing. A program that forgets Start therefore runs every duplicate;
// a test that checks one duplicate is dropped catches that. Stop drops
// every key.
//
// # Configuration and errors
//
// Config's zero value is valid: every field has a default, which its doc
// states (TTL, for one, defaults to an hour). New
// panics with a *ConfigError for an invalid Config, as a mistake in the
// program; NewChecked returns the *ConfigError instead, for a Config built
// from input (test for it with errors.As; its Field names the field). No
// other call returns an error: a duplicate is a false from Reserve, not an
// error. Tests control time with Config.Now (see the example of Config).
//
// # Concurrency and memory
//
// Every method is safe for concurrent use. Keys are spread over a
// power-of-two number of shards, each a mutex-guarded map, so calls on
// different keys rarely contend. A call allocates nothing beyond map growth;
// the tracker keeps the caller's scope and key strings (not copies) for as
// long as it tracks them. Memory grows with the number of live keys, which
// is the rate of new keys times the TTL: about 100 bytes per key (measured
// at a million keys) plus its strings. An expired key is reclaimed at most
// SweepInterval after it expires. A Go map keeps the memory of the most keys
// it ever held, so a sweep that leaves a shard's map under a quarter of that
// peak (when the peak was 8 keys or more) moves the live keys to a fresh
// map: after a burst, the memory follows the live keys back down.
package tracker
