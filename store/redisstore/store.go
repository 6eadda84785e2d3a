package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/leftcalls"
)

// Store is an idem.Store on Redis, in lease mode. It is safe for concurrent
// use, and any number of Stores in any number of processes may share one
// Redis deployment: every transition is one atomic Lua script.
type Store struct {
	client redis.UniversalClient
	// calls is what the record calls go through: client, or its
	// auto-pipeliner (Config.AutoPipeline).
	calls redis.UniversalClient
	cfg   Config
	// getFirst makes Begin read the key first, as on a server before
	// Redis 7.0, instead of writing first with SET … NX: set by the tests
	// of that path.
	getFirst bool
	// beforeRecordRead, when set (by the tests), is called by a Begin
	// between its script, which left the record to it, and its GET.
	beforeRecordRead func()
	// apart counts the commands made in a goroutine of their own for
	// callers that may leave first (see await), which Drain waits for.
	apart leftcalls.Counter
}

var _ idem.Store = (*Store)(nil)

// New returns a Store keeping its records through client: a *redis.Client
// (a single server, or Sentinel failover), a *redis.ClusterClient or a
// *redis.Ring. New does no I/O; the scripts are loaded into the server on
// first use, and Check asks the servers whether they are recent enough
// (MinRedisVersion). The store does not own client: closing it is the caller's
// business, after the last call on the store and a Drain.
//
// New fails if client is nil, or a nil pointer of a client type (a nil
// *redis.Client in the interface), which would panic in the first call;
// otherwise the error names the offending Config field.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if v := reflect.ValueOf(client); client == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, errors.New("redisstore: New: client is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{client: client, calls: client, cfg: cfg}
	if cfg.AutoPipeline {
		ap, err := client.AutoPipeline()
		if err != nil {
			return nil, fmt.Errorf("redisstore: Config.AutoPipeline: %w", err)
		}
		s.calls = ap
	}
	return s, nil
}

// key returns the Redis key of the record of k.
func (s *Store) key(k idem.Key) string { return recordKey(s.cfg.Prefix, k) }

// nowMillis reads the store's clock, in Unix milliseconds.
func (s *Store) nowMillis() int64 { return s.cfg.Now().UnixMilli() }

// timeOf converts stored Unix milliseconds to a time.
func timeOf(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// Commit implements idem.Store. The result is stored as given and replayed
// byte for byte. A repeat of a Commit that succeeded, with the same lease
// and the same result, succeeds again and changes nothing; any other call
// with a lease that is not current fails with idem.ErrStaleToken.
func (s *Store) Commit(ctx context.Context, key idem.Key, lease idem.Lease, result []byte) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	if err := idem.CheckPayload("result", result, s.cfg.MaxPayload); err != nil {
		return err
	}
	return s.settle(ctx, "commit", commitScript, key, lease, result)
}

// FailPermanent implements idem.Store. The error is stored as JSON, and
// counts against Config.MaxPayload. A repeat with the same lease and the
// same error succeeds again, as for Commit.
func (s *Store) FailPermanent(ctx context.Context, key idem.Key, lease idem.Lease, e idem.StoredError) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	enc, err := json.Marshal(e)
	if err != nil { // a struct of strings always encodes
		return err
	}
	if len(enc) > s.cfg.MaxPayload {
		return &idem.PayloadTooLargeError{What: "error", Size: len(enc), Limit: s.cfg.MaxPayload}
	}
	return s.settle(ctx, "fail permanent", failPermanentScript, key, lease, enc)
}

// FailTransient implements idem.Store: it deletes the record, so the next
// Begin is Fresh (with fence 1 again: the fence counts only while a record
// exists; tokens, being random, are never current twice).
func (s *Store) FailTransient(ctx context.Context, key idem.Key, lease idem.Lease) error {
	if err := idem.CheckLease(key, lease); err != nil {
		return err
	}
	return s.settle(ctx, "fail transient", failTransientScript, key, lease)
}

// Heartbeat implements idem.Store.
func (s *Store) Heartbeat(ctx context.Context, key idem.Key, lease idem.Lease, extend time.Duration) (idem.Lease, error) {
	if err := idem.CheckLease(key, lease); err != nil {
		return idem.Lease{}, err
	}
	if extend <= 0 {
		extend = s.cfg.Lease
	}
	clock := s.cfg.Now()
	leaseExp := after(clock, extend)
	if err := s.settle(ctx, "heartbeat", heartbeatScript, key, lease, leaseExp, leaseExp-clock.UnixMilli()); err != nil {
		return idem.Lease{}, err
	}
	return idem.Lease{Token: lease.Token, Fence: lease.Fence, ExpiresAt: timeOf(leaseExp), TTL: extend}, nil
}

// settle runs one of the scripts that begin with ownerCheck: ARGV now,
// token, fence, then args. A reply of 0 is idem.ErrStaleToken.
func (s *Store) settle(ctx context.Context, op string, script *redis.Script, key idem.Key, lease idem.Lease, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, s.nowMillis(), lease.Token, lease.Fence)
	argv = append(argv, args...)
	if s.outlives(ctx) {
		for i, a := range argv {
			if b, ok := a.([]byte); ok { // Commit's result
				argv[i] = bytes.Clone(b)
			}
		}
	}
	n, err := await(ctx, &s.apart, s.outlives(ctx), func() (int64, error) {
		return script.Run(ctx, s.calls, []string{s.key(key)}, argv...).Int64()
	}, nil)
	switch {
	case err != nil:
		return callError(ctx, op, err)
	case n == 0:
		return idem.ErrStaleToken
	case n == 1:
		return nil
	}
	return replyError(op, n)
}

