package idemhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// recordedResponse is the JSON document a response is recorded as.
type recordedResponse struct {
	V      int         `json:"v"`
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body"` // base64 in JSON
}

// recordedRequest is what is recorded about a request, for operators
// (idem inspect) and Mismatch diagnosis. It holds no body and no header
// values, so nothing of a request leaks through it.
type recordedRequest struct {
	Method      string `json:"method"`
	Target      string `json:"target"`
	ContentType string `json:"content_type,omitempty"`
	BodyBytes   int    `json:"body_bytes"`
}

func decodeResponse(b []byte) (*recordedResponse, error) {
	var r recordedResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("idemhttp: recorded response does not decode: %w", err)
	}
	if r.V != 1 || r.Status < 100 || r.Status > 999 {
		return nil, fmt.Errorf("idemhttp: recorded response has version %d status %d", r.V, r.Status)
	}
	return &r, nil
}

// filterHeaders keeps the allowlisted headers of h that may be replayed.
func filterHeaders(h http.Header, allow []string) http.Header {
	out := http.Header{}
	for _, name := range allow {
		k := http.CanonicalHeaderKey(name)
		if neverReplayed[k] {
			continue
		}
		if v, ok := h[k]; ok {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}
