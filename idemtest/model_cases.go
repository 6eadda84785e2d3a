package idemtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemgo/idem"
)

// This file holds the model-based case: random sequences of every store
// operation and of clock steps, some of the calls made two at a time, run
// on the backend under test and on a reference written from the idem.Store
// contract (not from any backend), with every answer compared. Where the
// contract leaves a choice to the backend, the reference accepts every
// allowed answer; each such place says so.

// modelKey names one of the few keys the sequences use: two values, each
// with and without a scope, in the run's namespace (ns 0), and one key in
// a second namespace (ns 1), which PurgeExpired of the first must never
// touch.
type modelKey struct {
	ns           int
	value, scope string
}

func (k modelKey) String() string {
	if k.scope == "" {
		return fmt.Sprintf("ns%d/%s", k.ns, k.value)
	}
	return fmt.Sprintf("ns%d/%s@%s", k.ns, k.value, k.scope)
}

var modelKeys = []modelKey{
	{0, "k1", ""}, {0, "k1", "s"}, {0, "k2", ""}, {0, "k2", "s"}, {1, "k1", ""},
}

// modelPayloads are the request payloads Begin is called with: the first
// two are the same request (one fingerprint) written differently, the
// third another request.
var modelPayloads = []string{`{"a":1,"b":[1,2]}`, ` { "b" : [1, 2], "a" : 1 } `, `{"a":2}`}

// modelResults are the results Commit records; the replay must give them
// back byte for byte, member order and spacing included.
var modelResults = []string{`{"id":1}`, `{"z":1, "a":[3,2,1]}`, `"caf\u00e9 é"`}

var modelErrors = []idem.StoredError{
	{Class: "declined", Message: "card declined", Cause: "issuer said no"},
	{Class: "invalid", Message: "bad amount"},
}

// modelOpts are the BeginOpts drawn: the defaults, a retention shorter
// than a lease (the record must live as long as its lease), short and long
// leases, and a retention longer than the default.
var modelOpts = []*idem.BeginOpts{
	nil,
	{Retention: 20 * time.Second},
	{Lease: 3 * time.Second},
	{Retention: 20 * time.Second, Lease: 30 * time.Second},
	{Retention: 2 * time.Minute, Lease: 3 * time.Second},
	{Retention: 3 * time.Hour},
}

// Clock steps, heartbeat extensions and PurgeExpired's asOf (relative to
// now) are whole milliseconds, so that every backend stores the times the
// reference computes exactly (Redis keeps milliseconds). They land on and
// next to lease ends and expiries: 10 s is the default lease, 3 s and 30 s
// the overrides, 20 s a retention override. The retentions are 20 s at
// least, so a Redis server, which evicts a record by its own clock once
// its retention has passed in real time, never does so during a sequence,
// which takes far less real time than that.
var (
	modelSteps      = []time.Duration{time.Millisecond, time.Second, 3 * time.Second, 10*time.Second - time.Millisecond, 10 * time.Second, 25 * time.Second, 2 * time.Minute, time.Hour}
	modelExtensions = []time.Duration{0, 2 * time.Second, 15 * time.Second, time.Minute}
	modelPurgeAsOf  = []time.Duration{-time.Minute, 0, 20 * time.Second, 2 * time.Hour}
)

// refRecord is a record as the contract says the store holds it.
type refRecord struct {
	status  idem.Status
	fp      idem.Fingerprint
	request []byte
	result  []byte
	err     idem.StoredError
	// token and fence are the lease that created the record (or took it
	// over); they stay after it is settled, for the repeated settle calls.
	token string
	fence int64
	// created is the Begin that made the reservation; createdAlt, when
	// set, is the time of the Begin that created the record one or more
	// takeovers replaced, which a store may keep as CreatedAt as well (the
	// contract says nothing of CreatedAt on takeover).
	created, createdAlt time.Time
	expires             time.Time
	leaseEnd            time.Time // zero unless in progress
	// racing is set while the record is one a call made at the same time
	// created (see runPair).
	racing bool
}

// heldLease is a lease the caller was handed, and the key it was for.
type heldLease struct {
	k modelKey
	l idem.Lease
}

