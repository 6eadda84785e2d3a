package idemhttp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A response is recorded as this JSON document (fields in this order):
//
//	{"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"<base64>"}
//
// A header field with a value that is not valid UTF-8, which a JSON
// string cannot hold, goes instead, with all its values in base64, into a
// "header_bytes" member between "header" and "body":
//
//	{"v":1,"status":200,"header_bytes":{"Content-Disposition":["<base64>"]},"body":"<base64>"}
//
// Trailers are recorded in "header" too, under their names prefixed with
// http.TrailerPrefix ("Trailer:X-Checksum"), as a replay sets them; and so
// is, for HEAD only, the Content-Length the handler declared.
//
// It is written by appendResponse and read by decodeResponse, both by hand
// on the hot path; decodeResponse falls back to encoding/json for anything
// it does not recognise (header_bytes among them), so a record reformatted
// by a store still replays.
type recordedResponse struct {
	V           int                 `json:"v"`
	Status      int                 `json:"status"`
	Header      http.Header         `json:"header,omitempty"`
	HeaderBytes map[string][][]byte `json:"header_bytes,omitempty"`
	Body        []byte              `json:"body"`
}

// appendResponse appends the record of a response. header holds the
// already filtered header fields, in order.
func appendResponse(dst []byte, status int, header []headerField, body []byte) []byte {
	dst = append(dst, `{"v":1,"status":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = appendHeader(dst, `,"header":{`, header, false)
	dst = appendHeader(dst, `,"header_bytes":{`, header, true)
	dst = append(dst, `,"body":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, body)
	return append(dst, `"}`...)
}

// appendHeader appends the member named in open holding the fields of
// header whose values are all valid UTF-8, as strings, or with raw the
// others, in base64; nothing when there are no such fields.
func appendHeader(dst []byte, open string, header []headerField, raw bool) []byte {
	n := 0
	for _, f := range header {
		if validValues(f.values) == raw {
			continue
		}
		if n == 0 {
			dst = append(dst, open...)
		} else {
			dst = append(dst, ',')
		}
		n++
		dst = appendJSONString(dst, f.name)
		dst = append(dst, ":["...)
		for j, v := range f.values {
			if j > 0 {
				dst = append(dst, ',')
			}
			if raw {
				dst = append(dst, '"')
				dst = base64.StdEncoding.AppendEncode(dst, []byte(v))
				dst = append(dst, '"')
			} else {
				dst = appendJSONString(dst, v)
			}
		}
		dst = append(dst, ']')
	}
	if n > 0 {
		dst = append(dst, '}')
	}
	return dst
}

// validValues reports whether every value is valid UTF-8.
func validValues(values []string) bool {
	for _, v := range values {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
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
		// Copy a run of bytes that need no escaping in one go.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
			j++
		}
		dst = append(dst, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '"' || c == '\\' {
				dst = append(dst, '\\', c)
			} else {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
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

// response is a recorded response as replay reads it.
type response struct {
	status int
	header []headerField
	body   []byte
}

// readResponse reads a recorded response: by parseResponse when it can,
// else by decodeResponse. The body is decoded into body's storage, the
// header fields and their values into fields' and values'.
func readResponse(b, body []byte, fields []headerField, values []string) (response, error) {
	if r, ok := parseResponse(b, body, fields, values); ok {
		return r, nil
	}
	rec, err := decodeResponse(b)
	if err != nil {
		return response{}, err
	}
	r := response{status: rec.Status, body: rec.Body, header: fields}
	for name, v := range rec.Header {
		r.header = append(r.header, headerField{name: name, values: v})
	}
	for name, raw := range rec.HeaderBytes {
		v := make([]string, len(raw))
		for i, b := range raw {
			v[i] = string(b)
		}
		r.header = append(r.header, headerField{name: name, values: v})
	}
	return r, nil
}

// DecodeRecordedResponse decodes b, the Result of a record the middleware
// or the proxy wrote (a JSON document such as
// {"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"<base64>"}),
// as it replays: the status, the recorded header fields (those of
// "header_bytes" included, as the bytes they were; trailers under their
// names prefixed with http.TrailerPrefix), and the body. It
// fails on anything that is not such a record, as the Result of idem.Do
// or idem.Typed generally is not. It is for tools that show records, such
// as idem inspect.
func DecodeRecordedResponse(b []byte) (status int, header http.Header, body []byte, err error) {
	r, err := readResponse(b, nil, nil, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	header = make(http.Header, len(r.header))
	for _, f := range r.header {
		header[f.name] = append(header[f.name], f.values...)
	}
	return r.status, header, r.body, nil
}

// decodeResponse reads a recorded response with encoding/json.
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

// parseResponse is the fast path of readResponse: it reads exactly what
// appendResponse writes, with strings free of escapes, and reports false
// for anything else. Each header's values are a slice of values' storage
// with no spare capacity, so that appending to one never overwrites
// another. Only the text before the body becomes a string (the header
// names and values are substrings of it); the body, usually the bulk of
// the record, is decoded where it is.
func parseResponse(b, body []byte, fields []headerField, values []string) (response, bool) {
	at, ok := headLen(b)
	if !ok || !bytes.HasPrefix(b[at:], bodyMember) {
		return response{}, false
	}
	// A quote or backslash in enc, which would make it another JSON
	// string than its bytes, is no base64: Decode below refuses it.
	enc, ok := bytes.CutSuffix(b[at+len(bodyMember):], []byte(`"}`))
	if !ok {
		return response{}, false
	}
	r, ok := parseHead(string(b[:at]), fields, values)
	if !ok {
		return response{}, false
	}
	n := base64.StdEncoding.DecodedLen(len(enc))
	if cap(body) < n {
		body = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(body[:n], enc)
	if err != nil || base64.StdEncoding.EncodedLen(n) != len(enc) { // Decode skips '\r' and '\n', which JSON strings cannot hold
		return response{}, false
	}
	r.body = body[:n]
	return r, true
}

// bodyMember is what follows the head of a record.
var bodyMember = []byte(`,"body":"`)

// headLen returns the length of the head of a record as appendResponse
// writes it, the text before the body member: the version and status, and
// the header object if there is one, found by its first closing brace
// outside a string (the fast path reads only strings without escapes). It
// reports false when there is no such head; parseHead checks the rest.
func headLen(b []byte) (int, bool) {
	const version, header = `{"v":1,"status":`, `,"header":{`
	if !bytes.HasPrefix(b, []byte(version)) {
		return 0, false
	}
	i := len(version)
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if !bytes.HasPrefix(b[i:], []byte(header)) {
		return i, true
	}
	// A brace after an even number of quotes is outside the strings.
	quotes := 0
	for i += len(header); ; {
		j := bytes.IndexByte(b[i:], '}')
		if j < 0 {
			return 0, false
		}
		if quotes += bytes.Count(b[i:i+j], []byte{'"'}); quotes%2 == 0 {
			return i + j + 1, true
		}
		i += j + 1
	}
}

// parseHead reads the text of a record before its body member: the
// version, the status and the header, all of s. It reports false for
// anything appendResponse does not write.
func parseHead(s string, fields []headerField, values []string) (response, bool) {
	p := scanner{s: s}
	if !p.lit(`{"v":1,"status":`) {
		return response{}, false
	}
	at := p.i
	status, ok := p.int()
	if !ok || status < 100 || status > 999 || p.i-at != 3 { // no leading zeros: JSON has none
		return response{}, false
	}
	r := response{status: status, header: fields}
	if p.lit(`,"header":{`) {
		for first := true; !p.lit("}"); first = false {
			if !first && !p.lit(",") {
				return response{}, false
			}
			name, ok := p.str()
			if !ok || !p.lit(":[") {
				return response{}, false
			}
			start := len(values)
			for firstV := true; !p.lit("]"); firstV = false {
				if !firstV && !p.lit(",") {
					return response{}, false
				}
				v, ok := p.str()
				if !ok {
					return response{}, false
				}
				values = append(values, v)
			}
			r.header = append(r.header, headerField{name: name, values: values[start:len(values):len(values)]})
		}
	}
	return r, p.i == len(s)
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

// str reads a JSON string without escapes, in valid UTF-8 without the
// control characters a JSON string cannot hold (which encoding/json
// would refuse, or read otherwise).
func (p *scanner) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	j := strings.IndexByte(p.s[p.i:], '"')
	if j < 0 {
		return "", false
	}
	v := p.s[p.i : p.i+j]
	ascii := true
	for k := 0; k < len(v); k++ {
		switch c := v[k]; {
		case c < 0x20 || c == '\\':
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !ascii && !utf8.ValidString(v) {
		return "", false
	}
	p.i += j + 1
	return v, true
}

// declaredTrailers appends to out the trailers the Trailer header of h
// declares, as net/http's servers take them in when the header is
// written: each name in canonical form, in order, once per mention, but
// for those they refuse to send as trailers (see sendableTrailer).
func declaredTrailers(out []string, h http.Header) []string {
	for _, line := range h["Trailer"] {
		for name := range strings.SplitSeq(line, ",") {
			if name = http.CanonicalHeaderKey(strings.TrimSpace(name)); name != "" && sendableTrailer(name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// appendTrailers appends to out the trailers net/http sends once the
// handler returned, h being its header then and declared the trailers
// declared when the header was written (see declaredTrailers): those set
// under http.TrailerPrefix and those declared, put together as HTTP/1.1
// does (the values of both; a name declared twice, its values twice) or,
// when h2, as HTTP/2 does (a prefixed field wins over the declared one, a
// name counts once, and one it refuses to send as a trailer is not sent),
// but for those never replayed. Each is named with the prefix, under
// which a replay sets it (see replayedTrailer), so that the replay sends
// what the first response sent.
func appendTrailers(out []headerField, h http.Header, declared []string, h2 bool) []headerField {
	start := len(out)
	for k, v := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && len(v) > 0 && replayedTrailer(k) && (!h2 || sendableTrailer(http.CanonicalHeaderKey(name))) {
			out = append(out, headerField{name: k, values: v})
		}
	}
	for _, name := range declared {
		v := h[name]
		if len(v) == 0 || neverReplayed[name] {
			continue
		}
		key := http.TrailerPrefix + name
		switch i := slices.IndexFunc(out[start:], func(f headerField) bool { return f.name == key }); {
		case i < 0:
			out = append(out, headerField{name: key, values: v})
		case !h2:
			f := &out[start+i]
			f.values = append(slices.Clip(f.values), v...) // a copy: never the handler's slice
		}
	}
	return out
}

// sendableTrailer reports whether net/http's servers send the field name,
// in canonical form, as a trailer when the Trailer header declares it:
// not the fields RFC 9110 (section 6.5.1) forbids in trailers, which they
// drop.
func sendableTrailer(name string) bool {
	return !strings.HasPrefix(name, "If-") && !forbiddenTrailer[name]
}

// forbiddenTrailer are the fields net/http's servers refuse to send as
// trailers.
var forbiddenTrailer = map[string]bool{
	"Authorization": true, "Cache-Control": true, "Connection": true, "Content-Encoding": true,
	"Content-Length": true, "Content-Range": true, "Content-Type": true, "Expect": true,
	"Host": true, "Keep-Alive": true, "Max-Forwards": true, "Pragma": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Proxy-Connection": true, "Range": true,
	"Realm": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Www-Authenticate": true,
}

// replayedTrailer reports whether name, a header map key, is a trailer
// that may be recorded and replayed: http.TrailerPrefix and a field that
// is not never replayed.
func replayedTrailer(name string) bool {
	t, ok := strings.CutPrefix(name, http.TrailerPrefix)
	return ok && !neverReplayed[http.CanonicalHeaderKey(t)]
}

// headerField is one recorded header with its values.
type headerField struct {
	name   string
	values []string
}

// replayable appends to out the fields of h that may be recorded: those
// named in allow (which holds none of neverReplayed; allowSet is the same
// as a set), in the order of allow. It looks up whichever of the two is
// shorter in the other: a response usually has a few headers, the allow
// list a dozen names.
func replayable(out []headerField, h http.Header, allow []string, allowSet map[string]bool) []headerField {
	if len(h) >= len(allow) {
		for _, name := range allow {
			if v := h[name]; len(v) > 0 {
				out = append(out, headerField{name: name, values: v})
			}
		}
		return out
	}
	start := len(out)
	for name, v := range h {
		if len(v) > 0 && allowSet[name] {
			out = append(out, headerField{name: name, values: v})
		}
	}
	// Map order is random: sort by position in allow, so that a response
	// is always recorded the same way. The fields are few.
	fields := out[start:]
	for i := 1; i < len(fields); i++ {
		for j := i; j > 0 && slices.Index(allow, fields[j].name) < slices.Index(allow, fields[j-1].name); j-- {
			fields[j], fields[j-1] = fields[j-1], fields[j]
		}
	}
	return out
}
