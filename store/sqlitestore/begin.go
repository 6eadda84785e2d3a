package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idemgo/idem"
)

// maxBeginAttempts bounds Begin's rounds. A round is repeated only when
// another caller changed the record between Begin's statements (settled,
// released, took it over), so each repetition means someone else made
// progress; running out takes sustained contention on one key.
const maxBeginAttempts = 16

// begin is Store.Begin on q. It decides in at most three statements, each
// atomic on its own, and writes in at most one of them (always the last):
//
//  1. insert: a key without a record gets one, and the answer is Fresh.
//  2. read: the record is decided by idem.Decide, exactly as memstore does.
//     Replays, Mismatch and InFlight are answered from this read and write
//     nothing.
//  3. replace (the record has expired) or takeover (in progress, same
//     request, lease lapsed): a conditional UPDATE that re-checks, in the
//     statement, the condition the read saw. If it no longer holds, or the
//     read found no record, the record changed in between: start again.
func (s *Store) begin(ctx context.Context, q querier, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, err
	}
	retention, leaseTTL := opts.Durations(s.cfg.Retention, s.cfg.Lease)
	payload := req.RecordedPayload()
	clock := s.cfg.Now()
	now := clock.UnixMicro()
	token := idem.NewToken()
	leaseExpires := after(clock, leaseTTL)
	args := []any{
		string(key.Namespace()), key.Scope(), key.Value(), // ?1 ?2 ?3
		req.Fingerprint.Bytes(), string(payload), token, // ?4 ?5 ?6
		now, max(after(clock, retention), leaseExpires), leaseExpires, // ?7 ?8 ?9: the record lives at least as long as its lease
	}
	fresh := func(fence int64, takenOver bool) idem.Outcome {
		return idem.Outcome{
			Kind:      idem.Fresh,
			Lease:     idem.Lease{Token: token, Fence: fence, ExpiresAt: timeOf(leaseExpires), TTL: leaseTTL},
			TakenOver: takenOver,
		}
	}

	for range maxBeginAttempts {
		res, err := q.ExecContext(ctx, s.sql.insert, args...)
		if err != nil {
			return idem.Outcome{}, dbError(ctx, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return idem.Outcome{}, dbError(ctx, err)
		}
		if n == 1 {
			return fresh(1, false), nil
		}

		stored, err := scanRow(q.QueryRowContext(ctx, s.sql.read, args[:3]...))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // released or purged since the insert: insert again
		case err != nil:
			return idem.Outcome{}, dbError(ctx, err)
		}

		// An expired record counts as absent whatever it holds, so it is
		// decoded only when live: a row that does not decode blocks its
		// key (ErrUnavailable) until it expires, not for good.
		reserve, takeover := s.sql.replace, false
		if now < stored.expires {
			rec, err := stored.record(key)
			if err != nil {
				return idem.Outcome{}, readError(ctx, err)
			}
			o, t := idem.Decide(&rec, req.Fingerprint, timeOf(now))
			if !t {
				return o, nil
			}
			reserve, takeover = s.sql.takeover, true
		}
		var fence int64
		err = q.QueryRowContext(ctx, reserve, args...).Scan(&fence)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // the record changed since the read: decide again
		case err != nil:
			return idem.Outcome{}, dbError(ctx, err)
		}
		return fresh(fence, takeover), nil
	}
	return idem.Outcome{}, idem.Unavailable(errContended)
}

// readError maps an error of scanRecord: corruption is an unavailable
// store whatever ctx says, anything else is a database failure.
func readError(ctx context.Context, err error) error {
	var corrupt *corruptError
	if errors.As(err, &corrupt) {
		return idem.Unavailable(err)
	}
	return dbError(ctx, err)
}
