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

// row is a row of recordColumns as stored, not yet decoded.
type row struct {
	status                   string
	hash                     []byte
	request, result, errJSON []byte
	fence, created, expires  int64
	leaseExpires             sql.NullInt64
}

// scanRow reads a row of recordColumns without decoding it. It returns
// sql.ErrNoRows as is.
func scanRow(r *sql.Row) (row, error) {
	var w row
	err := r.Scan(&w.status, &w.hash, &w.request, &w.result, &w.errJSON, &w.fence, &w.created, &w.expires, &w.leaseExpires)
	return w, err
}

// scanRecord reads a row of recordColumns into an idem.Record for key. It
// returns sql.ErrNoRows as is; a row that does not decode gives a
// corruption error.
func scanRecord(r *sql.Row, key idem.Key) (idem.Record, error) {
	w, err := scanRow(r)
	if err != nil {
		return idem.Record{}, err
	}
	return w.record(key)
}

// record decodes w into an idem.Record for key. A row that does not decode
// (a fingerprint or stored error written by something else) gives a
// corruption error.
func (w *row) record(key idem.Key) (idem.Record, error) {
	rec := idem.Record{Key: key, Status: idem.Status(w.status), Fence: w.fence}
	var err error
	if rec.Fingerprint, err = idem.ParseFingerprint(w.hash); err != nil {
		return idem.Record{}, &corruptError{key: key, column: "request_hash", err: err}
	}
	rec.Request, rec.Result = w.request, w.result
	if w.errJSON != nil {
		var se idem.StoredError
		if err := json.Unmarshal(w.errJSON, &se); err != nil {
			return idem.Record{}, &corruptError{key: key, column: "error_payload", err: err}
		}
		rec.Error = &se
	}
	rec.CreatedAt, rec.ExpiresAt = timeOf(w.created), timeOf(w.expires)
	if w.leaseExpires.Valid {
		rec.LeaseExpiresAt = timeOf(w.leaseExpires.Int64)
	}
	return rec, nil
}
