package redisstore

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
)

// Begin implements idem.Store. The decision is taken by a Lua script in one
// atomic step on the record's key, with the time of the store's clock; on
// Redis 7.0 or later, a Begin of a new key writes its record with the
// script's first command (see beginScript).
func (s *Store) Begin(ctx context.Context, key idem.Key, req idem.Request, opts *idem.BeginOpts) (idem.Outcome, error) {
	if err := idem.CheckBegin(key, req, opts, s.cfg.MaxPayload); err != nil {
		return idem.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Outcome{}, err
	}
	retention, leaseTTL := opts.Durations(s.cfg.Retention, s.cfg.Lease)
	clock := s.cfg.Now()
	leaseExp := after(clock, leaseTTL)
	b := beginCall{s: s, key: key, rkey: s.key(key), fp: req.Fingerprint, token: idem.NewToken(), leaseTTL: leaseTTL, leaseExp: leaseExp, now: clock.UnixMilli()}
	expires := max(after(clock, retention), leaseExp) // the record lives at least as long as its lease
	fp := req.Fingerprint.Bytes()
	payload := req.RecordedPayload()
	// The record is the store's own buffer, never the caller's: a command
	// that outlives its caller (see await) may hold it.
	rec := appendInProgress(make([]byte, 0, headerLen+len(fp)+len(b.token)+len(payload)), fp, b.token, payload, b.now, expires, leaseExp)
	return b.run(ctx, fp, rec, expires-b.now)
}

// beginCall is one Begin.
type beginCall struct {
	s        *Store
	key      idem.Key
	rkey     string
	fp       idem.Fingerprint
	token    string
	leaseTTL time.Duration
	leaseExp int64 // Unix ms, the new lease's end
	now      int64 // Unix ms
}

// inlineMax is the longest part (result, stored error or recorded
// request) that beginScript answers with itself. A Begin that finds a
// record so copies at most this much of it, past beginReadAhead, into the
// server's Lua heap, which maxmemory does not count and which keeps its
// garbage until Lua's collector runs. A longer part stays in the record
// and Begin reads it with GET: a round trip more, which costs more than
// copying 64 KiB twice (into the Lua heap, and out of it into the reply).
const inlineMax = 64 << 10

// recordReads is how many times in a row Begin reads a record the script
// left to it, only to find it replaced meanwhile, before it has the script
// answer with the record's parts whatever their size: a bound on the
// round trips of a Begin on a key that is being replaced again and again.
const recordReads = 2

// run runs beginScript with fp (b.fp's bytes), the new record rec and its
// time to live, and reads the record when the script leaves it to Begin.
func (b *beginCall) run(ctx context.Context, fp, rec []byte, ttl int64) (idem.Outcome, error) {
	inline := int64(inlineMax)
	for reads := 0; ; reads++ {
		if reads == recordReads {
			inline = math.MaxInt64
		}
		reply, err := b.decide(ctx, fp, rec, ttl, inline)
		if err != nil {
			return idem.Outcome{}, err
		}
		o, token, err := b.outcome(reply)
		if err != nil || token == "" {
			return o, err
		}
		o, found, err := b.readRecord(ctx, token)
		if err != nil || found {
			return o, err
		}
		if err := ctx.Err(); err != nil {
			return idem.Outcome{}, err
		}
	}
}

// decide runs beginScript once, answering with parts up to inline bytes.
func (b *beginCall) decide(ctx context.Context, fp, rec []byte, ttl, inline int64) ([]any, error) {
	var unheard func([]any, error) // made only where await may use it: Begin is hot
	cctx, cancel := ctx, context.CancelFunc(nil)
	if ctx.Done() != nil {
		unheard = func(reply []any, err error) {
			// The caller left before the answer: a reservation it made is
			// released, or the key would answer InFlight until the lease
			// lapsed, held by nobody. FailTransient checks the token this
			// call sent, so it releases nobody else's reservation.
			if err != nil {
				return
			}
			if o, _, err := b.outcome(reply); err == nil && o.Kind == idem.Fresh {
				rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
				defer stop()
				_ = b.s.FailTransient(rctx, b.key, o.Lease)
			}
		}
		if !b.s.cfg.AutoPipeline {
			// A plain client gives the answer up at ctx's deadline (with
			// ContextTimeoutEnabled) or when ctx ends while it waits for a
			// connection or a retry, though the command may have run:
			// the command reads its answer on, for settleTimeout more.
			cctx, cancel = detach(ctx)
		}
	}
	mode := ""
	if b.s.getFirst {
		mode = "get"
	}
	reply, err := await(ctx, &b.s.apart, unheard != nil, func() ([]any, error) {
		if cancel != nil {
			defer cancel()
		}
		return beginScript.Run(cctx, b.s.calls, []string{b.rkey},
			b.now, fp, b.token, rec, b.leaseExp, ttl, mode, inline,
		).Slice()
	}, unheard)
	if err != nil {
		return nil, callError(ctx, "begin", err)
	}
	return reply, nil
}

