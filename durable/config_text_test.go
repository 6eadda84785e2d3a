package durable_test

import (
	"testing"

	"github.com/idemgo/idem/durable"
)

// TestUnstorableConfigTextRejected pins that NewClient rejects, with a
// *ConfigError naming the field, the configured text the engine sends with
// every claim that PostgreSQL cannot store (a NUL, invalid UTF-8): the
// engine's ID, a concurrency-limit prefix, a rate-limit name. Accepted,
// each made every claim of the engine fail, and its queues stall.
func TestUnstorableConfigTextRejected(t *testing.T) {
	t.Parallel()
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	for name, tc := range map[string]struct {
		cfg   durable.Config
		field string
	}{
		"ID with NUL":         {durable.Config{ID: "engine\x00"}, "Config.ID"},
		"ID not UTF-8":        {durable.Config{ID: "engine\xff"}, "Config.ID"},
		"prefix with NUL":     {durable.Config{ConcurrencyLimits: map[string]int{"t\x00": 2}}, `Config.ConcurrencyLimits["t\x00"]`},
		"prefix not UTF-8":    {durable.Config{ConcurrencyLimits: map[string]int{"t\xff": 2}}, `Config.ConcurrencyLimits["t\xff"]`},
		"rate name with NUL":  {durable.Config{RateLimits: map[string]durable.RateLimit{"api\x00": {Limit: 1}}}, `Config.RateLimits["api\x00"]`},
		"rate name not UTF-8": {durable.Config{RateLimits: map[string]durable.RateLimit{"api\xff": {Limit: 1}}}, `Config.RateLimits["api\xff"]`},
	} {
		c, err := durable.NewClient(pool, &tc.cfg)
		checkConfigError(t, name, c, err, tc.field)
	}
}