// modelState is the reference: the records as the contract says the store
// holds them, and what the caller holds.
type modelState struct {
	now  time.Time
	recs map[modelKey]*refRecord
	// released holds the tokens of reservations deleted by FailTransient,
	// by key: repeating that call may answer nil (see idem.Store: a
	// repeated settle call is answered nil or ErrStaleToken).
	released map[string]modelKey
	leases   []heldLease     // every lease handed out, in order
	tokens   map[string]bool // every token handed out
	// pairing is set while the calls of a pair are checked.
	pairing bool
}

// signature sums up st as far as any call can observe it: the records,
// and the tokens FailTransient released. The leases held are left out:
// two orders of the same calls hold the same ones, in another order.
func (st *modelState) signature() string {
	var b strings.Builder
	for _, k := range modelKeys {
		if rec := st.recs[k]; rec != nil {
			fmt.Fprintf(&b, "%v:%+v\n", k, *rec)
		}
	}
	for _, tok := range slices.Sorted(maps.Keys(st.released)) {
		fmt.Fprintf(&b, "%s:%v\n", tok, st.released[tok])
	}
	return b.String()
}

func (st *modelState) clone() *modelState {
	c := &modelState{
		now: st.now, recs: make(map[modelKey]*refRecord, len(st.recs)),
		released: maps.Clone(st.released), leases: slices.Clone(st.leases), tokens: maps.Clone(st.tokens),
	}
	for k, rec := range st.recs {
		cp := *rec // the slices it holds are never written to
		c.recs[k] = &cp
	}
	return c
}

// live returns the record of k unless it is missing or expired: a record
// counts as absent once now reaches its expires_at.
func (st *modelState) live(k modelKey) *refRecord {
	if rec := st.recs[k]; rec != nil && st.now.Before(rec.expires) {
		return rec
	}
	return nil
}

// owned returns the record of k if l is its current lease: live, in
// progress, same token and fence. A lease whose end has passed is still
// current until someone takes the record over.
func (st *modelState) owned(k modelKey, l idem.Lease) *refRecord {
	rec := st.live(k)
	if rec == nil || rec.status != idem.StatusInProgress || rec.token != l.Token || rec.fence != l.Fence {
		return nil
	}
	return rec
}

// settledBy returns the live record of k if lease l settled it with
// status: a repetition of that settle call may answer nil.
func (st *modelState) settledBy(k modelKey, l idem.Lease, status idem.Status) *refRecord {
	rec := st.live(k)
	if rec == nil || rec.status != status || rec.token != l.Token || rec.fence != l.Fence {
		return nil
	}
	return rec
}

// modelOp is one drawn call: call makes it on the store (concurrently
// with another one, for a pair), check then compares what it answered with
// the reference st, applies it to st, and says what happened.
type modelOp struct {
	desc  string
	call  func()
	check func(st *modelState) (string, error)
	// key is the one key the call touches; nil for PurgeExpired.
	key *modelKey
	// leaving, for PurgeExpired, is the op with the check of a purge that
	// left the record of k alone, not deleted nor counted.
	leaving func(k modelKey) modelOp
}

// modelRun is one sequence.
type modelRun struct {
	rt    *rapid.T
	ctx   context.Context
	s     idem.Store
	clock *Clock
	ns    [2]idem.Namespace
	keys  map[modelKey]idem.Key
	// states are the states the reference may be in: one, but for calls
	// made at once, whose order may be unknown (see runPair). Draws are
	// made from the first.
	states []*modelState
	trace  []string
	// lastBegin is the key and request of the last Begin drawn.
	lastBegin *modelKey
	lastReq   string
}

// testModel: random sequences of Begin, Commit, FailPermanent,
// FailTransient, Heartbeat (with the current lease, an older one or
// another key's, a forged or the zero one), Get, PurgeExpired and clock
// steps, over a few keys, give the answers of the reference: outcome
// kinds, leases and fences, replayed bytes, records, counts, and errors by
// identity (ErrStaleToken, ErrNotFound). Some steps make two calls at
// once; their answers must then be those of the two calls made one after
// the other, in one order or the other.
//
// Each sequence runs in namespaces of its own on the bundle's store. The
// case's cost is bounded twice: by rapid's number of checks
// (-rapid.checks, 100 by default) and by modelBudget, past which the
// remaining checks do nothing, so that it stays short on slow backends
// and loaded machines.
func testModel(t *testing.T, b *bundle) {
	deadline := time.Now().Add(modelBudget)
	failing, sequences := false, 0
	rapid.Check(t, func(rt *rapid.T) {
		// Once a sequence has failed, rapid shrinks it: every later run
		// must then be made, or the shrinking would stop at once.
		if !failing && time.Now().After(deadline) {
			return
		}
		done := false
		defer func() {
			if !done {
				failing = true
			}
		}()
		runModel(t, rt, b)
		sequences++
		done = true
	})
	t.Logf("%d sequences compared with the reference", sequences)
}

