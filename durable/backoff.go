package durable

import (
	"math/rand/v2"
	"time"
)

// The default backoff's base and cap.
const (
	backoffBase = time.Second
	backoffCap  = time.Hour
)

// DefaultBackoff is the delay before attempt+1 after attempt failed under
// the default error handling: 1s after the first attempt, doubling with each
// attempt, capped at one hour, less up to 10% at random so that instances
// failing together do not retry together.
func DefaultBackoff(attempt int) time.Duration {
	d := backoffCap
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 20 { // 2^20 s is far past the cap
		if e := backoffBase << (attempt - 1); e < backoffCap {
			d = e
		}
	}
	return d - time.Duration(rand.Int64N(int64(d)/10+1))
}
