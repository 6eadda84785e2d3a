package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/store/pgstore"
)

// TestUnmigratedSaysMigrate: a store used before Migrate made its table
// fails each call with ErrUnavailable (the schema may yet arrive, as in a
// deployment whose migration runs after the service started) and says
// what to do, rather than only the server's "relation does not exist".
func TestUnmigratedSaysMigrate(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		pool := newPool(t, pgtest.URL(t))
		s, err := pgstore.New(pool, pgstore.Config{Table: "never_migrated", Pipeline: pipeline})
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		k, _ := idem.ParseKey(idem.MustNamespace("t"), "k")
		req, _ := idem.NewRequest([]byte(`{}`))
		_, beginErr := s.Begin(ctx, k, req, nil)
		_, getErr := s.Get(ctx, k)
		_, purgeErr := s.PurgeExpired(ctx, k.Namespace(), time.Now())
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, txErr := s.WithTx(tx).Begin(ctx, k, req, nil)
		_ = tx.Rollback(ctx)
		for op, err := range map[string]error{"Begin": beginErr, "Get": getErr, "PurgeExpired": purgeErr, "WithTx Begin": txErr} {
			if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
				t.Errorf("pipeline %v: %s on an unmigrated schema: %v; want ErrUnavailable naming Migrate", pipeline, op, err)
			}
		}
	}
}