// modelBudget is how long testModel starts new sequences for.
const modelBudget = 3 * time.Second

func runModel(t *testing.T, rt *rapid.T, b *bundle) {
	r := &modelRun{
		rt: rt, ctx: context.Background(), s: b.store, clock: b.clock,
		ns:   [2]idem.Namespace{RandomNamespace(t), RandomNamespace(t)},
		keys: map[modelKey]idem.Key{},
		states: []*modelState{{
			now: b.clock.Now(), recs: map[modelKey]*refRecord{},
			released: map[string]modelKey{}, tokens: map[string]bool{},
		}},
	}
	for _, mk := range modelKeys {
		k, err := idem.ParseKey(r.ns[mk.ns], mk.value)
		if err == nil {
			k, err = k.WithScope(mk.scope)
		}
		if err != nil {
			t.Fatal(err)
		}
		r.keys[mk] = k
	}
	draws := []func(*rapid.T) modelOp{
		r.drawBegin, r.drawRetry, r.drawCommit, r.drawFailPermanent,
		r.drawFailTransient, r.drawHeartbeat, r.drawGet, r.drawPurge,
	}
	one := func(draw func(*rapid.T) modelOp) func(*rapid.T) {
		return func(rt *rapid.T) { r.run(draw(rt)) }
	}
	rt.Repeat(map[string]func(*rapid.T){
		"Begin":         one(r.drawBegin),
		"Retry":         one(r.drawRetry),
		"Commit":        one(r.drawCommit),
		"FailPermanent": one(r.drawFailPermanent),
		"FailTransient": one(r.drawFailTransient),
		"Heartbeat":     one(r.drawHeartbeat),
		"Get":           one(r.drawGet),
		"PurgeExpired":  one(r.drawPurge),
		"Advance":       r.advance,
		"Concurrently": func(rt *rapid.T) {
			// PurgeExpired is atomic record by record only (it deletes in
			// batches, or key by key), so two at once may share out the
			// records between them in any way: a purge is paired with any
			// call but another purge.
			i := rapid.IntRange(0, len(draws)-1).Draw(rt, "first")
			n := len(draws)
			if i == len(draws)-1 {
				n-- // drawPurge is the last
			}
			j := rapid.IntRange(0, n-1).Draw(rt, "second")
			a := draws[i](rt)
			r.runPair(a, draws[j](rt))
		},
	})
	// Last, every key's record as Get reports it.
	for _, mk := range modelKeys {
		r.run(r.getOp(mk))
	}
}

func (r *modelRun) fail(format string, args ...any) {
	r.rt.Fatalf("%s\nat %v, after:\n  %s", fmt.Sprintf(format, args...), r.now(), strings.Join(r.trace, "\n  "))
}

// now is the reference's clock.
func (r *modelRun) now() time.Time { return r.states[0].now }

// maxModelStates bounds the states the reference may be in at once. Two
// calls made at once can leave it in two (one for each order the calls
// may have taken effect in) that no answer tells apart, and each later
// pair may double them: states that differ in nothing a call can observe
// are kept once, so this is never reached in practice.
const maxModelStates = 64

// run makes op's call and checks it against every state the reference
// may be in, keeping those that give its answer.
func (r *modelRun) run(op modelOp) {
	op.call()
	var kept []*modelState
	var got string
	var errs []string
	for _, st := range r.states {
		g, err := op.check(st)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if kept == nil {
			got = g
		}
		kept = append(kept, st)
	}
	if kept == nil {
		r.fail("%s: %s", op.desc, strings.Join(errs, "; or, "))
	}
	r.states = kept
	r.trace = append(r.trace, op.desc+" = "+got)
}

