package pgstore

import (
	"context"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/leftcalls"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the PostgreSQL idem.Store. Its own methods work in lease mode:
// each is one autocommitted statement on a pooled connection (PurgeExpired
// one per batch), so a reservation is visible to every process as soon as
// Begin returns. WithTx and WithSQLTx give views of the same store bound to
// a caller's transaction (transactional mode). A Store is safe for
// concurrent use.
type Store struct {
	pool  *pgxpool.Pool // nil: only WithTx and WithSQLTx work
	cfg   Config
	table table
	sql   queries
	lease binding // the lease-mode binding, on pool
	// left counts the work done for callers that have left (see Drain).
	left leftcalls.Counter
}

var _ idem.Store = (*Store)(nil)

// New returns a Store on pool configured by cfg (see Config for the
// defaults). It does no I/O: call Migrate, or run MigrationSQL with your
// own migration tool, before first use. The store does not own pool:
// closing it is the caller's business, after the last call on the store
// and, with Config.Pipeline, a Drain.
//
// pool may be nil for a store used only through WithTx and WithSQLTx (for
// example by a database/sql program); the Store's own methods (Migrate
// too) then fail with an error satisfying errors.Is(err,
// idem.ErrInvalidArgument), as do those of the zero Store.
// New reports an invalid cfg; its messages name the field.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	t, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, table: t, sql: newQueries(t)}
	s.lease = binding{s: s}
	switch {
	case pool != nil && cfg.Pipeline:
		s.lease.q = newPipeline(pool, cfg.PipelineLanes, cfg.PipelineDepth, &s.left)
	case pool != nil:
		s.lease.q = poolQuerier{pool}
	}
	return s, nil
}

// Table returns the table name the store uses, as configured.
func (s *Store) Table() string { return s.table.String() }

// Begin implements idem.Store. It is one statement, and one round trip,
// unless it races with another writer of the same key (see the package
// documentation).
func (s *Store) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	return s.lease.Begin(ctx, key, req, opts)
}

// Commit implements idem.Store: one UPDATE, fenced by the lease's token and
// fence, the in_progress status and expires_at; a lease that is not current
// gives an error satisfying errors.Is(err, idem.ErrStaleToken), unless the
// record is already committed by this lease with this very result (a
// repeated call), which succeeds.
func (s *Store) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	return s.lease.Commit(ctx, key, lease, result)
}

// FailPermanent implements idem.Store, fenced as Commit.
func (s *Store) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	return s.lease.FailPermanent(ctx, key, lease, e)
}

// FailTransient implements idem.Store: one DELETE, fenced as Commit.
func (s *Store) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	return s.lease.FailTransient(ctx, key, lease)
}

// Heartbeat implements idem.Store: one UPDATE, fenced as Commit.
func (s *Store) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	return s.lease.Heartbeat(ctx, key, lease, extend)
}

// PurgeExpired implements idem.Store: it deletes in batches of
// Config.PurgeBatch, one autocommitted statement each, until a batch comes
// up short. Records locked by a writer at that moment are skipped, not
// waited for. If a batch fails, the batches before it stay deleted and the
// error is returned with the count so far. With Config.Pipeline it runs
// on a connection of the pool, outside the batches of the other calls.
func (s *Store) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	b := s.lease
	if _, ok := b.q.(*pipeline); ok {
		// Not in a batch: a DELETE of PurgeBatch rows would hold up the
		// calls sharing it, and wait behind batches it has nothing to do
		// with.
		b.q = poolQuerier{s.pool}
	}
	return b.PurgeExpired(ctx, ns, asOf)
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	return s.lease.Get(ctx, key)
}
