package main

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHistogramStaysConsistentUnderObservations: a scrape taken while
// requests are observed never shows a bucket above +Inf, nor a count
// other than +Inf's: a Prometheus histogram whose buckets are not
// monotonic breaks the quantiles computed from it.
func TestHistogramStaysConsistentUnderObservations(t *testing.T) {
	h := newHistogram()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					h.observe(time.Millisecond)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 20_000 {
		var out bytes.Buffer
		h.write(&out, "t", "test")
		var last, inf, count int64 = -1, -1, -1
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			n, _ := strconv.ParseInt(f[1], 10, 64)
			switch {
			case strings.HasPrefix(f[0], `t_bucket{le="+Inf"}`):
				inf = n
			case strings.HasPrefix(f[0], "t_bucket"):
				last = n
			case f[0] == "t_count":
				count = n
			}
		}
		if inf < last || count != inf {
			t.Fatalf("scrape %d: last bucket %d, +Inf %d, count %d; want last ≤ +Inf = count", i, last, inf, count)
		}
	}
}
