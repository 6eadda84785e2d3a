package idemhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// A Config.KeyScope or Config.Fingerprint that panics goes on panicking
// (for the server or a recovering middleware to handle), and the event
// says what happened: an internal error, the 500 a recovering middleware
// answers, and which function panicked with what.
func TestConfigFunctionsThatPanic(t *testing.T) {
	for name, cfg := range map[string]idemhttp.Config{
		"KeyScope": {KeyScope: func(*http.Request) string { panic("scope boom") }},
		"Fingerprint": {Fingerprint: func(*http.Request, []byte) (idem.Fingerprint, error) {
			panic("fingerprint boom")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t, cfg)
			panicked := func() (p any) {
				defer func() { p = recover() }()
				b.do(t, "POST", "/x", `{}`, key("k"))
				return nil
			}()
			if s, _ := panicked.(string); !strings.HasSuffix(s, " boom") {
				t.Fatalf("panic = %v, want the function's own", panicked)
			}
			e := <-b.events
			if e.Outcome != idemhttp.OutcomeInternal || e.Status != http.StatusInternalServerError {
				t.Errorf("event outcome %q status %d, want %q 500", e.Outcome, e.Status, idemhttp.OutcomeInternal)
			}
			if e.Err == nil || !strings.Contains(e.Err.Error(), "Config."+name) || !strings.Contains(e.Err.Error(), "boom") {
				t.Errorf("event error %v, want it to name Config.%s and the panic", e.Err, name)
			}
			wantRuns(t, b, 0)
			// Nothing was reserved: the retry, with working functions, runs.
			b.h = idemhttp.Middleware(idemhttp.Config{Store: b.store})(b.up)
			if w := b.do(t, "POST", "/x", `{}`, key("k")); w.Code != 201 {
				t.Errorf("retry: %d %s, want 201", w.Code, w.Body)
			}
		})
	}
}
