package idemhttp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A response is recorded as this JSON document (fields in this order):
//
//	{"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"<base64>"}
//
// It is written by appendResponse and read by decodeResponse, both by hand
// on the hot path; decodeResponse falls back to encoding/json for anything
// it does not recognise, so a record reformatted by a store still replays.
type recordedResponse struct {
	V      int         `json:"v"`
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body"`
}

// appendResponse appends the record of a response. header holds the
// already filtered header fields, in order.
func appendResponse(dst []byte, status int, header []headerField, body []byte) []byte {
	dst = append(dst, `{"v":1,"status":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	if len(header) > 0 {
		dst = append(dst, `,"header":{`...)
		for i, f := range header {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f.name)
			dst = append(dst, ":["...)
			for j, v := range f.values {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendJSONString(dst, v)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"body":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, body)
	return append(dst, `"}`...)
}

// appendRequest appends what is recorded about a request, for operators
// (idem inspect) and Mismatch diagnosis. It holds no body and no header
// values but the content type, so nothing of a request leaks through it.
func appendRequest(dst []byte, method, target, contentType string, bodyBytes int) []byte {
	dst = append(dst, `{"method":`...)
	dst = appendJSONString(dst, method)
	dst = append(dst, `,"target":`...)
	dst = appendJSONString(dst, target)
	if contentType != "" {
		dst = append(dst, `,"content_type":`...)
		dst = appendJSONString(dst, contentType)
	}
	dst = append(dst, `,"body_bytes":`...)
	dst = strconv.AppendInt(dst, int64(bodyBytes), 10)
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the result is always valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// decodeResponse reads a recorded response.
func decodeResponse(b []byte) (*recordedResponse, error) {
	if r, ok := parseResponse(string(b)); ok {
		return r, nil
	}
	var r recordedResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("idemhttp: recorded response does not decode: %w", err)
	}
	if r.V != 1 || r.Status < 100 || r.Status > 999 {
		return nil, fmt.Errorf("idemhttp: recorded response has version %d status %d", r.V, r.Status)
	}
	return &r, nil
}

// parseResponse is the fast path of decodeResponse: it reads exactly what
// appendResponse writes, with strings free of escapes, and reports false
// for anything else.
func parseResponse(s string) (*recordedResponse, bool) {
	p := scanner{s: s}
	if !p.lit(`{"v":1,"status":`) {
		return nil, false
	}
	status, ok := p.int()
	if !ok || status < 100 || status > 999 {
		return nil, false
	}
	r := &recordedResponse{V: 1, Status: status}
	if p.lit(`,"header":{`) {
		r.Header = http.Header{}
		for first := true; !p.lit("}"); first = false {
			if !first && !p.lit(",") {
				return nil, false
			}
			name, ok := p.str()
			if !ok || !p.lit(":[") {
				return nil, false
			}
			var values []string
			for firstV := true; !p.lit("]"); firstV = false {
				if !firstV && !p.lit(",") {
					return nil, false
				}
				v, ok := p.str()
				if !ok {
					return nil, false
				}
				values = append(values, v)
			}
			r.Header[name] = values
		}
	}
	if !p.lit(`,"body":`) {
		return nil, false
	}
	body, ok := p.str()
	if !ok || !p.lit("}") || p.i != len(s) {
		return nil, false
	}
	dec, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, false
	}
	r.Body = dec
	return r, true
}

type scanner struct {
	s string
	i int
}

func (p *scanner) lit(l string) bool {
	if strings.HasPrefix(p.s[p.i:], l) {
		p.i += len(l)
		return true
	}
	return false
}

func (p *scanner) int() (int, bool) {
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(p.s[p.i:j])
	p.i = j
	return n, err == nil
}

// str reads a JSON string without escapes.
func (p *scanner) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	j := strings.IndexAny(p.s[p.i:], `"\`)
	if j < 0 || p.s[p.i+j] != '"' {
		return "", false
	}
	v := p.s[p.i : p.i+j]
	p.i += j + 1
	return v, true
}

// headerField is one recorded header with its values.
type headerField struct {
	name   string
	values []string
}

// replayable returns the fields of h that may be recorded: those named in
// allow, never the ones in neverReplayed.
func replayable(h http.Header, allow []string) []headerField {
	var out []headerField
	for _, name := range allow {
		if v, ok := h[name]; ok && len(v) > 0 {
			out = append(out, headerField{name: name, values: v})
		}
	}
	return out
}
