package redisstore

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// FuzzDecodeRecord checks decodeRecord on any hash a Redis server could
// return: a hash without a status is no record; exactly the hashes the
// scripts never write (a field that does not decode, a status other than
// the three, a committed record without its result, a failed one without
// its error) make an ErrUnavailable error naming the field, never a panic
// or a half-read record; and a record that decodes holds exactly what its
// fields say (the result only when committed, the error only when failed,
// the lease only when in progress), times in UTC. nils is a bit mask of
// the fields that are absent.
func FuzzDecodeRecord(f *testing.F) {
	fp := idem.FingerprintBytes([]byte("x")).Bytes()
	f.Add(uint16(0), "committed", string(fp), "null", `{"id":1}`, "", "1", "1700000000000", "1700000060000", "")
	f.Add(uint16(1<<8), "failed_permanent", string(fp), "{}", "", `{"class":"c","message":"m"}`, "2", "0", "-1", "")
	f.Add(uint16(0), "in_progress", string(fp), "null", "", "", "3", "1", "2", "3")
	f.Add(uint16(1), "", "", "", "", "", "", "", "", "")
	f.Add(uint16(0), "failed_permanent", "short", "", "", "{", "x", "9223372036854775808", "", "")
	f.Add(uint16(0), "bogus", string(fp), "null", `{"id":1}`, "", "1", "1700000000000", "1700000060000", "")
	f.Add(uint16(1<<3), "committed", string(fp), "null", "", "", "1", "1700000000000", "1700000060000", "")
	f.Add(uint16(1<<4), "failed_permanent", string(fp), "null", `{"id":1}`, "", "1", "1700000000000", "1700000060000", "")
	f.Fuzz(func(t *testing.T, nils uint16, status, fpb, req, res, enc, fence, created, expires, lease string) {
		fields := []string{status, fpb, req, res, enc, fence, created, expires, lease}
		vals := make([]any, len(fields))
		for i, s := range fields {
			if nils&(1<<i) == 0 {
				vals[i] = s
			}
		}
		rec, err := decodeRecord("rk", vals)
		if vals[0] == nil {
			if rec != nil || err != nil {
				t.Fatalf("no status: %#v, %v", rec, err)
			}
			return
		}
		st := idem.Status(status)
		wantFP, fpErr := idem.ParseFingerprint([]byte(fpb))
		n := func(i int) (int64, bool) {
			if vals[i] == nil {
				return 0, false
			}
			v, err := strconv.ParseInt(fields[i], 10, 64)
			return v, err == nil
		}
		fenceN, ok1 := n(5)
		createdN, ok2 := n(6)
		expN, ok3 := n(7)
		leaseN, ok4 := n(8)
		var se idem.StoredError
		corrupt := st != idem.StatusInProgress && st != idem.StatusCommitted && st != idem.StatusFailed ||
			vals[1] == nil || fpErr != nil || !ok1 || !ok2 || !ok3 ||
			st == idem.StatusInProgress && !ok4 ||
			st == idem.StatusCommitted && vals[3] == nil ||
			st == idem.StatusFailed && (vals[4] == nil || json.Unmarshal([]byte(enc), &se) != nil)
		if err != nil {
			if rec != nil || !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "field ") {
				t.Fatalf("decodeRecord: %#v, %v; want an ErrUnavailable error naming a field, alone", rec, err)
			}
			if !corrupt {
				t.Fatalf("decodeRecord refuses a record the scripts could write: %v", err)
			}
			return
		}
		if corrupt {
			t.Fatalf("decodeRecord accepts a hash the scripts never write: %q (absent: %09b) decodes to %#v", fields, nils, rec)
		}
		switch {
		case rec.Status != st || fpErr != nil || rec.Fingerprint != wantFP:
			t.Fatalf("status %q fingerprint %x decode to %q %v (%v)", status, fpb, rec.Status, rec.Fingerprint, fpErr)
		case !ok1 || !ok2 || !ok3 || rec.Fence != fenceN || !rec.CreatedAt.Equal(time.UnixMilli(createdN)) || !rec.ExpiresAt.Equal(time.UnixMilli(expN)):
			t.Fatalf("fence %q created %q expires %q decode to %d %v %v", fence, created, expires, rec.Fence, rec.CreatedAt, rec.ExpiresAt)
		case rec.CreatedAt.Location() != time.UTC || rec.ExpiresAt.Location() != time.UTC:
			t.Fatalf("times not in UTC")
		case st == idem.StatusInProgress && (!ok4 || !rec.LeaseExpiresAt.Equal(time.UnixMilli(leaseN))):
			t.Fatalf("lease %q decodes to %v", lease, rec.LeaseExpiresAt)
		case st != idem.StatusInProgress && !rec.LeaseExpiresAt.IsZero():
			t.Fatalf("a %s record has a lease", st)
		case (vals[2] != nil) != (rec.Request != nil) || vals[2] != nil && string(rec.Request) != req:
			t.Fatalf("request %q decodes to %q", req, rec.Request)
		case st == idem.StatusCommitted && vals[3] != nil && string(rec.Result) != res, st != idem.StatusCommitted && rec.Result != nil:
			t.Fatalf("a %s record with result %q decodes to %q", st, res, rec.Result)
		}
		if st == idem.StatusFailed {
			if rec.Error == nil || *rec.Error != se {
				t.Fatalf("error %q decodes to %#v", enc, rec.Error)
			}
		} else if rec.Error != nil {
			t.Fatalf("a %s record has an error", st)
		}
	})
}
