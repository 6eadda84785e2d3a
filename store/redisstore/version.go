package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the store works with: PurgeExpired
// needs SCAN … TYPE, new in Redis 6.0.
const MinRedisVersion = "6.0"

// minMajor and minMinor are MinRedisVersion.
const minMajor, minMinor = 6, 0

// VersionError reports a Redis server older than MinRedisVersion. It is not
// wrapped with idem.ErrUnavailable, as retrying cannot help: Check and
// PurgeExpired return it; find it with errors.As.
type VersionError struct {
	Addr     string // the server's address
	Found    string // the version it reports (INFO's redis_version)
	Required string // MinRedisVersion
}

func (e *VersionError) Error() string {
	at := ""
	if e.Addr != "" {
		at = " at " + e.Addr
	}
	return fmt.Sprintf("redisstore: Redis%s is version %s; the store needs Redis %s or later", at, e.Found, e.Required)
}

// Check asks every Redis server the store's client reaches (the server, or
// each node of a Redis Cluster, or each shard of a Ring that the Ring
// deems up) for its version, with INFO server. It returns a *VersionError
// for a server older than MinRedisVersion, and an error satisfying
// errors.Is(err, idem.ErrUnavailable) when a server cannot be asked. A
// server that refuses INFO (a renamed command, an ACL) or does not report
// a redis_version is not checked. New does no I/O: call Check once the
// client is made, to fail early rather than at the first PurgeExpired.
func (s *Store) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var mu sync.Mutex
	var errs []error
	each := func(ctx context.Context, c *redis.Client) error {
		err := nodeVersion(ctx, c.Options().Addr, c)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return err
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	case *redis.Client:
		err = each(ctx, c)
	default:
		err = nodeVersion(ctx, "", c)
	}
	if len(errs) > 0 {
		err = errors.Join(errs...)
	}
	if err == nil || isVersionError(err) {
		return err
	}
	return callError(ctx, "check", err)
}

// isVersionError reports whether err holds a *VersionError: not a failure
// that goes away, so not idem.ErrUnavailable.
func isVersionError(err error) bool {
	var ve *VersionError
	return errors.As(err, &ve)
}

// nodeVersion asks the server at addr for its version through c: a
// *VersionError when it is too old, nil when it is not or does not say,
// the client's error when it cannot be asked.
func nodeVersion(ctx context.Context, addr string, c redis.Cmdable) error {
	info, err := c.Info(ctx, "server").Result()
	var reply redis.Error
	switch {
	case errors.As(err, &reply): // INFO refused: the server cannot be checked
		return nil
	case err != nil && addr != "":
		return fmt.Errorf("%s: %w", addr, err)
	case err != nil:
		return err
	}
	return checkVersion(addr, info)
}

// checkVersion holds the redis_version of info, an INFO reply of the
// server at addr, against MinRedisVersion.
func checkVersion(addr, info string) error {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, rest, _ := strings.Cut(v, ".")
		minor, _, _ := strings.Cut(rest, ".")
		maj, err1 := strconv.Atoi(major)
		mnr, err2 := strconv.Atoi(minor)
		if minor == "" {
			mnr, err2 = 0, nil
		}
		if err1 != nil || err2 != nil {
			return nil // not a version it can read
		}
		if maj < minMajor || maj == minMajor && mnr < minMinor {
			return &VersionError{Addr: addr, Found: v, Required: MinRedisVersion}
		}
		return nil
	}
	return nil
}
