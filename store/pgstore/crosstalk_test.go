package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestPipelineAnswersEachCallerItsOwn: a thousand callers at once through
// a pipelined store whose batches are deep and few each get their own
// answers (idemtest.Crowd), and a caller whose payload the server refuses
// (a number beyond jsonb's range) fails alone, with ErrInvalidPayload.
func TestPipelineAnswersEachCallerItsOwn(t *testing.T) {
	tb := setup(t, pgstore.Config{Pipeline: true, PipelineLanes: 2, PipelineDepth: 64, Lease: time.Minute})
	idemtest.Crowd(t, tb.store, idemtest.CrowdOpts{
		Refuse: func(i int) idem.Request {
			return idem.Request{Fingerprint: mustRequest(t, fmt.Sprintf(`{"fp":%d}`, i)).Fingerprint, Payload: fmt.Appendf(nil, `{"i":%d,"n":1e200000}`, i)}
		},
		Refused: func(err error) bool { return errors.Is(err, idem.ErrInvalidPayload) },
	})
}
