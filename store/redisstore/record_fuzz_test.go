package redisstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// FuzzDecodeRecord checks decodeRecord on any value a Redis server could
// return: a value the store never writes (too short, another magic, parts
// longer than the value, a status other than the three, an in-progress
// record with a tail, a fingerprint or a stored error that does not
// decode) makes an ErrUnavailable error naming the part at fault, never a
// panic or a half-read record; and a record that decodes holds exactly
// what its bytes say (the result only when committed, the error only when
// failed, the lease only when in progress), times in UTC.
func FuzzDecodeRecord(f *testing.F) {
	fp := string(idem.FingerprintBytes([]byte("x")).Bytes())
	tok := idem.NewToken()
	inProgress := string(appendInProgress(nil, []byte(fp), tok, []byte(`{"a":1}`), 1700000000000, 1700000060000, 1700000030000))
	committed := inProgress[:offStatus] + "c" + inProgress[offStatus+1:] + `{"id":1}`
	failed := inProgress[:offStatus] + "f" + inProgress[offStatus+1:] + `{"class":"c","message":"m"}`
	for _, v := range []string{inProgress, committed, failed, "", "IDM\x01", "not a record", inProgress + "tail", failed + "}", committed[:len(committed)-20]} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rec, err := decodeRecord("rk", v)
		if err != nil {
			if rec != nil || !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), `record "rk": part `) {
				t.Fatalf("decodeRecord: %#v, %v; want an ErrUnavailable error naming a part, alone", rec, err)
			}
			if wellFormed(v) {
				t.Fatalf("decodeRecord refuses a record the store could write: %v", err)
			}
			return
		}
		if !wellFormed(v) {
			t.Fatalf("decodeRecord accepts a value the store never writes: %q decodes to %#v", v, rec)
		}
		be := func(off int) int64 { return int64(binary.BigEndian.Uint64([]byte(v[off:]))) }
		nfp := int(binary.BigEndian.Uint16([]byte(v[offLens:])))
		ntok := int(binary.BigEndian.Uint16([]byte(v[offLens+2:])))
		nreq := int(binary.BigEndian.Uint32([]byte(v[offLens+4:])))
		req := v[headerLen+nfp+ntok : headerLen+nfp+ntok+nreq]
		tail := v[headerLen+nfp+ntok+nreq:]
		wantStatus := map[byte]idem.Status{'p': idem.StatusInProgress, 'c': idem.StatusCommitted, 'f': idem.StatusFailed}[v[offStatus]]
		switch {
		case rec.Status != wantStatus || string(rec.Fingerprint.Bytes()) != v[headerLen:headerLen+nfp]:
			t.Fatalf("%q decodes to status %q fingerprint %v", v, rec.Status, rec.Fingerprint)
		case rec.Fence != be(offFence) || !rec.CreatedAt.Equal(time.UnixMilli(be(offCreated))) || !rec.ExpiresAt.Equal(time.UnixMilli(be(offExpires))):
			t.Fatalf("%q decodes to fence %d created %v expires %v", v, rec.Fence, rec.CreatedAt, rec.ExpiresAt)
		case rec.CreatedAt.Location() != time.UTC || rec.ExpiresAt.Location() != time.UTC:
			t.Fatalf("times not in UTC")
		case wantStatus == idem.StatusInProgress && !rec.LeaseExpiresAt.Equal(time.UnixMilli(be(offLease))):
			t.Fatalf("lease decodes to %v", rec.LeaseExpiresAt)
		case wantStatus != idem.StatusInProgress && !rec.LeaseExpiresAt.IsZero():
			t.Fatalf("a %s record has a lease", wantStatus)
		case string(rec.Request) != req || (req == "") != (rec.Request == nil):
			t.Fatalf("request %q decodes to %q", req, rec.Request)
		case wantStatus == idem.StatusCommitted && (rec.Result == nil || string(rec.Result) != tail), wantStatus != idem.StatusCommitted && rec.Result != nil:
			t.Fatalf("a %s record with tail %q decodes to result %q", wantStatus, tail, rec.Result)
		}
		if wantStatus == idem.StatusFailed {
			var se idem.StoredError
			_ = json.Unmarshal([]byte(tail), &se)
			if rec.Error == nil || *rec.Error != se {
				t.Fatalf("error %q decodes to %#v", tail, rec.Error)
			}
		} else if rec.Error != nil {
			t.Fatalf("a %s record has an error", wantStatus)
		}
	})
}

// wellFormed reports, by the layout's description (record.go), whether v
// is a record the store could write.
func wellFormed(v string) bool {
	if len(v) < headerLen || !strings.HasPrefix(v, "IDM\x01") {
		return false
	}
	nfp := int64(binary.BigEndian.Uint16([]byte(v[38:])))
	ntok := int64(binary.BigEndian.Uint16([]byte(v[40:])))
	nreq := int64(binary.BigEndian.Uint32([]byte(v[42:])))
	if int64(len(v)) < 46+nfp+ntok+nreq {
		return false
	}
	if _, err := idem.ParseFingerprint([]byte(v[46 : 46+nfp])); err != nil {
		return false
	}
	tail := v[46+nfp+ntok+nreq:]
	switch v[4] {
	case 'p':
		return tail == ""
	case 'c':
		return true
	case 'f':
		var se idem.StoredError
		return json.Unmarshal([]byte(tail), &se) == nil
	}
	return false
}