// Get implements idem.Store. It reads the record with one GET; a record
// whose stored expires_at is at or before the store's now is
// idem.ErrNotFound, even while Redis still holds it.
func (s *Store) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	now := s.nowMillis()
	rkey := s.key(key)
	v, err := await(ctx, &s.apart, s.outlives(ctx), func() (string, error) {
		return s.calls.Get(ctx, rkey).Result()
	}, nil)
	if errors.Is(err, redis.Nil) {
		return idem.Record{}, idem.ErrNotFound
	}
	if err != nil {
		return idem.Record{}, callError(ctx, "get", err)
	}
	rec, err := decodeRecord(rkey, v)
	if err != nil {
		return idem.Record{}, err
	}
	if !timeOf(now).Before(rec.ExpiresAt) {
		return idem.Record{}, idem.ErrNotFound
	}
	rec.Key = key
	return *rec, nil
}

// await makes call, which sends one command (or a script's EVALSHA, then
// EVAL), and returns its answer, or ctx's error if ctx ends first. When
// apart is false, call is made as it is, in the caller's goroutine:
// through a plain client it gives up at the client's ReadTimeout (or at
// ctx's deadline, with ContextTimeoutEnabled) and retries nothing once ctx
// has ended. The auto-pipeliner does not watch ctx at all: it holds each
// caller until its batch is done, however long the server takes to answer
// and the client retries, which can be far longer than the client's
// ReadTimeout; and a Begin that reserved the key must not lose its answer
// when its caller leaves (see Begin). So when apart, call is made in a
// goroutine of its own, which ends with the command, and the caller
// returns when ctx ends; its command may still take effect, as a command
// whose context ends in flight may. call must then not send the slices
// its caller was given, which are the caller's again once the store's
// call has returned (idem.Store), but copies, and must end by itself (a
// plain client's call: by a context of detach). When the caller has left,
// the answer, when it comes, goes to unheard (if not nil) instead. The
// goroutine counts in counted until call and unheard have ended.
func await[T any](ctx context.Context, counted *leftcalls.Counter, apart bool, call func() (T, error), unheard func(T, error)) (T, error) {
	if !apart {
		return call()
	}
	counted.Add()
	type answer struct {
		v   T
		err error
	}
	// Whichever comes first, the answer or the caller's leaving, decides
	// who has the answer: the caller, or unheard.
	const pending, answered, left = 0, 1, 2
	var state atomic.Int32
	done := make(chan answer, 1)
	go func() {
		defer counted.Done()
		v, err := call()
		if state.CompareAndSwap(pending, answered) {
			done <- answer{v, err}
		} else if unheard != nil {
			unheard(v, err)
		}
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, left) {
			var zero T
			return zero, ctx.Err()
		}
		a := <-done // answered meanwhile: the answer stands
		return a.v, a.err
	}
}

// Drain waits until every command the store sent for a caller that has
// since left (its context ended first: see the package documentation, "A
// caller that leaves") has been answered, and a reservation such a Begin
// made has been released; or until ctx ends, and then returns ctx's error.
// Call it after the last call on the store and before closing the client:
// closing the client cuts those commands short, and a reservation whose
// release it cuts off holds its key until its lease lapses. With
// Config.AutoPipeline, closing the client flushes the batches under way,
// so a Begin of a caller that left may still reserve its key then, with
// nothing left to release it. Drain does not stop the store: calls made
// meanwhile are left to the caller.
func (s *Store) Drain(ctx context.Context) error {
	return s.apart.Idle(ctx)
}

// settleTimeout is how long after its caller's deadline a Begin whose
// caller left goes on reading its answer, to release the reservation it
// made (see Begin), and how long that release may take.
const settleTimeout = 2 * time.Second

// detach returns the context of a command that reads its answer for a
// caller that may leave first: it has ctx's values but not its end, and
// ends settleTimeout after ctx's deadline, if ctx has one, or settleTimeout
// after ctx ends. The client's own timeouts (ReadTimeout, PoolTimeout)
// bound it as well.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if end, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, end.Add(settleTimeout))
	}
	d, cancel := context.WithCancel(d)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(settleTimeout, cancel) })
	return d, func() { stop(); cancel() }
}

// outlives reports whether a call with ctx may return while its command
// waits to be sent (see await), so that the command must hold copies of
// the caller's slices, not the slices.
func (s *Store) outlives(ctx context.Context) bool {
	return s.cfg.AutoPipeline && ctx.Done() != nil
}

// first returns the first element of a reply, or nil.
func first(reply []any) any {
	if len(reply) == 0 {
		return nil
	}
	return reply[0]
}

// int64Of reads an integer reply element, which a script may give as an
// integer or as the decimal string it stored.
func int64Of(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// bytesOf reads a bulk-string reply element.
func bytesOf(v any) ([]byte, bool) {
	s, ok := v.(string)
	return []byte(s), ok
}
