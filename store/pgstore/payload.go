package pgstore

import (
	"encoding/json"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgstorable"
)

// The check below runs after idem.CheckPayload (size, JSON syntax, UTF-8)
// and before anything is sent, so that PostgreSQL never rejects a payload
// halfway through a caller's transaction (which would abort it). It covers
// what PostgreSQL's jsonb refuses in JSON that CheckPayload accepts; the
// json column type (result_payload) takes every document CheckPayload
// accepts. The only remaining refusals, numbers beyond the range of
// JSONB's numeric, are still reported as idem.ErrInvalidPayload (see
// classify).

// checkJSONB rejects a document, valid JSON in valid UTF-8 no larger than
// maxPayload (as idem.CheckPayload ensures), that the jsonb column type
// (request_payload) cannot hold (see pgstorable.JSONB), or that is larger
// than maxPayload as jsonb prints it back (*idem.PayloadTooLargeError, its
// Size the printed size; see pgstorable.RenderedSize). jsonb keeps a
// number as a numeric and prints every digit of it: 1e131071 is 8 bytes as
// sent and 131072 as read, and a record whose request printed as more
// than 1 GiB could be written but never read back (by Get, or by the
// Begin that reports a Mismatch), each attempt costing the server as much
// memory.
func checkJSONB(what string, b []byte, maxPayload int) error {
	if err := pgstorable.JSONB(b); err != nil {
		return fmt.Errorf("%w: %s %v", idem.ErrInvalidPayload, what, err)
	}
	if n := pgstorable.RenderedSize(b); n > maxPayload {
		return &idem.PayloadTooLargeError{What: what, Size: n, Limit: maxPayload}
	}
	return nil
}

// jsonArg is a JSON document as the parameter of a json or jsonb column:
// text, which every query execution mode of pgx sends as the document
// itself. As a []byte it would be bytea to the modes that do not ask the
// server for the parameters' types (QueryExecModeExec and
// QueryExecModeSimpleProtocol, which pools behind a transaction-pooling
// proxy use), and the server would refuse valid JSON.
func jsonArg(b []byte) string { return string(b) }

// encodeError encodes a StoredError for the error_payload column. NUL
// characters, which jsonb cannot store, are replaced with U+FFFD, as
// encoding/json already does with invalid UTF-8: a permanent failure must
// be recordable whatever its message says. The encoded size counts against
// maxPayload (*idem.PayloadTooLargeError, What "error"); it holds strings
// and no number, so jsonb prints it back no larger (see checkJSONB), but
// for the spaces after its colons and commas.
func encodeError(se idem.StoredError, maxPayload int) ([]byte, error) {
	clean := pgstorable.CleanText
	se.Class, se.Message, se.Cause = clean(se.Class), clean(se.Message), clean(se.Cause)
	b, err := json.Marshal(se)
	if err != nil {
		return nil, err // cannot happen: three strings
	}
	if len(b) > maxPayload {
		return nil, &idem.PayloadTooLargeError{What: "error", Size: len(b), Limit: maxPayload}
	}
	return b, nil
}

// decodeError decodes an error_payload column.
func decodeError(b []byte) (*idem.StoredError, error) {
	var se idem.StoredError
	if err := json.Unmarshal(b, &se); err != nil {
		return nil, err
	}
	return &se, nil
}
