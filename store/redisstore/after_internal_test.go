package redisstore

import (
	"math"
	"testing"
	"time"
)

// after never ends a lease or retention early (it rounds the end up, by
// less than one unit) and never wraps around.
func TestAfterIsNeverShorterThanAsked(t *testing.T) {
	base := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, offset := range []time.Duration{0, time.Microsecond, 900 * time.Microsecond, 999_999} {
		for _, d := range []time.Duration{time.Nanosecond, time.Millisecond, 1500 * time.Microsecond, time.Hour} {
			now := base.Add(offset)
			end := time.UnixMilli(after(now, d))
			if end.Before(now.Add(d)) || !end.Before(now.Add(d).Add(time.Millisecond)) {
				t.Errorf("after(%v, %v) = %v, want within 1ms after %v", now, d, end, now.Add(d))
			}
		}
	}
	if end := time.UnixMilli(after(base, math.MaxInt64)); end.Before(base.Add(290 * 365 * 24 * time.Hour)) {
		t.Errorf("after(now, MaxInt64) = %v, want 292 years ahead", end)
	}
}