// readRecord reads the record the script answered codeReadRecord for,
// with GET, and answers from it as the script would have: it is the
// record with that token, whose fingerprint, request and (once settled)
// status and tail no call changes. found is false when the key holds
// another record by then (replaced, deleted, evicted), or none: the
// script must decide again.
func (b *beginCall) readRecord(ctx context.Context, token string) (o idem.Outcome, found bool, err error) {
	if b.s.beforeRecordRead != nil {
		b.s.beforeRecordRead()
	}
	v, err := await(ctx, &b.s.apart, b.s.outlives(ctx), func() (string, error) {
		return b.s.calls.Get(ctx, b.rkey).Result()
	}, nil)
	if errors.Is(err, redis.Nil) {
		return idem.Outcome{}, false, nil
	}
	if err != nil {
		return idem.Outcome{}, false, callError(ctx, "begin", err)
	}
	rec, recToken, part, err := decodeParts(v)
	if err != nil {
		return idem.Outcome{}, false, corruptError("begin", b.rkey, part, err)
	}
	if recToken != token {
		return idem.Outcome{}, false, nil
	}
	if rec.Fingerprint == b.fp && rec.Status == idem.StatusInProgress {
		// The script never leaves that to Begin, and a record's status
		// never goes back to in progress.
		return idem.Outcome{}, false, replyError("begin", "a record left to Begin in progress")
	}
	// A Mismatch, a PriorResult or a PriorError, which need no clock.
	o, _ = idem.Decide(rec, b.fp, timeOf(b.now))
	return o, true, nil
}

// fresh is the Fresh outcome of this call's reservation.
func (b *beginCall) fresh(fence, leaseExp int64, takenOver bool) idem.Outcome {
	return idem.Outcome{
		Kind:      idem.Fresh,
		Lease:     idem.Lease{Token: b.token, Fence: fence, ExpiresAt: timeOf(leaseExp), TTL: b.leaseTTL},
		TakenOver: takenOver,
	}
}

// outcome decodes the reply of beginScript: the outcome, or for
// codeReadRecord the token of the record Begin must read to find it.
func (b *beginCall) outcome(reply []any) (o idem.Outcome, readToken string, err error) {
	code, ok := int64Of(first(reply))
	if !ok {
		return idem.Outcome{}, "", replyError("begin", reply)
	}
	switch {
	case code == codeFresh && len(reply) == 4:
		fence, ok1 := int64Of(reply[1])
		leaseExp, ok2 := int64Of(reply[2])
		takenOver, ok3 := int64Of(reply[3])
		if !ok1 || !ok2 || !ok3 {
			return idem.Outcome{}, "", replyError("begin", reply)
		}
		return b.fresh(fence, leaseExp, takenOver == 1), "", nil
	case code == codePriorResult && len(reply) == 2:
		result, ok := bytesOf(reply[1])
		if !ok {
			return idem.Outcome{}, "", replyError("begin", reply)
		}
		return idem.Outcome{Kind: idem.PriorResult, Result: result}, "", nil
	case code == codePriorError && len(reply) == 2:
		enc, ok := reply[1].(string)
		if !ok {
			return idem.Outcome{}, "", replyError("begin", reply)
		}
		se, err := decodeStoredError(enc)
		if err != nil {
			return idem.Outcome{}, "", corruptError("begin", b.rkey, "error", err)
		}
		return idem.Outcome{Kind: idem.PriorError, Error: se}, "", nil
	case code == codeMismatch && len(reply) == 3:
		fpBytes, ok1 := bytesOf(reply[1])
		request, ok2 := bytesOf(reply[2])
		if !ok1 || !ok2 {
			return idem.Outcome{}, "", replyError("begin", reply)
		}
		recorded, err := idem.ParseFingerprint(fpBytes)
		if err != nil {
			return idem.Outcome{}, "", corruptError("begin", b.rkey, "fingerprint", err)
		}
		return idem.Outcome{Kind: idem.Mismatch, RecordedHash: recorded, SubmittedHash: b.fp, RecordedRequest: request}, "", nil
	case code == codeInFlight && len(reply) == 2:
		leaseExp, ok := int64Of(reply[1])
		if !ok {
			return idem.Outcome{}, "", replyError("begin", reply)
		}
		// Sub caps the rest of a lease "for good" (math.MaxInt64, one
		// millisecond more once rounded up) instead of wrapping around.
		return idem.Outcome{Kind: idem.InFlight, RetryAfter: timeOf(leaseExp).Sub(timeOf(b.now))}, "", nil
	case code == codeReadRecord && len(reply) == 2:
		if token, ok := reply[1].(string); ok && token != "" {
			return idem.Outcome{}, token, nil
		}
	}
	return idem.Outcome{}, "", replyError("begin", reply)
}
