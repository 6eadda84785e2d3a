// Package dedup drops duplicate deliveries of replicated operations in
// bounded memory.
//
// Use it on the receiving end of a stream whose sender numbers each
// session's operations (a replication log, a change feed, a client that
// resends after reconnecting): each operation is named by its session, its
// sequence number and its bytes, and a redelivery of one already applied is
// dropped. Memory is fixed by a number of keys, not a TTL, and nothing is
// shared between processes; a receiver that restarts restores its sessions'
// marks with SeqTracker.Advance. For messages named by a string key with no
// sequence (webhooks, queue messages), where a failed handler must release
// its key so that a redelivery runs, use package tracker in one process,
// or an idem.Store (package idem, or package consumer around a handler)
// across several.
//
// Three pieces, usable alone or together:
//
//   - Key and Derive: a 128-bit operation key, the first 16 bytes of
//     BLAKE3(session id ‖ seqno as u64 little-endian ‖ operation bytes),
//     bit-compatible with the IdempotencyKey of the Rust design this package
//     follows (test vectors in testdata/). Derive allocates nothing.
//   - Window: an exact least-recently-used set of the last N distinct keys;
//     a duplicate refreshes its key's recency, where the Rust design's code
//     (not its comment) forgets keys in first-seen order (see Window).
//     CheckAndRecord is O(1) and never allocates; all memory (at most 40
//     bytes per key, 32.4 at N = 1,000,000) is taken by NewWindow, or by
//     the first CheckAndRecord of a zero Window. Exact recency is the
//     contract: a frequency-admission cache (TinyLFU and the like) would
//     refuse to remember one-off keys, which are exactly the keys a de-dup
//     window exists for.
//   - SeqTracker: per-session sequence high-water marks, unbounded in time:
//     a seqno at or below its session's mark is never applied again.
//
// Filter combines them as a receiver should: the mark first, then the
// window. Keys the window has forgotten fall back to the mark, so a
// duplicate is dropped however old it is, provided each session's seqnos
// arrive in order (ShouldApply claims a seqno and raises the mark to it).
//
// # Ordering
//
// Filter and SeqTracker need each session's operations in seqno order, as
// one connection of a replication stream delivers them. A seqno that arrives
// after a higher one of its session is dropped as a duplicate, for good: an
// operation delivered out of order, or after a gap that a later seqno
// skipped, is never applied. Gaps are not detected either; a receiver that
// must notice one compares seq with SeqTracker.HighWater before it calls
// Accept. So keep one consumer per session (operations of different
// sessions may be handled concurrently, in any interleaving). When a
// session's operations may arrive in any order, use a Window of
// Derive(session, seq, op) alone: it drops the duplicates among the last N
// distinct operations, whatever their order.
//
// # Sessions
//
// A session id is 16 bytes: the bytes of a UUID, say, or the first 16 bytes
// of a hash (SHA-256, BLAKE3) of a longer identifier. Its marks are kept
// until SeqTracker.Forget; forget only a session that will send nothing
// more, since any of its seqnos then applies again, unless the window still
// remembers the operation.
//
// # Zero values, concurrency and errors
//
// Every exported type is safe for concurrent use, and its zero value is
// ready to use, as a sync.Mutex is: a zero Window or Filter remembers
// DefaultCapacity keys, a zero SeqTracker knows no session. There is
// nothing to start, stop or close. Nothing in this package fails open or
// closed: there is no I/O, and the only error is a *CapacityError for a
// window capacity out of range (test for it with errors.As), which
// NewWindowChecked and NewFilterChecked return (NewWindow and NewFilter,
// meant for a capacity written in the program, panic with it).
//
// An accepted operation counts as applied whether or not the caller manages
// to apply it: there is no way to take an Accept back, so a receiver whose
// apply can fail, and that needs the operation delivered again, does not
// rely on the sender's redelivery for it.
package dedup
