package idemhttp

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// A recorded response may carry a content coding its handler chose for
// the first request, which accepted it: an upstream of the proxy that
// gzips for a client sending Accept-Encoding: gzip, say. A retry that
// does not accept that coding could not read the recorded body as it is.
// For gzip and deflate, the replay decodes it (see exchange.replay); any
// other coding, or a stack of codings, is replayed as recorded.

// unacceptedCoding is the coding a replay decodes, "gzip" or "deflate",
// when coding (the recorded Content-Encoding's values) names that coding
// alone (gzip also as x-gzip) and the retry, whose header is retry, does
// not accept it (see acceptsCoding); else "", the body replayed as
// recorded.
func unacceptedCoding(coding []string, retry http.Header) string {
	if len(coding) != 1 {
		return ""
	}
	if name := decodableCoding(coding[0]); name != "" && !acceptsCoding(retry["Accept-Encoding"], name) {
		return name
	}
	return ""
}

// decoded returns a reader of body decoded from the coding name ("gzip"
// or "deflate", as zlib), or nil when the coding's header does not read:
// such a body is replayed as recorded, as the first client got it.
func decoded(name string, body []byte) io.Reader {
	var r io.Reader
	var err error
	if name == "gzip" {
		r, err = gzip.NewReader(bytes.NewReader(body))
	} else {
		r, err = zlib.NewReader(bytes.NewReader(body))
	}
	if err != nil {
		return nil
	}
	return r
}

// decodableCoding is the coding a replay can decode that a Content-Encoding
// value names, "gzip" (also for x-gzip, its alias) or "deflate", or "".
func decodableCoding(v string) string {
	v = strings.TrimSpace(v)
	switch {
	case strings.EqualFold(v, "gzip") || strings.EqualFold(v, "x-gzip"):
		return "gzip"
	case strings.EqualFold(v, "deflate"):
		return "deflate"
	}
	return ""
}

// acceptsCoding reports whether a request whose Accept-Encoding field
// lines are accept takes a body in the content coding name ("gzip" or
// "deflate"): when the field names it (as decodableCoding reads it, gzip
// also as x-gzip), or else names "*", with a weight above 0. A request
// without the field takes none: as servers that compress read it, a
// client that says nothing about codings gets none.
func acceptsCoding(accept []string, name string) bool {
	named, any := -1.0, -1.0
	for _, line := range accept {
		for elem := range strings.SplitSeq(line, ",") {
			coding, params, _ := strings.Cut(elem, ";")
			coding = strings.TrimSpace(coding)
			switch {
			case coding == "*":
				any = max(any, weight(params))
			case decodableCoding(coding) == name:
				named = max(named, weight(params))
			}
		}
	}
	if named >= 0 {
		return named > 0
	}
	return any > 0
}

// weight is the q parameter among params, the parameters of an
// Accept-Encoding element, or 1 when there is none or it does not read.
func weight(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return q
			}
		}
	}
	return 1
}
