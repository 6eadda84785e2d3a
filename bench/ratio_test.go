// Package bench holds side-by-side benchmarks of idem against baselines
// measured in the same run. It is its own module so that the peer libraries
// it compares against never enter idem's go.mod.
//
// Each benchmark measures its baseline once (testing.Benchmark) and reports
// "x-baseline": idem's time per op divided by the baseline's. Absolute times
// on shared machines are noise; the ratio is the figure that counts.
package bench

import (
	"testing"
	"time"
)

// reportRatio reports b's time per op relative to a baseline. It stops b's
// timer, runs baseline for the same number of operations b.N (the baseline
// times its own loop, without its set-up, and returns that time) and reports
// "x-baseline" (idem's time per op divided by the baseline's; below 1 means
// faster) and the baseline's ns/op. Call it at the end of the benchmark.
func reportRatio(b *testing.B, baseline func(n int) time.Duration) {
	b.Helper()
	b.StopTimer()
	own := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	base := float64(baseline(b.N).Nanoseconds()) / float64(b.N)
	if base > 0 {
		b.ReportMetric(own/base, "x-baseline")
	}
	b.ReportMetric(base, "baseline-ns/op")
}