// runPair makes the calls of a and b at once, and checks that they
// answered as the same calls made one after the other would have, in
// one order or the other: each call is atomic. The reference keeps every
// state that explains the answers.
func (r *modelRun) runPair(a, b modelOp) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, op := range []modelOp{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			op.call()
		}()
	}
	close(start)
	wg.Wait()
	var (
		kept []*modelState
		seen = map[string]bool{}
		errs []string
		got  string
	)
	orders := [][2]modelOp{{a, b}, {b, a}}
	for _, pair := range orders {
		if pair[0].leaving != nil && pair[1].key != nil {
			// pgstore's purge skips the rows another transaction is
			// writing rather than wait for them (by design, see its
			// purgeSQL): a purge made at the same time as a call on a
			// record may leave that record alone, whatever the order.
			orders = append(orders, [2]modelOp{pair[1], pair[0].leaving(*pair[1].key)})
		}
	}
	for _, from := range r.states {
		for _, order := range orders {
			st := from.clone()
			st.pairing = true
			got1, err := order[0].check(st)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s first: %v", order[0].desc, err))
				continue
			}
			got2, err := order[1].check(st)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s second, after %s = %s: %v", order[1].desc, order[0].desc, got1, err))
				continue
			}
			st.pairing = false
			for _, rec := range st.recs {
				rec.racing = false
			}
			if sig := st.signature(); !seen[sig] {
				seen[sig] = true
				if kept == nil {
					got = fmt.Sprintf("at once: %s = %s, %s = %s", order[0].desc, got1, order[1].desc, got2)
				}
				kept = append(kept, st)
			}
		}
	}
	if kept == nil {
		r.fail("%s and %s at once answered as no order of the two would:\n  %s", a.desc, b.desc, strings.Join(errs, "\n  "))
	}
	if len(kept) > maxModelStates {
		r.fail("the reference is in %d states at once: too many to follow", len(kept))
	}
	r.states = kept
	r.trace = append(r.trace, got)
}

func (r *modelRun) drawKey(rt *rapid.T) modelKey {
	return modelKeys[rapid.IntRange(0, len(modelKeys)-1).Draw(rt, "key")]
}

// drawOwnedKey draws the key of a call that needs a lease: half the time
// one whose record is in progress, if any is, so that settle calls and
// heartbeats often succeed.
func (r *modelRun) drawOwnedKey(rt *rapid.T) modelKey {
	var inProgress []modelKey
	for _, mk := range modelKeys {
		if rec := r.states[0].live(mk); rec != nil && rec.status == idem.StatusInProgress {
			inProgress = append(inProgress, mk)
		}
	}
	if len(inProgress) == 0 || !rapid.Bool().Draw(rt, "in progress") {
		return r.drawKey(rt)
	}
	return inProgress[rapid.IntRange(0, len(inProgress)-1).Draw(rt, "key")]
}

// drawLease picks the lease a call is made with: most often the latest
// one handed out for k; else any lease handed out so far (an older one of
// k, or another key's), the latest with another fence, the latest with
// another token, or the zero Lease.
func (r *modelRun) drawLease(rt *rapid.T, k modelKey) (idem.Lease, string) {
	latest := idem.Lease{}
	for i := len(r.states[0].leases) - 1; i >= 0; i-- {
		if r.states[0].leases[i].k == k {
			latest = r.states[0].leases[i].l
			break
		}
	}
	switch n := rapid.IntRange(0, 9).Draw(rt, "lease"); {
	case n < 5:
		return latest, fmt.Sprintf("latest lease (fence %d)", latest.Fence)
	case n < 7 && len(r.states[0].leases) > 0:
		i := rapid.IntRange(0, len(r.states[0].leases)-1).Draw(rt, "held")
		h := r.states[0].leases[i]
		return h.l, fmt.Sprintf("lease #%d of %v (fence %d)", i, h.k, h.l.Fence)
	case n == 7:
		latest.Fence++
		return latest, fmt.Sprintf("latest lease with fence %d", latest.Fence)
	case n == 8:
		latest.Token = idem.NewToken()
		return latest, "latest lease with a forged token"
	default:
		return idem.Lease{}, "zero lease"
	}
}

