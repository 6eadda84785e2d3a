package main

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// metrics counts what the proxy does and writes it in the Prometheus text
// format. It needs no client library: a few counters and two histograms.
type metrics struct {
	mu       sync.Mutex
	outcomes map[idemhttp.Outcome]*atomic.Int64
	store    histogram
	upstream histogram
	purged   atomic.Int64
	storeErr atomic.Int64
	internal atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{outcomes: map[idemhttp.Outcome]*atomic.Int64{}, store: newHistogram(), upstream: newHistogram()}
}

// observe is the middleware's OnEvent.
func (m *metrics) observe(e idemhttp.Event) {
	m.mu.Lock()
	c := m.outcomes[e.Outcome]
	if c == nil {
		c = new(atomic.Int64)
		m.outcomes[e.Outcome] = c
	}
	m.mu.Unlock()
	c.Add(1)
	if e.StoreTime > 0 {
		m.store.observe(e.StoreTime)
	}
	if e.HandlerTime > 0 {
		m.upstream.observe(e.HandlerTime)
	}
	switch {
	case e.Outcome == idemhttp.OutcomeInternal:
		m.internal.Add(1)
	case e.Err != nil:
		m.storeErr.Add(1)
	}
}

func (m *metrics) count(o idemhttp.Outcome) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.outcomes[o]; c != nil {
		return c.Load()
	}
	return 0
}

func (m *metrics) write(w io.Writer) {
	fmt.Fprintln(w, "# HELP idem_requests_total Requests with a protected method (POST and PATCH), by outcome; pass_through is one without a key.")
	fmt.Fprintln(w, "# TYPE idem_requests_total counter")
	m.mu.Lock()
	names := make([]string, 0, len(m.outcomes))
	for o := range m.outcomes {
		names = append(names, string(o))
	}
	m.mu.Unlock()
	sort.Strings(names)
	for _, o := range names {
		fmt.Fprintf(w, "idem_requests_total{outcome=%q} %d\n", o, m.count(idemhttp.Outcome(o)))
	}
	for _, c := range []struct {
		name, help string
		v          int64
	}{
		{"idem_replays_total", "Responses answered from a record.", m.count(idemhttp.OutcomeReplayed)},
		{"idem_conflicts_total", "Requests answered 409 because the key was in flight.", m.count(idemhttp.OutcomeInProgress)},
		{"idem_mismatches_total", "Requests rejected because the key was reused with another request.", m.count(idemhttp.OutcomeMismatch)},
		{"idem_store_errors_total", "Requests that met a store error (or a record that did not read).", m.storeErr.Load()},
		{"idem_internal_errors_total", "Requests answered 500 because their scope or fingerprint could not be computed.", m.internal.Load()},
		{"idem_purged_records_total", "Expired records deleted by the periodic purge.", m.purged.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.v)
	}
	m.store.write(w, "idem_store_seconds", "Time spent in store calls per request.")
	m.upstream.write(w, "idem_upstream_seconds", "Time spent in the upstream per request.")
}

// histogram is a fixed-bucket latency histogram.
type histogram struct {
	bounds []float64 // seconds
	counts []atomic.Int64
	sumNs  atomic.Int64
	total  atomic.Int64
}

func newHistogram() histogram {
	b := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	return histogram{bounds: b, counts: make([]atomic.Int64, len(b))}
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	for i, b := range h.bounds {
		if s <= b {
			h.counts[i].Add(1)
			break
		}
	}
	h.sumNs.Add(int64(d))
	h.total.Add(1)
}

func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, b, cum)
	}
	// An observation counts in its bucket before the total: one made
	// while the buckets were read may be in them and not yet in the
	// total, which must not fall below them.
	total := max(h.total.Load(), cum)
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, total)
	fmt.Fprintf(w, "%s_sum %g\n", name, time.Duration(h.sumNs.Load()).Seconds())
	fmt.Fprintf(w, "%s_count %d\n", name, total)
}
