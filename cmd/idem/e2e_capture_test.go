package main_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A response as large as --max-capture allows is recorded and replayed,
// also past the stores' default payload limit (4 MiB), which the proxy
// raises to fit: it is not left to fail its Commit, to be run again by
// every retry.
func TestMaxCaptureBeyondTheStoresDefault(t *testing.T) {
	var runs atomic.Int32
	big := strings.Repeat("x", 4<<20+512<<10) // 4.5 MiB, 6 MiB in the record's base64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(big))
	}))
	t.Cleanup(up.Close)
	for _, dsn := range []string{"memory", sqliteDSN(t)} {
		runs.Store(0)
		p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--max-capture", "5000000")
		first := send(t, p.base, "big", `{}`)
		retry := send(t, p.base, "big", `{}`)
		if first.status != 201 || retry.status != 201 || len(retry.body) != len(big) || !retry.replayed || runs.Load() != 1 {
			t.Errorf("%s: statuses %d %d, retry %d bytes replayed %v, %d runs; want the 4.5 MiB response recorded and replayed, one run",
				dsn, first.status, retry.status, len(retry.body), retry.replayed, runs.Load())
		}
	}
}
