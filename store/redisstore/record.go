package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

// Fields of a record's hash. The scripts in scripts.go use the same names.
const (
	fieldStatus      = "st"      // idem.Status
	fieldFingerprint = "fp"      // idem.Fingerprint.Bytes()
	fieldRequest     = "req"     // the request payload, as given
	fieldResult      = "res"     // the committed result, as given
	fieldError       = "err"     // the stored error, as JSON
	fieldFence       = "fence"   // decimal
	fieldCreated     = "created" // Unix ms
	fieldExpires     = "exp"     // Unix ms: expires_at
	fieldLease       = "lease"   // Unix ms: lease expiry, read only while in_progress
	fieldToken       = "tok"     // the owner's lease token
	fieldTakenOver   = "tko"     // "1" when the reservation was a takeover, else absent
)

// recordFields are the fields Get reads, in the order decodeRecord expects.
var recordFields = [...]string{
	fieldStatus, fieldFingerprint, fieldRequest, fieldResult, fieldError,
	fieldFence, fieldCreated, fieldExpires, fieldLease,
}

// decodeRecord builds a record from the values of recordFields, as HMGET
// returns them. It returns nil when there is no record (no status), and an
// idem.ErrUnavailable error naming the field for a hash the scripts never
// write: a field that does not decode, a status other than the three, a
// committed record without its result or a failed one without its error.
func decodeRecord(rkey string, vals []any) (*idem.Record, error) {
	if len(vals) != len(recordFields) {
		return nil, replyError("get", vals)
	}
	str := func(i int) (string, bool) {
		s, ok := vals[i].(string)
		return s, ok
	}
	status, ok := str(0)
	if !ok {
		return nil, nil
	}
	rec := &idem.Record{Status: idem.Status(status)}
	switch rec.Status {
	case idem.StatusInProgress, idem.StatusCommitted, idem.StatusFailed:
	default:
		return nil, corruptError("get", rkey, fieldStatus, fmt.Errorf("unknown status %q", status))
	}
	fp, _ := str(1)
	var err error
	if rec.Fingerprint, err = idem.ParseFingerprint([]byte(fp)); err != nil {
		return nil, corruptError("get", rkey, fieldFingerprint, err)
	}
	if req, ok := str(2); ok {
		rec.Request = []byte(req)
	}
	if rec.Status == idem.StatusCommitted {
		res, ok := str(3)
		if !ok {
			return nil, corruptError("get", rkey, fieldResult, errMissing)
		}
		rec.Result = []byte(res)
	}
	if rec.Status == idem.StatusFailed {
		enc, ok := str(4)
		if !ok {
			return nil, corruptError("get", rkey, fieldError, errMissing)
		}
		var se idem.StoredError
		if err := json.Unmarshal([]byte(enc), &se); err != nil {
			return nil, corruptError("get", rkey, fieldError, err)
		}
		rec.Error = &se
	}
	if rec.Fence, err = intField(vals[5]); err != nil {
		return nil, corruptError("get", rkey, fieldFence, err)
	}
	if rec.CreatedAt, err = timeField(vals[6]); err != nil {
		return nil, corruptError("get", rkey, fieldCreated, err)
	}
	if rec.ExpiresAt, err = timeField(vals[7]); err != nil {
		return nil, corruptError("get", rkey, fieldExpires, err)
	}
	if rec.Status == idem.StatusInProgress {
		if rec.LeaseExpiresAt, err = timeField(vals[8]); err != nil {
			return nil, corruptError("get", rkey, fieldLease, err)
		}
	}
	return rec, nil
}

// errMissing is the cause of a corrupt record lacking a field its status
// needs.
var errMissing = errors.New("missing")

// timeField parses a field of Unix milliseconds.
func timeField(v any) (time.Time, error) {
	ms, err := intField(v)
	return timeOf(ms), err
}

// intField parses a decimal field.
func intField(v any) (int64, error) {
	n, ok := int64Of(v)
	if !ok {
		return 0, fmt.Errorf("not an integer: %#v", v)
	}
	return n, nil
}
