package durable

import (
	"testing"
	"time"
)

// TestRateLimitDefaults pins the defaults validate fills in, and that the
// caller's map is left alone.
func TestRateLimitDefaults(t *testing.T) {
	in := map[string]RateLimit{"a": {Limit: 5}, "b": {Limit: 3, Period: time.Minute, Burst: 7}}
	got, err := validateRateLimits(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := (RateLimit{Limit: 5, Period: time.Second, Burst: 5}); got["a"] != want {
		t.Errorf("a = %+v, want %+v", got["a"], want)
	}
	if want := (RateLimit{Limit: 3, Period: time.Minute, Burst: 7}); got["b"] != want {
		t.Errorf("b = %+v, want %+v", got["b"], want)
	}
	if in["a"].Period != 0 {
		t.Errorf("the caller's map changed: %+v", in["a"])
	}
	l := newRateLimits(got)
	if len(l.names) != 2 || l.names[0] != "a" || l.rates[0] != 5 || l.bursts[0] != 5 || l.rates[1] != 3.0/60 {
		t.Errorf("flattened: %+v", l)
	}
}

// TestRefillTime pins when the picker comes back for tokens: the time to
// refill what is missing, but no sooner than a quarter of the burst's
// refill, within 1ms…25ms.
func TestRefillTime(t *testing.T) {
	for name, tc := range map[string]struct {
		rl   RateLimit
		need float64
		want time.Duration
	}{
		"one token at 10/s":        {RateLimit{Limit: 10, Period: time.Second, Burst: 1}, 1, 100 * time.Millisecond},
		"floor of a large burst":   {RateLimit{Limit: 200, Period: time.Second, Burst: 200}, 0.1, 25 * time.Millisecond},
		"floor of a small burst":   {RateLimit{Limit: 200, Period: time.Second, Burst: 4}, 0.1, 5 * time.Millisecond},
		"at least a millisecond":   {RateLimit{Limit: 100000, Period: time.Second, Burst: 1}, 0.5, time.Millisecond},
		"slow bucket, many tokens": {RateLimit{Limit: 1, Period: time.Hour, Burst: 1}, 1, time.Hour},
	} {
		if got := refillTime(tc.rl, tc.need); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
