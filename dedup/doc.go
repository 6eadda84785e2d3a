// Package dedup drops duplicate deliveries of replicated operations in
// bounded memory.
//
// Three pieces, usable alone or together:
//
//   - Key and Derive: a 128-bit operation key, the first 16 bytes of
//     BLAKE3(session id ‖ seqno as u64 little-endian ‖ operation bytes),
//     bit-compatible with the Rust design's IdempotencyKey (test vectors in
//     testdata/). Derive allocates nothing.
//   - Window: an exact least-recently-used set of the last N distinct keys.
//     CheckAndRecord is O(1) and never allocates; all memory (at most 40
//     bytes per key, 32.4 at N = 1,000,000) is taken by NewWindow, or by
//     the first CheckAndRecord of a zero Window. Exact
//     recency is the contract: a frequency-admission cache (TinyLFU and the
//     like) would refuse to remember one-off keys, which are exactly the
//     keys a de-dup window exists for.
//   - SeqTracker: per-session sequence high-water marks, unbounded in time:
//     a seqno at or below its session's mark is never applied again.
//
// Filter combines them the way the design's receiver does: the mark first,
// then the window. Keys the window has forgotten fall back to the mark, so a
// duplicate is dropped however old it is, provided each session's seqnos
// arrive in order (ShouldApply claims a seqno and raises the mark to it).
//
// Every exported type is safe for concurrent use, and its zero value is
// ready to use, as a sync.Mutex is: a zero Window or Filter remembers
// DefaultCapacity keys, a zero SeqTracker knows no session. Nothing in this
// package fails open or closed: there is no I/O, and the only error is a
// *CapacityError for a window capacity out of range, which NewWindowChecked
// and NewFilterChecked return (NewWindow and NewFilter, meant for a
// capacity written in the program, panic with it).
package dedup
