package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/idemgo/idem"
)

// corruptError reports a stored row that does not decode: it was written by
// something other than this package. A store that cannot read its own
// records is failing, so the error callers see wraps it in
// idem.ErrUnavailable, as pgstore and redisstore do (see readError); the
// corruptError stays reachable with errors.As, and so does its cause.
type corruptError struct {
	key    idem.Key
	column string
	err    error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("sqlitestore: corrupt record %s: column %s: %v", e.key, e.column, e.err)
}

func (e *corruptError) Unwrap() error { return e.err }

// scanRecord reads a row of recordColumns into an idem.Record for key. It
// returns sql.ErrNoRows as is; a row that does not decode (a fingerprint or
// stored error written by something else) gives a corruption error.
func scanRecord(row *sql.Row, key idem.Key) (idem.Record, error) {
	var (
		status                   string
		hash                     []byte
		request, result, errJSON []byte
		leaseExpires             sql.NullInt64
		rec                      = idem.Record{Key: key}
		created, expires         int64
	)
	err := row.Scan(&status, &hash, &request, &result, &errJSON, &rec.Fence, &created, &expires, &leaseExpires)
	if err != nil {
		return idem.Record{}, err
	}
	rec.Status = idem.Status(status)
	if rec.Fingerprint, err = idem.ParseFingerprint(hash); err != nil {
		return idem.Record{}, &corruptError{key: key, column: "request_hash", err: err}
	}
	rec.Request, rec.Result = request, result
	if errJSON != nil {
		var se idem.StoredError
		if err := json.Unmarshal(errJSON, &se); err != nil {
			return idem.Record{}, &corruptError{key: key, column: "error_payload", err: err}
		}
		rec.Error = &se
	}
	rec.CreatedAt, rec.ExpiresAt = timeOf(created), timeOf(expires)
	if leaseExpires.Valid {
		rec.LeaseExpiresAt = timeOf(leaseExpires.Int64)
	}
	return rec, nil
}
