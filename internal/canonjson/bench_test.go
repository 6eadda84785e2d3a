package canonjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// benchRequest is a typical API request body: members out of order, nested
// objects and arrays, escapes, non-ASCII text and assorted numbers.
const benchRequest = `{
  "type": "payment",
  "amount": {"value": 1999.50, "currency": "EUR", "exponent": 2},
  "customer": {
    "name": "Zoë \"Zed\" Müller",
    "email": "zoe@example.com",
    "address": {"street": "Große Straße 1\nHinterhaus", "city": "Köln", "zip": "50667", "country": "DE"},
    "tags": ["vip", "newsletter", "\u20ac-account"]
  },
  "items": [
    {"sku": "A-1", "qty": 2, "price": 499.75, "meta": {"color": "red", "size": "M"}},
    {"sku": "B-22", "qty": 1, "price": 1000.0, "meta": {"size": "XL", "color": "blue"}},
    {"sku": "C-333", "qty": 10, "price": 1e-2, "meta": {}}
  ],
  "metadata": {"request_id": "8d3f2c1e-4b5a-4c6d-9e8f-0a1b2c3d4e5f", "retry": false, "note": null, "ts": 1718000000123},
  "description": "Order #1234 \u2014 thanks! \ud83d\ude00"
}`

// Small API bodies, the common case for the idempotency middleware: the
// same data already canonical, with members in struct order, and indented.
const (
	benchSmallSorted    = `{"amount":100,"currency":"EUR","customer":"cus_123","metadata":{"order":"1001"}}`
	benchSmallUnsorted  = `{"customer":"cus_123","amount":100,"currency":"EUR","metadata":{"order":"1001"}}`
	benchMediumSorted   = `{"amount":249900,"capture":true,"confirm":false,"currency":"EUR","customer":"cus_9fK2mQ7xLp","description":"Annual plan, 3 seats","metadata":{"cart_id":"c-88123","order":"1001","source":"web"},"payment_method":"pm_1Nv8Qz2eZvKYlo2C","receipt_email":"billing@example.com","statement_descriptor":"EXAMPLE*PLAN"}`
	benchMediumUnsorted = `{"customer":"cus_9fK2mQ7xLp","amount":249900,"currency":"EUR","payment_method":"pm_1Nv8Qz2eZvKYlo2C","description":"Annual plan, 3 seats","receipt_email":"billing@example.com","statement_descriptor":"EXAMPLE*PLAN","capture":true,"confirm":false,"metadata":{"order":"1001","cart_id":"c-88123","source":"web"}}`
)

// indent returns src indented by encoding/json, as MarshalIndent writes it.
func indent(b *testing.B, src string) []byte {
	b.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(src), "", "  "); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func benchInputs(b *testing.B) map[string][]byte {
	b.Helper()
	canonical, err := Canonicalize([]byte(benchRequest), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	var large strings.Builder
	large.WriteString("[")
	for i := range 2000 {
		if i > 0 {
			large.WriteString(",")
		}
		large.WriteString(strings.Replace(benchRequest, "1234", strconv.Itoa(i), 1))
	}
	large.WriteString("]")
	deep := strings.Repeat(`{"b":0,"a":`, DefaultMaxDepth) + "1" + strings.Repeat("}", DefaultMaxDepth)
	return map[string][]byte{
		"request":          []byte(benchRequest),
		"canonical":        canonical,
		"large":            []byte(large.String()),
		"deep-unsorted":    []byte(deep),
		"numbers":          []byte("[" + strings.Repeat("3.141592653589793,1e21,0.000001,-42,", 200) + "0]"),
		"escaped-strings":  []byte("[" + strings.Repeat(`"\u0041\n\t\u00e9\ud83d\ude00\\\"",`, 200) + `""]`),
		"many-members":     manyMembers(5000),
		"many-members-rev": manyMembersReversed(5000),

		"small-sorted":    []byte(benchSmallSorted),
		"small-unsorted":  []byte(benchSmallUnsorted),
		"small-pretty":    indent(b, benchSmallUnsorted),
		"medium-sorted":   []byte(benchMediumSorted),
		"medium-unsorted": []byte(benchMediumUnsorted),
		"medium-pretty":   indent(b, benchMediumUnsorted),
	}
}

func manyMembers(n int) []byte {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`"k` + strconv.Itoa(100000+i) + `":` + strconv.Itoa(i))
	}
	sb.WriteString("}")
	return []byte(sb.String())
}

func manyMembersReversed(n int) []byte {
	var sb strings.Builder
	sb.WriteString("{")
	for i := n - 1; i >= 0; i-- {
		sb.WriteString(`"k` + strconv.Itoa(100000+i) + `":` + strconv.Itoa(i))
		if i > 0 {
			sb.WriteString(",")
		}
	}
	sb.WriteString("}")
	return []byte(sb.String())
}

// BenchmarkAppendCanonical measures steady-state canonicalisation into a
// reused buffer. The encoding-json-valid sub-benchmarks give a baseline:
// encoding/json only validating the same input.
func BenchmarkAppendCanonical(b *testing.B) {
	inputs := benchInputs(b)
	for _, name := range []string{"request", "canonical", "large", "deep-unsorted", "numbers", "escaped-strings", "many-members", "many-members-rev",
		"small-sorted", "small-unsorted", "small-pretty", "medium-sorted", "medium-unsorted", "medium-pretty"} {
		src := inputs[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			dst := make([]byte, 0, 2*len(src))
			for b.Loop() {
				var err error
				if dst, err = AppendCanonical(dst[:0], src, Limits{MaxBytes: 64 << 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, name := range []string{"request", "large"} {
		src := inputs[name]
		b.Run("encoding-json-valid/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(src) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkCanonicalize includes allocating the result.
func BenchmarkCanonicalize(b *testing.B) {
	src := []byte(benchRequest)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(src, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAllocations checks that canonicalising into a buffer with room to
// spare allocates nothing once the parser pool is warm.
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	for _, in := range []string{benchRequest, `{"b":{"d":[1,{"f":0,"e":1}],"c":null},"a":"\n"}`, `[1e21,-0,"\u0000"]`} {
		src := []byte(in)
		dst := make([]byte, 0, 4*len(src))
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := AppendCanonical(dst[:0], src, Limits{}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("AppendCanonical(%.40q...) allocates %v times per call, want 0", src, allocs)
		}
	}
}
