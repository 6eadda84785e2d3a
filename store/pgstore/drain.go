package pgstore

import "context"

// Drain waits until every statement the store sent in a batch
// (Config.Pipeline) for a caller that has since left (its context ended
// first: see the package documentation, "Pipelining") has been answered,
// and a reservation such a Begin made has been released; or until ctx
// ends, and then returns ctx's error. Call it after the last call on the
// store and before closing the pool: closing the pool cuts those releases
// off, and a reservation whose release it cuts off holds its key until
// its lease lapses. Drain does not stop the store: calls made meanwhile
// are left to the caller. Without Config.Pipeline no call outlives its
// caller, and Drain returns nil at once.
func (s *Store) Drain(ctx context.Context) error {
	return s.left.Idle(ctx)
}
