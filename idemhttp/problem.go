package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem type URIs, one per condition. They are stable: clients may branch
// on them.
const (
	ProblemKeyMissing       = "urn:idem:problem:key-missing"
	ProblemKeyInvalid       = "urn:idem:problem:key-invalid"
	ProblemKeyReused        = "urn:idem:problem:key-reused"
	ProblemInProgress       = "urn:idem:problem:request-in-progress"
	ProblemStoreUnavailable = "urn:idem:problem:store-unavailable"
	ProblemBodyTooLarge     = "urn:idem:problem:body-too-large"
	ProblemBodyUnreadable   = "urn:idem:problem:body-unreadable"
	ProblemBodyTimeout      = "urn:idem:problem:body-timeout" // 408: see Config.BodyTimeout
	ProblemUpstream         = "urn:idem:problem:upstream-unavailable"
	ProblemUpstreamTimeout  = "urn:idem:problem:upstream-timeout"
	// ProblemTargetInvalid is the proxy's answer to a request target it
	// does not forward (see NewProxy).
	ProblemTargetInvalid = "urn:idem:problem:target-invalid"
	ProblemInternal      = "urn:idem:problem:internal"
)

// Problem is an RFC 9457 problem detail.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header (whole
	// seconds, at least 1).
	RetryAfter time.Duration `json:"-"`
}

// ErrorWriter writes a problem response. The default is WriteProblem.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, p *Problem)

// WriteProblem writes p as application/problem+json with Cache-Control:
// no-store, X-Content-Type-Options: nosniff, and Retry-After when
// p.RetryAfter is set.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p *Problem) {
	writeError(w, "application/problem+json", p, p)
}

// writeError writes body, as JSON of content type ct, as the answer to
// problem p: its status, Cache-Control: no-store, X-Content-Type-Options:
// nosniff (a browser does not take the JSON for a page), and Retry-After
// when p.RetryAfter is set.
func writeError(w http.ResponseWriter, ct string, p *Problem, body any) {
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retrySeconds(p.RetryAfter)))
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}

// retrySeconds rounds d up to whole seconds, at least 1 (without
// overflowing for the longest d).
func retrySeconds(d time.Duration) int {
	s := int(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}
