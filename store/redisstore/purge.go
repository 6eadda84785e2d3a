package redisstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
)

// scanCount is the COUNT hint of each SCAN, and so about the number of
// deletions sent in one pipeline.
const scanCount = 512

// PurgeExpired implements idem.Store. It walks the keys of namespace ns
// with SCAN … MATCH <prefix><ns>:* TYPE hash (on a *redis.ClusterClient on
// every master, on a *redis.Ring on every shard) and deletes each record
// whose stored expires_at is at or before asOf with a script that checks it
// again atomically, so a record written again meanwhile survives. Keys of
// other namespaces never match the pattern.
//
// Redis evicts records by their TTL on its own, so PurgeExpired is needed
// only to reclaim memory sooner (for example after a clock change) and to
// count. SCAN may visit a key twice; the count is the number of keys
// actually deleted. On error it returns the count so far with the error.
func (s *Store) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p := purge{s: s, match: namespacePattern(s.cfg.Prefix, ns), asOf: asOf.UnixMilli()}
	each := func(ctx context.Context, c *redis.Client) error { return p.node(ctx, c) }
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	default:
		err = p.node(ctx, s.client)
	}
	n := int(p.deleted.Load())
	if err != nil {
		return n, callError(ctx, "purge expired", err)
	}
	return n, nil
}

// purge is one run of PurgeExpired; node runs once per server, maybe
// concurrently.
type purge struct {
	s       *Store
	match   string
	asOf    int64
	deleted atomic.Int64
}

// node scans one server and deletes what is expired among its keys.
func (p *purge) node(ctx context.Context, node redis.Cmdable) error {
	var cursor uint64
	for {
		keys, next, err := node.ScanType(ctx, cursor, p.match, scanCount, "hash").Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := p.delete(ctx, keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// delete runs purgeScript on keys in one pipeline, through the store's
// client, which routes each key to the node that holds it now. Keys the
// server had no cached script for are run again one by one with
// Script.Run, which falls back to EVAL.
func (p *purge) delete(ctx context.Context, keys []string) error {
	cmds := make([]*redis.Cmd, len(keys))
	_, _ = p.s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = purgeScript.EvalSha(ctx, pipe, []string{k}, p.asOf)
		}
		return nil
	})
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			n, err = purgeScript.Run(ctx, p.s.client, []string{keys[i]}, p.asOf).Int64()
		}
		if err != nil {
			return err
		}
		p.deleted.Add(n)
	}
	return nil
}
