package idemtest

import (
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestDescriptionsShowPayloadsAsText: a failure shows the JSON a record or
// outcome holds as text, not as a list of byte values, and says what
// bytes the suite wrote over a slice a store handed out without copying
// mean.
func TestDescriptionsShowPayloadsAsText(t *testing.T) {
	rec := describeRecord(idem.Record{Status: idem.StatusCommitted, Request: []byte(`{"a":1}`), Result: []byte(`"v1"`)})
	for _, want := range []string{`Request:{"a":1}`, `Result:"v1"`, `Status:committed`} {
		if !strings.Contains(rec, want) {
			t.Errorf("describeRecord = %s, want it to contain %s", rec, want)
		}
	}
	o := describeOutcome(idem.Outcome{Kind: idem.Mismatch, RecordedRequest: []byte(`{"b":2}`)})
	if !strings.Contains(o, `RecordedRequest:{"b":2}`) || !strings.Contains(o, "mismatch") {
		t.Errorf("describeOutcome = %s, want the kind and the recorded request as text", o)
	}
	scribbled := []byte(`{"a":1}`)
	clobber(scribbled)
	got := describeOutcome(idem.Outcome{Kind: idem.PriorResult, Result: scribbled})
	if !strings.Contains(got, "not a copy") {
		t.Errorf("describeOutcome of a result the suite wrote over = %s, want it to say the store handed out its own buffer", got)
	}
}
