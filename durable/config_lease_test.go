package durable_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// TestSubMicrosecondLeaseRejected pins that NewClient rejects a LeaseTTL
// below the microsecond the database stores leases in: such a lease
// expires as it is taken, and its default HeartbeatInterval (LeaseTTL/3)
// may round to zero, which Start's ticker would panic on.
func TestSubMicrosecondLeaseRejected(t *testing.T) {
	t.Parallel()
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	for _, ttl := range []time.Duration{1, 2, 999} {
		cfg := durable.Config{LeaseTTL: ttl}
		c, err := durable.NewClient(pool, &cfg)
		checkConfigError(t, "LeaseTTL "+ttl.String(), c, err, "Config.LeaseTTL")
	}
}
