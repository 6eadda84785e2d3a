package redisstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
)

// A record is one Redis string: a fixed header, then the fingerprint, the
// token and the request payload, then the tail: the committed result or
// the stored error, absent while the record is in progress. Offsets are
// in bytes; integers are big-endian, times Unix milliseconds:
//
//	 0  4  magic, "IDM" and the layout's version, 1
//	 4  1  status: 'p' in progress, 'c' committed, 'f' failed permanently
//	 5  1  1 when the reservation was a takeover, else 0
//	 6  8  fence (int64)
//	14  8  created (int64)
//	22  8  expires_at (int64)
//	30  8  lease expiry (int64): meaningful only while in progress
//	38  2  length of the fingerprint (uint16)
//	40  2  length of the token (uint16)
//	42  4  length of the request payload (uint32)
//	46     fingerprint, token, request payload, tail
//
// A settle rewrites the status byte and appends the tail, and a heartbeat
// rewrites the times in place (SETRANGE, APPEND): none of them copies the
// payloads. The scripts in scripts.go read and write the same layout.
const (
	recordMagic = "IDM\x01"

	offStatus  = 4
	offFence   = 6
	offCreated = 14
	offExpires = 22
	offLease   = 30
	offLens    = 38
	headerLen  = 46

	statusInProgress = 'p'
	statusCommitted  = 'c'
	statusFailed     = 'f'
)

// appendInProgress appends a new in-progress record, with fence 1 and not
// a takeover, to dst. Begin's script sets the fence and the takeover flag
// when the key holds an older record.
func appendInProgress(dst, fp []byte, token string, request []byte, created, expires, lease int64) []byte {
	dst = append(dst, recordMagic...)
	dst = append(dst, statusInProgress, 0)
	dst = binary.BigEndian.AppendUint64(dst, 1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(created))
	dst = binary.BigEndian.AppendUint64(dst, uint64(expires))
	dst = binary.BigEndian.AppendUint64(dst, uint64(lease))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(fp)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(token)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(request)))
	dst = append(dst, fp...)
	dst = append(dst, token...)
	return append(dst, request...)
}

// errNotRecord is the cause of a value the store never writes: too short
// for its header, or with another magic.
var errNotRecord = errors.New("not a record of this store")

// decodeStoredError decodes the tail of a failed record.
func decodeStoredError(enc string) (*idem.StoredError, error) {
	var se idem.StoredError
	if err := json.Unmarshal([]byte(enc), &se); err != nil {
		return nil, err
	}
	return &se, nil
}

// decodeRecord decodes v, the value of rkey as Get reads it, into an
// idem.Record without its key. It fails with an idem.ErrUnavailable error
// naming the part at fault for a value the store never writes.
func decodeRecord(rkey, v string) (*idem.Record, error) {
	rec, _, part, err := decodeParts(v)
	if err != nil {
		return nil, corruptError("get", rkey, part, err)
	}
	return rec, nil
}

// decodeParts is decodeRecord, naming the part at fault rather than
// making the error, and returning the record's lease token as well.
func decodeParts(v string) (rec *idem.Record, token, part string, err error) {
	if len(v) < headerLen || v[:len(recordMagic)] != recordMagic {
		return nil, "", "header", errNotRecord
	}
	u64 := func(off int) int64 { return int64(binary.BigEndian.Uint64([]byte(v[off : off+8]))) }
	nfp := int(binary.BigEndian.Uint16([]byte(v[offLens:])))
	ntok := int(binary.BigEndian.Uint16([]byte(v[offLens+2:])))
	nreq := int64(binary.BigEndian.Uint32([]byte(v[offLens+4:])))
	if int64(len(v)-headerLen) < int64(nfp)+int64(ntok)+nreq {
		return nil, "", "lengths", fmt.Errorf("parts of %d, %d and %d bytes in %d", nfp, ntok, nreq, len(v)-headerLen)
	}
	fpPart := v[headerLen : headerLen+nfp]
	token = v[headerLen+nfp : headerLen+nfp+ntok]
	request := v[headerLen+nfp+ntok : headerLen+nfp+ntok+int(nreq)]
	tail := v[headerLen+nfp+ntok+int(nreq):]
	status := v[offStatus]
	switch status {
	case statusInProgress, statusCommitted, statusFailed:
	default:
		return nil, "", "status", fmt.Errorf("unknown status %q", status)
	}
	if status == statusInProgress && tail != "" {
		return nil, "", "tail", errors.New("a record in progress with a result")
	}
	fp, err := idem.ParseFingerprint([]byte(fpPart))
	if err != nil {
		return nil, "", "fingerprint", err
	}
	rec = &idem.Record{Fingerprint: fp, Fence: u64(offFence), CreatedAt: timeOf(u64(offCreated)), ExpiresAt: timeOf(u64(offExpires))}
	if request != "" {
		rec.Request = []byte(request)
	}
	switch status {
	case statusInProgress:
		rec.Status, rec.LeaseExpiresAt = idem.StatusInProgress, timeOf(u64(offLease))
	case statusCommitted:
		rec.Status, rec.Result = idem.StatusCommitted, []byte(tail)
	case statusFailed:
		rec.Status = idem.StatusFailed
		if rec.Error, err = decodeStoredError(tail); err != nil {
			return nil, "", "error", err
		}
	}
	return rec, token, "", nil
}
