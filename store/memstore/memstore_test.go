package memstore_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	idemtest.Exercise(t, idemtest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) idem.Store {
			s, err := memstore.New(memstore.Config{Now: now, Retention: idemtest.Retention, Lease: idemtest.Lease, MaxPayload: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		MaxPayload: 1 << 16,
	})
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]memstore.Config{
		"negative retention": {Retention: -1},
		"negative lease":     {Lease: -1},
		"negative payload":   {MaxPayload: -1},
	} {
		if _, err := memstore.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
