package redisstore

import (
	"context"
	"time"

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

// run runs beginScript with fp (b.fp's bytes), the new record rec and its
// time to live.
func (b *beginCall) run(ctx context.Context, fp, rec []byte, ttl int64) (idem.Outcome, error) {
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
			if o, err := b.outcome(reply); err == nil && o.Kind == idem.Fresh {
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
			b.now, fp, b.token, rec, b.leaseExp, ttl, mode,
		).Slice()
	}, unheard)
	if err != nil {
		return idem.Outcome{}, callError(ctx, "begin", err)
	}
	return b.outcome(reply)
}

// fresh is the Fresh outcome of this call's reservation.
func (b *beginCall) fresh(fence, leaseExp int64, takenOver bool) idem.Outcome {
	return idem.Outcome{
		Kind:      idem.Fresh,
		Lease:     idem.Lease{Token: b.token, Fence: fence, ExpiresAt: timeOf(leaseExp), TTL: b.leaseTTL},
		TakenOver: takenOver,
	}
}

// outcome decodes the reply of beginScript.
func (b *beginCall) outcome(reply []any) (idem.Outcome, error) {
	code, ok := int64Of(first(reply))
	if !ok {
		return idem.Outcome{}, replyError("begin", reply)
	}
	switch {
	case code == codeFresh && len(reply) == 4:
		fence, ok1 := int64Of(reply[1])
		leaseExp, ok2 := int64Of(reply[2])
		takenOver, ok3 := int64Of(reply[3])
		if !ok1 || !ok2 || !ok3 {
			return idem.Outcome{}, replyError("begin", reply)
		}
		return b.fresh(fence, leaseExp, takenOver == 1), nil
	case code == codePriorResult && len(reply) == 2:
		result, ok := bytesOf(reply[1])
		if !ok {
			return idem.Outcome{}, replyError("begin", reply)
		}
		return idem.Outcome{Kind: idem.PriorResult, Result: result}, nil
	case code == codePriorError && len(reply) == 2:
		enc, ok := reply[1].(string)
		if !ok {
			return idem.Outcome{}, replyError("begin", reply)
		}
		se, err := decodeStoredError(enc)
		if err != nil {
			return idem.Outcome{}, corruptError("begin", b.rkey, "error", err)
		}
		return idem.Outcome{Kind: idem.PriorError, Error: se}, nil
	case code == codeMismatch && len(reply) == 3:
		fpBytes, ok1 := bytesOf(reply[1])
		request, ok2 := bytesOf(reply[2])
		if !ok1 || !ok2 {
			return idem.Outcome{}, replyError("begin", reply)
		}
		recorded, err := idem.ParseFingerprint(fpBytes)
		if err != nil {
			return idem.Outcome{}, corruptError("begin", b.rkey, "fingerprint", err)
		}
		return idem.Outcome{Kind: idem.Mismatch, RecordedHash: recorded, SubmittedHash: b.fp, RecordedRequest: request}, nil
	case code == codeInFlight && len(reply) == 2:
		leaseExp, ok := int64Of(reply[1])
		if !ok {
			return idem.Outcome{}, replyError("begin", reply)
		}
		// Sub caps the rest of a lease "for good" (math.MaxInt64, one
		// millisecond more once rounded up) instead of wrapping around.
		return idem.Outcome{Kind: idem.InFlight, RetryAfter: timeOf(leaseExp).Sub(timeOf(b.now))}, nil
	}
	return idem.Outcome{}, replyError("begin", reply)
}
