package durable_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// TestUnstorableTargetKeysAreRejected pins that a call addressed by a
// correlation key PostgreSQL cannot store (a NUL, invalid UTF-8), which no
// instance can carry, fails with ErrUnstorable before it sends anything:
// the caller's transaction of SignalTx stays usable, instead of being
// aborted by the database's encoding error.
func TestUnstorableTargetKeysAreRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := ctxT(t)
	for _, key := range []string{"k\x00", "k\xff"} {
		target := durable.ByKey(key)
		for what, call := range map[string]func() error{
			"Signal": func() error { return b.client.Signal(ctx, target, "x", nil, "") },
			"Cancel": func() error { return b.client.Cancel(ctx, target, "") },
			"Retry":  func() error { _, err := b.client.Retry(ctx, target, nil); return err },
			"Lookup": func() error { _, err := b.client.Lookup(ctx, key); return err },
		} {
			if err := call(); !errors.Is(err, durable.ErrUnstorable) {
				t.Errorf("%s(%q): %v, want ErrUnstorable", what, key, err)
			}
		}
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if err := b.client.SignalTx(ctx, tx, target, "x", nil, ""); !errors.Is(err, durable.ErrUnstorable) {
				t.Errorf("SignalTx(%q): %v, want ErrUnstorable", key, err)
			}
			var one int
			return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
		})
		if err != nil {
			t.Errorf("the transaction of SignalTx(%q) is no longer usable: %v", key, err)
		}
	}
}
