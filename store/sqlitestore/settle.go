package sqlitestore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idemgo/idem"
)

// The settle calls and Heartbeat are one conditional statement each: it
// changes the record only if the lease is current (in progress, same token
// and fence, not expired), and no change means idem.ErrStaleToken. Nothing
// is read first, so nothing can change in between.

func (s *Store) commit(ctx context.Context, q querier, key idem.Key, lease idem.Lease, result []byte) error {
	if err := s.checkCommit(key, lease, result); err != nil {
		return err
	}
	return s.change(ctx, q, s.sql.commit, key, lease, string(result))
}

// checkCommit checks the arguments of Commit.
func (s *Store) checkCommit(key idem.Key, lease idem.Lease, result []byte) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	return idem.CheckPayload("result", result, s.cfg.MaxPayload)
}

func (s *Store) failPermanent(ctx context.Context, q querier, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	stored, err := s.encodeError(key, lease, e)
	if err != nil {
		return err
	}
	return s.change(ctx, q, s.sql.failPermanent, key, lease, stored)
}

// encodeError checks the arguments of FailPermanent and returns e as it is
// stored.
func (s *Store) encodeError(key idem.Key, lease idem.Lease, e idem.StoredError) (string, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return "", err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	if err := idem.CheckPayload("error", b, s.cfg.MaxPayload); err != nil {
		return "", err
	}
	return string(b), nil
}

func (s *Store) failTransient(ctx context.Context, q querier, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	return s.change(ctx, q, s.sql.failTransient, key, lease)
}

func (s *Store) heartbeat(ctx context.Context, q querier, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	return s.extend(ctx, q, key, lease, extend)
}

// extend is heartbeat with its arguments checked.
func (s *Store) extend(ctx context.Context, q querier, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if extend <= 0 {
		extend = s.cfg.Lease
	}
	expires := after(s.cfg.Now(), extend)
	if err := s.change(ctx, q, s.sql.heartbeat, key, lease, expires); err != nil {
		return idem.Lease{}, err
	}
	return idem.Lease{Token: lease.Token, Fence: lease.Fence, ExpiresAt: timeOf(expires), TTL: extend}, nil
}

// change runs query, one of the owned-record statements, with the key, the
// lease, the clock and then value (if any) as arguments.
func (s *Store) change(ctx context.Context, q querier, query string, key idem.Key, lease idem.Lease, value ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	args := append([]any{
		string(key.Namespace()), key.Scope(), key.Value(), // ?1 ?2 ?3
		lease.Token, lease.Fence, s.now(), // ?4 ?5 ?6
	}, value...) // ?7
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return dbError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return dbError(ctx, err)
	}
	if n == 0 {
		return idem.ErrStaleToken
	}
	return nil
}
