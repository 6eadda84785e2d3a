package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
)

// scanCount is the COUNT hint of each SCAN, and so about the number of
// deletions sent in one pipeline.
const scanCount = 512

// PurgeExpired implements idem.Store. It walks the keys of namespace ns
// with SCAN … MATCH <prefix><ns>:* TYPE string (on a *redis.ClusterClient on
// every master, on a *redis.Ring on every shard) and deletes each record
// whose stored expires_at is at or before asOf with a script that checks it
// again atomically, so a record written again meanwhile survives. Keys of
// other namespaces never match the pattern.
//
// Redis evicts records by their TTL on its own, so PurgeExpired is needed
// only to reclaim memory sooner (for example after a clock change) and to
// count. SCAN may visit a key twice; the count is the number of keys
// actually deleted. On error it returns the count so far with the error,
// which names the server whose scan failed. A Ring skips the shards it
// deems down: PurgeExpired then purges the others and returns their count
// with a *ShardsNotPurgedError (wrapped with idem.ErrUnavailable) naming
// the shards of RingOptions.Addrs it could not scan (after Ring.SetAddrs,
// those of the first Addrs it no longer holds count as such too).
func (s *Store) PurgeExpired(ctx context.Context, ns idem.Namespace, asOf time.Time) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p := purge{s: s, match: namespacePattern(s.cfg.Prefix, ns), asOf: asOf.UnixMilli()}
	var mu sync.Mutex
	scanned := map[string]bool{} // the addresses of the servers scanned
	var errs []error
	scan := func(ctx context.Context, addr string, c redis.Cmdable) error {
		err := p.node(ctx, c)
		var reply redis.Error
		if errors.As(err, &reply) { // SCAN … TYPE refused: by a server too old?
			if verr := nodeVersion(ctx, addr, c); isVersionError(verr) {
				err, addr = verr, "" // which names the server
			}
		}
		mu.Lock()
		defer mu.Unlock()
		scanned[addr] = true
		if err != nil && addr != "" {
			err = fmt.Errorf("%s: %w", addr, err)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return err
	}
	each := func(ctx context.Context, c *redis.Client) error { return scan(ctx, c.Options().Addr, c) }
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
		if skipped := notPurged(c.Options().Addrs, scanned); skipped != nil {
			errs = append(errs, skipped)
		}
	case *redis.Client:
		err = each(ctx, c)
	default:
		err = scan(ctx, "", c)
	}
	n := int(p.deleted.Load())
	if len(errs) > 0 { // every error of each, not only the one ForEach… returns
		err = errors.Join(errs...)
	}
	switch {
	case isVersionError(err):
		return n, err
	case err != nil:
		return n, callError(ctx, "purge expired", err)
	}
	return n, nil
}

// notPurged returns the error naming the shards of addrs (name to address)
// whose address is not among those scanned, or nil.
func notPurged(addrs map[string]string, scanned map[string]bool) error {
	e := &ShardsNotPurgedError{}
	for _, name := range slices.Sorted(maps.Keys(addrs)) {
		if !scanned[addrs[name]] {
			e.Shards = append(e.Shards, name)
			e.Addrs = append(e.Addrs, addrs[name])
		}
	}
	if e.Shards == nil {
		return nil
	}
	return e
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
		keys, next, err := node.ScanType(ctx, cursor, p.match, scanCount, "string").Result()
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