// clobber overwrites b, as a caller reusing its buffer would.
func clobber(b []byte) {
	for i := range b {
		b[i] = '#'
	}
}

// sameJSONDoc compares JSON documents by their canonical form: backends
// may store requests in a normalising column type (JSONB).
func sameJSONDoc(got, want []byte) (bool, error) {
	g, err := idem.CanonicalJSON(got, nil)
	if err != nil {
		return false, fmt.Errorf("stored JSON %q does not parse: %w", got, err)
	}
	w, err := idem.CanonicalJSON(want, nil)
	if err != nil {
		return false, err
	}
	return bytes.Equal(g, w), nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (r *modelRun) drawBegin(rt *rapid.T) modelOp {
	k := r.drawKey(rt)
	payload := modelPayloads[rapid.IntRange(0, len(modelPayloads)-1).Draw(rt, "payload")]
	opts := modelOpts[rapid.IntRange(0, len(modelOpts)-1).Draw(rt, "opts")]
	r.lastBegin, r.lastReq = &k, payload
	return r.beginOp(k, payload, opts)
}

// drawRetry repeats the last Begin's key and request with the default
// options, as a client retrying would: it replays, is in flight, or takes
// over.
func (r *modelRun) drawRetry(rt *rapid.T) modelOp {
	if r.lastBegin == nil {
		return r.drawBegin(rt)
	}
	return r.beginOp(*r.lastBegin, r.lastReq, nil)
}

func (r *modelRun) beginOp(k modelKey, payload string, opts *idem.BeginOpts) modelOp {
	req, err := idem.NewRequest([]byte(payload))
	if err != nil {
		r.fail("NewRequest: %v", err)
	}
	var (
		o       idem.Outcome
		result  []byte
		callErr error
	)
	op := modelOp{desc: fmt.Sprintf("Begin(%v, %s, %+v)", k, payload, opts), key: &k}
	op.call = func() {
		req := req
		req.Payload = []byte(payload) // the caller's buffer, reused below
		o, callErr = r.s.Begin(r.ctx, r.keys[k], req, opts)
		clobber(req.Payload)
		result = bytes.Clone(o.Result)
		clobber(o.Result) // the caller's to change
	}
	op.check = func(st *modelState) (string, error) {
		if callErr != nil {
			return "", callErr
		}
		now := st.now
		retention, leaseTTL := opts.Durations(Retention, Lease)
		rec := st.live(k)
		switch {
		case rec == nil || (rec.fp == req.Fingerprint && rec.status == idem.StatusInProgress && !now.Before(rec.leaseEnd)):
			// No live record: Fresh. A live one of the same request whose
			// lease has lapsed: taken over, fence+1.
			takeover := rec != nil
			if o.Kind != idem.Fresh || o.TakenOver != takeover {
				return "", fmt.Errorf("= %s (taken over %v), want fresh (taken over %v)", o.Kind, o.TakenOver, takeover)
			}
			l := o.Lease
			if l.Token == "" || st.tokens[l.Token] {
				return "", fmt.Errorf("handed out token %q, empty or handed out before", l.Token)
			}
			// A record created anew may start its fence again from 1, or
			// go on counting (see idem.Lease): any fence from 1 will do.
			if takeover && l.Fence != rec.fence+1 {
				return "", fmt.Errorf("took over with fence %d, want %d", l.Fence, rec.fence+1)
			}
			if l.Fence < 1 {
				return "", fmt.Errorf("fence %d, want 1 or more", l.Fence)
			}
			if !l.ExpiresAt.Equal(now.Add(leaseTTL)) || l.TTL != leaseTTL {
				return "", fmt.Errorf("lease ends %v ttl %v, want %v ttl %v", l.ExpiresAt, l.TTL, now.Add(leaseTTL), leaseTTL)
			}
			n := &refRecord{
				status: idem.StatusInProgress, fp: req.Fingerprint, request: []byte(payload),
				token: l.Token, fence: l.Fence, created: now,
				// The record lives at least as long as its lease.
				expires: maxTime(now.Add(retention), now.Add(leaseTTL)), leaseEnd: now.Add(leaseTTL),
				racing: st.pairing,
			}
			if takeover {
				// A store that keeps CreatedAt on takeover keeps the
				// first Begin's through every later takeover.
				n.createdAlt = rec.created
				if !rec.createdAlt.IsZero() {
					n.createdAlt = rec.createdAlt
				}
			}
			st.recs[k] = n
			st.tokens[l.Token] = true
			st.leases = append(st.leases, heldLease{k, l})
			return fmt.Sprintf("fresh, fence %d, taken over %v", l.Fence, o.TakenOver), nil
		case rec.racing && o.Kind == idem.InFlight && (o.RetryAfter == rec.leaseEnd.Sub(now) || o.RetryAfter == Lease):
			// The record was being created by a call made at the same
			// time: the contract lets a backend that cannot see it yet
			// (a row another transaction has not committed) answer
			// InFlight whatever the fingerprint, RetryAfter then being
			// the store's lease, as it does not know the rest.
		case rec.fp != req.Fingerprint:
			// Mismatch, whatever the record's state.
			if o.Kind != idem.Mismatch || o.RecordedHash != rec.fp || o.SubmittedHash != req.Fingerprint {
				return "", fmt.Errorf("= %s, want mismatch recorded %s submitted %s (outcome %s)", o.Kind, rec.fp, req.Fingerprint, describeOutcome(o))
			}
			if same, err := sameJSONDoc(o.RecordedRequest, rec.request); err != nil || !same {
				return "", fmt.Errorf("mismatch recorded request %s, want %s (%v)", o.RecordedRequest, rec.request, err)
			}
		case rec.status == idem.StatusCommitted:
			if o.Kind != idem.PriorResult || !bytes.Equal(result, rec.result) {
				return "", fmt.Errorf("= %s %q, want prior_result %q byte for byte%s", o.Kind, result, rec.result, clobberHint(result))
			}
		case rec.status == idem.StatusFailed:
			if o.Kind != idem.PriorError || o.Error == nil || *o.Error != rec.err {
				return "", fmt.Errorf("= %s %+v, want prior_error %+v", o.Kind, o.Error, rec.err)
			}
		default:
			// In flight. RetryAfter is the rest of the lease, which a store
			// in lease mode always knows.
			if o.Kind != idem.InFlight || o.RetryAfter != rec.leaseEnd.Sub(now) {
				return "", fmt.Errorf("= %s, retry after %v, want in_flight, retry after %v", o.Kind, o.RetryAfter, rec.leaseEnd.Sub(now))
			}
		}
		return o.Kind.String(), nil
	}
	return op
}

// staleOr checks the error of a call that must answer ErrStaleToken, or,
// when nilAllowed (a repetition of a settle call), nil.
func staleOr(err error, nilAllowed bool) (string, error) {
	switch {
	case err == nil && nilAllowed:
		return "nil (a repetition)", nil
	case errors.Is(err, idem.ErrStaleToken):
		return "ErrStaleToken", nil
	case nilAllowed:
		return "", fmt.Errorf("= %v, want nil or ErrStaleToken (a repetition)", err)
	}
	return "", fmt.Errorf("= %v, want ErrStaleToken", err)
}

func (r *modelRun) drawCommit(rt *rapid.T) modelOp {
	k := r.drawOwnedKey(rt)
	l, which := r.drawLease(rt, k)
	result := modelResults[rapid.IntRange(0, len(modelResults)-1).Draw(rt, "result")]
	var err error
	return modelOp{
		desc: fmt.Sprintf("Commit(%v, %s, %s)", k, which, result),
		key:  &k,
		call: func() {
			buf := []byte(result)
			err = r.s.Commit(r.ctx, r.keys[k], l, buf)
			clobber(buf)
		},
		check: func(st *modelState) (string, error) {
			if rec := st.owned(k, l); rec != nil {
				if err != nil {
					return "", fmt.Errorf("with the current lease: %w", err)
				}
				rec.status, rec.result, rec.leaseEnd = idem.StatusCommitted, []byte(result), time.Time{}
				return "nil", nil
			}
			rec := st.settledBy(k, l, idem.StatusCommitted)
			return staleOr(err, rec != nil && bytes.Equal(rec.result, []byte(result)))
		},
	}
}

func (r *modelRun) drawFailPermanent(rt *rapid.T) modelOp {
	k := r.drawOwnedKey(rt)
	l, which := r.drawLease(rt, k)
	se := modelErrors[rapid.IntRange(0, len(modelErrors)-1).Draw(rt, "error")]
	var err error
	return modelOp{
		desc: fmt.Sprintf("FailPermanent(%v, %s, %s)", k, which, se.Class),
		key:  &k,
		call: func() { err = r.s.FailPermanent(r.ctx, r.keys[k], l, se) },
		check: func(st *modelState) (string, error) {
			if rec := st.owned(k, l); rec != nil {
				if err != nil {
					return "", fmt.Errorf("with the current lease: %w", err)
				}
				rec.status, rec.err, rec.leaseEnd = idem.StatusFailed, se, time.Time{}
				return "nil", nil
			}
			rec := st.settledBy(k, l, idem.StatusFailed)
			return staleOr(err, rec != nil && rec.err == se)
		},
	}
}

func (r *modelRun) drawFailTransient(rt *rapid.T) modelOp {
	k := r.drawOwnedKey(rt)
	l, which := r.drawLease(rt, k)
	var err error
	return modelOp{
		desc: fmt.Sprintf("FailTransient(%v, %s)", k, which),
		key:  &k,
		call: func() { err = r.s.FailTransient(r.ctx, r.keys[k], l) },
		check: func(st *modelState) (string, error) {
			if rec := st.owned(k, l); rec != nil {
				if err != nil {
					return "", fmt.Errorf("with the current lease: %w", err)
				}
				delete(st.recs, k)
				st.released[l.Token] = k
				return "nil", nil
			}
			// Repeating a FailTransient that released the key, while no
			// live record has replaced it, may answer nil.
			rk, released := st.released[l.Token]
			return staleOr(err, released && rk == k && st.live(k) == nil)
		},
	}
}

func (r *modelRun) drawHeartbeat(rt *rapid.T) modelOp {
	k := r.drawOwnedKey(rt)
	l, which := r.drawLease(rt, k)
	extend := modelExtensions[rapid.IntRange(0, len(modelExtensions)-1).Draw(rt, "extend")]
	var (
		got idem.Lease
		err error
	)
	return modelOp{
		desc: fmt.Sprintf("Heartbeat(%v, %s, %v)", k, which, extend),
		key:  &k,
		call: func() { got, err = r.s.Heartbeat(r.ctx, r.keys[k], l, extend) },
		check: func(st *modelState) (string, error) {
			rec := st.owned(k, l)
			if rec == nil {
				// A settled lease is stale for Heartbeat: no repetition.
				return staleOr(err, false)
			}
			if err != nil {
				return "", fmt.Errorf("with the current lease: %w", err)
			}
			// Zero extends by the store's lease, not by the one Begin was
			// given.
			ext := extend
			if ext == 0 {
				ext = Lease
			}
			end := st.now.Add(ext)
			if got.Token != l.Token || got.Fence != l.Fence || !got.ExpiresAt.Equal(end) || got.TTL != ext {
				return "", fmt.Errorf("= %+v, want token %q fence %d ending %v ttl %v", got, l.Token, l.Fence, end, ext)
			}
			// The lease ends at now+extend, sooner or later than before;
			// the record lives at least until then.
			rec.leaseEnd, rec.expires = end, maxTime(rec.expires, end)
			st.leases = append(st.leases, heldLease{k, got})
			return fmt.Sprintf("lease to %v", end), nil
		},
	}
}

func (r *modelRun) drawGet(rt *rapid.T) modelOp { return r.getOp(r.drawKey(rt)) }

func (r *modelRun) getOp(k modelKey) modelOp {
	var (
		got             idem.Record
		request, result []byte
		err             error
	)
	return modelOp{
		desc: fmt.Sprintf("Get(%v)", k),
		key:  &k,
		call: func() {
			got, err = r.s.Get(r.ctx, r.keys[k])
			request, result = bytes.Clone(got.Request), bytes.Clone(got.Result)
			clobber(got.Request) // the caller's to change
			clobber(got.Result)
		},
		check: func(st *modelState) (string, error) {
			shown := got // as returned, before the suite wrote over its slices
			shown.Request, shown.Result = request, result
			rec := st.live(k)
			if rec == nil {
				if !errors.Is(err, idem.ErrNotFound) {
					return "", fmt.Errorf("= %s, %v, want ErrNotFound", describeRecord(shown), err)
				}
				return "ErrNotFound", nil
			}
			if err != nil {
				return "", fmt.Errorf("= %w, want the %s record", err, rec.status)
			}
			bad := func(what string, g, w any) (string, error) {
				return "", fmt.Errorf("the record's %s = %v, want %v (record %s)", what, g, w, describeRecord(shown))
			}
			if same, err := sameJSONDoc(request, rec.request); err != nil || !same {
				return bad("Request", describePayload(request), string(rec.request))
			}
			switch {
			case got.Key != r.keys[k]:
				return bad("Key", got.Key, r.keys[k])
			case got.Status != rec.status:
				return bad("Status", got.Status, rec.status)
			case got.Fingerprint != rec.fp:
				return bad("Fingerprint", got.Fingerprint, rec.fp)
			case rec.status == idem.StatusCommitted && !bytes.Equal(result, rec.result):
				return bad("Result", describePayload(result), string(rec.result))
			case rec.status != idem.StatusCommitted && len(result) != 0:
				return bad("Result", describePayload(result), "none")
			case rec.status == idem.StatusFailed && (got.Error == nil || *got.Error != rec.err):
				return bad("Error", got.Error, rec.err)
			case rec.status != idem.StatusFailed && got.Error != nil:
				return bad("Error", got.Error, nil)
			case got.Fence != rec.fence:
				return bad("Fence", got.Fence, rec.fence)
			case !got.CreatedAt.Equal(rec.created) && (rec.createdAlt.IsZero() || !got.CreatedAt.Equal(rec.createdAlt)):
				return bad("CreatedAt", got.CreatedAt, rec.created)
			case !got.ExpiresAt.Equal(rec.expires):
				return bad("ExpiresAt", got.ExpiresAt, rec.expires)
			case !got.LeaseExpiresAt.Equal(rec.leaseEnd):
				return bad("LeaseExpiresAt", got.LeaseExpiresAt, rec.leaseEnd)
			}
			return fmt.Sprintf("%s, fence %d", got.Status, got.Fence), nil
		},
	}
}

func (r *modelRun) drawPurge(rt *rapid.T) modelOp {
	ns := rapid.IntRange(0, 1).Draw(rt, "namespace")
	offset := modelPurgeAsOf[rapid.IntRange(0, len(modelPurgeAsOf)-1).Draw(rt, "asOf")]
	asOf := r.now().Add(offset)
	var (
		n   int
		err error
	)
	check := func(st *modelState, leave *modelKey) (string, error) {
		if err != nil {
			return "", err
		}
		// The records of ns whose expires_at is at or before asOf go.
		// Those still live at now must be counted; those already expired
		// may have gone before (a Redis server evicts them by its own
		// clock), so the count may leave them out.
		must, may := 0, 0
		for k, rec := range st.recs {
			if k.ns != ns || rec.expires.After(asOf) || leave != nil && k == *leave {
				continue
			}
			if st.now.Before(rec.expires) {
				must++
			} else {
				may++
			}
			delete(st.recs, k)
		}
		if n < must || n > must+may {
			return "", fmt.Errorf("= %d, want %d live records and up to %d expired ones", n, must, may)
		}
		return fmt.Sprint(n), nil
	}
	op := modelOp{
		desc:  fmt.Sprintf("PurgeExpired(ns%d, now%+v)", ns, offset),
		call:  func() { n, err = r.s.PurgeExpired(r.ctx, r.ns[ns], asOf) },
		check: func(st *modelState) (string, error) { return check(st, nil) },
	}
	op.leaving = func(k modelKey) modelOp {
		o := op
		o.desc += fmt.Sprintf(" leaving %v alone", k)
		o.check = func(st *modelState) (string, error) { return check(st, &k) }
		return o
	}
	return op
}

func (r *modelRun) advance(rt *rapid.T) {
	d := modelSteps[rapid.IntRange(0, len(modelSteps)-1).Draw(rt, "step")]
	r.clock.Advance(d)
	for _, st := range r.states {
		st.now = st.now.Add(d)
	}
	r.trace = append(r.trace, fmt.Sprintf("Advance(%v)", d))
}
