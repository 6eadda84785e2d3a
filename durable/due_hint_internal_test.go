package durable

import (
	"testing"
	"time"
)

// TestParseDueHint pins the reading of a due hint's payload
// ("µs:schema:queue"): the queue of the listener's schema and how long
// until its row is eligible; a hint of another schema, or of a form it
// does not know, is ignored rather than misread. Queue and schema names
// may hold ':', which the leading number never does.
func TestParseDueHint(t *testing.T) {
	t.Parallel()
	const prefix = "s:1:"
	cases := []struct {
		payload string
		queue   string
		in      time.Duration
		ok      bool
	}{
		{"300000:s:1:default", "default", 300 * time.Millisecond, true},
		{"1:s:1:a:b", "a:b", time.Microsecond, true},
		{"300000:s:1:", "", 300 * time.Millisecond, true}, // no such queue: the engine serves none so named
		{"9223372036854775807:s:1:q", "q", time.Duration(1<<63-1) / time.Microsecond * time.Microsecond, true},
		{"300000:other:q", "", 0, false},
		{"s:1:default", "", 0, false}, // a wake-up hint's form
		{"0:s:1:default", "", 0, false},
		{"-5:s:1:default", "", 0, false},
		{"1e3:s:1:default", "", 0, false},
		{"99999999999999999999:s:1:default", "", 0, false},
		{"", "", 0, false},
		{"300000", "", 0, false},
	}
	for _, c := range cases {
		queue, in, ok := parseDueHint(c.payload, prefix)
		if queue != c.queue || in != c.in || ok != c.ok {
			t.Errorf("parseDueHint(%q) = %q, %s, %v; want %q, %s, %v", c.payload, queue, in, ok, c.queue, c.in, c.ok)
		}
	}
}
