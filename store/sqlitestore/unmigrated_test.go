package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestUnmigratedSaysMigrate: a store used before Migrate made its table
// fails each call with ErrUnavailable (the schema may yet arrive, as in a
// deployment whose migration runs after the service started) and says
// what to do, rather than only the driver's "no such table".
func TestUnmigratedSaysMigrate(t *testing.T) {
	for _, batch := range []bool{false, true} {
		db := openDB(t, filepath.Join(t.TempDir(), "idem.db"), dsnParams, 4)
		s := newStoreBatch(t, db, nil, batch)
		ctx := context.Background()
		k := mustKey(t, idem.MustNamespace("t"), "k")
		_, beginErr := s.Begin(ctx, k, mustRequest(t, `{}`), nil)
		_, getErr := s.Get(ctx, k)
		_, purgeErr := s.PurgeExpired(ctx, k.Namespace(), time.Now())
		for op, err := range map[string]error{"Begin": beginErr, "Get": getErr, "PurgeExpired": purgeErr} {
			if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
				t.Errorf("batch %v: %s on an unmigrated database: %v; want ErrUnavailable naming Migrate", batch, op, err)
			}
		}
	}
}
