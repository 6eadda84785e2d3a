package pgstore

import (
	"context"
	"time"

	"github.com/idemgo/idem"
	"github.com/jackc/pgx/v5/pgtype"
)

// maxBeginAttempts bounds how often Begin runs its statement. A second
// run is needed only when another writer changed the key between the
// statement's snapshot and its write; a third almost never.
const maxBeginAttempts = 4

// Begin implements idem.Store.
func (b binding) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	cfg := &b.s.cfg
	if err := idem.CheckBegin(key, req, opts, cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	payload := req.RecordedPayload()
	if err := checkJSONB("request", payload); err != nil { // after CheckBegin's JSON and UTF-8 checks
		return idem.Outcome{}, err
	}
	if b.q == nil {
		return idem.Outcome{}, errNoPool
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, ctxError("Begin", err, nil)
	}
	retention, leaseTTL := opts.Durations(cfg.Retention, cfg.Lease)
	ns, scope, value := keyArgs(key)
	lock := lockText(b.s.table, key)
	fp := req.Fingerprint.Bytes()
	for range maxBeginAttempts {
		now := b.now()
		token := idem.NewToken()
		leaseEnd := now.Add(leaseTTL)
		// pgtype's nullable types scan without database/sql's conversions
		// on pgx, and are sql.Scanners for database/sql.
		var (
			got                           pgtype.Bool
			newFence, curFence            pgtype.Int8
			status                        pgtype.Text
			hash, recReq, recRes, recErr  []byte
			created, expires, curLeaseEnd pgtype.Timestamptz
		)
		err := b.q.queryRow(ctx, b.s.sql.begin,
			[]any{ns, scope, value, fp, payload, now, now.Add(retention), leaseEnd, token, lock},
			&got, &newFence, &status, &hash, &recReq, &recRes, &recErr, &curFence, &created, &expires, &curLeaseEnd)
		if err != nil {
			return idem.Outcome{}, classify(ctx, "Begin", err)
		}
		if newFence.Valid {
			// Created (fence 1) or taken over: the caller owns the key. A
			// takeover replaced a live record whose lease had lapsed; a
			// record that was expired as a whole counts as absent.
			takenOver := status.String == string(idem.StatusInProgress) && expires.Time.After(now)
			return idem.Outcome{
				Kind:      idem.Fresh,
				Lease:     idem.Lease{Token: token, Fence: newFence.Int64, ExpiresAt: leaseEnd, TTL: leaseTTL},
				TakenOver: takenOver,
			}, nil
		}
		locked := got.Valid && !got.Bool // another transaction is writing the key
		if status.Valid && expires.Time.After(now) {
			rec, err := record(key, status.String, hash, recReq, recRes, recErr, curFence.Int64, created, expires, curLeaseEnd)
			if err != nil {
				return idem.Outcome{}, corruptError("Begin", "record", err)
			}
			o, takeover := idem.Decide(&rec, req.Fingerprint, now)
			if !takeover {
				return o, nil
			}
		}
		if locked {
			// The writer holds the key now, or will once its transaction
			// commits; its lease will be about as long as ours.
			return idem.Outcome{Kind: idem.InFlight, RetryAfter: cfg.Lease}, nil
		}
		// The record changed after the statement's snapshot was taken
		// (created, deleted or taken over by another writer): look again.
	}
	// Other writers keep changing the key: it is in flight, briefly.
	return idem.Outcome{Kind: idem.InFlight, RetryAfter: time.Second}, nil
}

// record builds an idem.Record from stored columns.
func record(key idem.Key, status string, hash, reqPayload, result, errPayload []byte, fence int64, created, expires, leaseEnd pgtype.Timestamptz) (idem.Record, error) {
	fp, err := idem.ParseFingerprint(hash)
	if err != nil {
		return idem.Record{}, err
	}
	rec := idem.Record{
		Key:         key,
		Status:      idem.Status(status),
		Fingerprint: fp,
		Request:     reqPayload,
		Result:      result,
		Fence:       fence,
		CreatedAt:   created.Time,
		ExpiresAt:   expires.Time,
	}
	if leaseEnd.Valid {
		rec.LeaseExpiresAt = leaseEnd.Time
	}
	if errPayload != nil {
		if rec.Error, err = decodeError(errPayload); err != nil {
			return idem.Record{}, err
		}
	}
	return rec, nil
}
