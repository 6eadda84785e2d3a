package idemhttp

import "testing"

// BenchmarkReadResponse reads back a small recorded JSON response, as
// replay does.
func BenchmarkReadResponse(b *testing.B) {
	rec := appendResponse(nil, 201, []headerField{{name: "Content-Type", values: []string{"application/json"}}},
		[]byte(`{"id":"ch_1","amount":100,"currency":"EUR"}`))
	body := make([]byte, 0, 1024)
	var fields [4]headerField
	var values [4]string
	b.ReportAllocs()
	for range b.N {
		if _, err := readResponse(rec, body, fields[:0], values[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
