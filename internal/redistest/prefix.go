package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Prefix returns a key prefix for tb alone, of the form "test:<hex>:", for
// keeping apart from the other tests on the shared server. When tb ends,
// the keys under it on the shared server are deleted.
func Prefix(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	prefix := "test:" + hex.EncodeToString(b) + ":"
	tb.Cleanup(func() {
		url, ok := sharedURLIfAny()
		if !ok {
			return
		}
		if err := deleteKeys(url, prefix); err != nil {
			tb.Errorf("redistest: deleting keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

// deleteKeys deletes the keys under prefix, which holds no glob characters.
func deleteKeys(url, prefix string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return c.Unlink(ctx, batch...).Err()
	}
	return nil
}
