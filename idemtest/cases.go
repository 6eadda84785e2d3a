package idemtest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

func cases() []testCase {
	return []testCase{
		{"S1/BeginFreshRecordsInProgress", testBeginFresh},
		{"S1/RecordTimes", testRecordTimes},
		{"S2/CommitThenReplayByteIdentical", testCommitReplay},
		{"S3/FailPermanentThenReplayError", testFailPermanentReplay},
		{"S4/FailTransientThenFresh", testFailTransient},
		{"S5/MismatchCarriesRecordedRequest", testMismatch},
		{"S5/MismatchBeatsInFlight", testMismatchBeatsInFlight},
		{"S6/SecondBeginInFlight", testInFlight},
		{"S7/ConcurrentBeginsElectOne", testConcurrentBegin},
		{"S7/ConcurrentTakeoversElectOne", testConcurrentTakeovers},
		{"S7/ConcurrentBeginsOfExpiredElectOne", testConcurrentBeginsOfExpired},
		{"S8/LeaseTakeoverFencesOldOwner", testTakeover},
		{"S8/HeartbeatKeepsLease", testHeartbeat},
		{"S8/SettledLeaseIsStale", testSettledLeaseStale},
		{"S8/StaleCallsChangeNothing", testStaleCallsChangeNothing},
		{"S8/StaleSettleRacesTakeover", testStaleSettleRacesTakeover},
		{"S8/ExpiredLeaseIsStale", testExpiredLeaseIsStale},
		{"S8/RepeatedSettle", testRepeatedSettle},
		{"S9/PurgeExpiredOwnNamespaceOnly", testPurge},
		{"S10/RetentionAndLeaseOverride", testOverride},
		{"S11/TypedRoundTrip", testTyped},
		{"Expiry/ExpiredRecordCountsAsAbsent", testExpiry},
		{"Expiry/NeverWhileLeased", testNeverExpiresWhileLeased},
		{"Lease/NeverShorterThanGranted", testLeaseNeverShorter},
		{"Keys/ScopesAndNamespacesAreIndependent", testIsolation},
		{"Keys/OddKeys", testOddKeys},
		{"Input/RejectedWithTypedErrors", testBadInput},
		{"Input/InvalidResultLeavesReservation", testInvalidResult},
		{"Input/CancelledContext", testCancelled},
		{"Input/DeadlineExceeded", testDeadlineExceeded},
		{"Input/EveryCallChecksKey", testEveryCallChecksKey},
		{"Input/PayloadLimit", testPayloadLimit},
		{"Input/PayloadAtLimit", testPayloadAtLimit},
		{"Input/DurationsForGood", testDurationsForGood},
		{"Input/CallerBuffersNotRetained", testBuffersNotRetained},
		{"Input/ReturnedErrorsAndRequestsAreTheCallers", testReturnedValuesAreTheCallers},
		{"Do/RunsOnceAndReplays", testDo},
		{"Do/TakenOverRunIsToldAndNotRecorded", testDoTakenOver},
		{"Model/RandomSequencesMatchReference", testModel},
	}
}

func testBeginFresh(t *testing.T, b *bundle) {
	k := b.key(t, "order-1")
	r := request(t, `{"amount": 100, "currency": "EUR"}`)
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.Fresh)
	now := b.clock.Now()
	if o.Lease.Token == "" || o.Lease.Fence < 1 {
		t.Fatalf("Fresh lease = %+v, want a token and a fence >= 1", o.Lease)
	}
	if !sameTime(o.Lease.ExpiresAt, now.Add(Lease)) || o.Lease.TTL != Lease {
		t.Errorf("lease expires %v ttl %v, want %v ttl %v", o.Lease.ExpiresAt, o.Lease.TTL, now.Add(Lease), Lease)
	}
	if o.TakenOver {
		t.Error("first Begin reports TakenOver")
	}
	rec := get(t, b.store, k)
	if rec.Status != idem.StatusInProgress || rec.Fingerprint != r.Fingerprint || rec.Fence != o.Lease.Fence {
		t.Errorf("record = %+v, want in_progress with the request's fingerprint and fence %d", rec, o.Lease.Fence)
	}
	if !sameJSON(t, rec.Request, r.Payload) {
		t.Errorf("recorded request = %s, want %s", rec.Request, r.Payload)
	}
	if !sameTime(rec.ExpiresAt, now.Add(Retention)) {
		t.Errorf("expires_at = %v, want now+retention = %v", rec.ExpiresAt, now.Add(Retention))
	}
	if rec.Key != k {
		t.Errorf("record key = %v, want %v", rec.Key, k)
	}
}

func testCommitReplay(t *testing.T, b *bundle) {
	k := b.key(t, "order-2")
	r := request(t, `{"amount":100}`)
	lease := fresh(t, b.store, k, r)
	result := []byte(`{"id": "ch_1",  "amount":100, "nested":{"z":1,"a":[3,2,1]}, "s":"é\u00e9"}`)
	ok(t, b.store.Commit(context.Background(), k, lease, result), "Commit")
	for i := 0; i < 3; i++ {
		o := begin(t, b.store, k, r, nil)
		wantKind(t, o, idem.PriorResult)
		if string(o.Result) != string(result) {
			t.Fatalf("replay %d: result = %q, want byte-identical %q", i, o.Result, result)
		}
	}
	rec := get(t, b.store, k)
	if rec.Status != idem.StatusCommitted || string(rec.Result) != string(result) {
		t.Errorf("record = %s %q, want committed with the result", rec.Status, rec.Result)
	}
	// The same request in another key order is the same fingerprint.
	o := begin(t, b.store, k, request(t, ` { "amount" : 100 } `), nil)
	wantKind(t, o, idem.PriorResult)
}

// testBuffersNotRetained: a store keeps copies, never the caller's slices,
// so a caller may reuse its buffers once a call returns (the HTTP
// middleware pools its encoding buffers), and what Begin and Get return
// is the caller's to change.
func testBuffersNotRetained(t *testing.T, b *bundle) {
	k := b.key(t, "order-buffers")
	payload := []byte(`{"amount":100}`)
	r := request(t, string(payload))
	r.Payload = payload
	lease := fresh(t, b.store, k, r)
	copy(payload, `{"amount":999}`)
	result := []byte(`{"id":"ch_1"}`)
	ok(t, b.store.Commit(context.Background(), k, lease, result), "Commit")
	copy(result, `{"id":"ch_X"}`)

	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.PriorResult)
	if string(o.Result) != `{"id":"ch_1"}` {
		t.Fatalf("replay = %s after the caller reused its result buffer, want {\"id\":\"ch_1\"}", o.Result)
	}
	copy(o.Result, `{"id":"ch_Y"}`) // the caller's to change
	rec := get(t, b.store, k)
	if string(rec.Result) != `{"id":"ch_1"}` || !sameJSON(t, rec.Request, []byte(`{"amount":100}`)) {
		t.Fatalf("record = result %s request %s, want the values as they were when the calls returned", rec.Result, rec.Request)
	}
	copy(rec.Result, `{"id":"ch_Z"}`)
	if o := begin(t, b.store, k, r, nil); string(o.Result) != `{"id":"ch_1"}` {
		t.Fatalf("replay = %s after the caller changed what Begin and Get returned", o.Result)
	}
}

// testReturnedValuesAreTheCallers: the stored error that Begin (PriorError)
// and Get return, and the recorded request that Begin (Mismatch) and Get
// return, belong to the caller: changing them changes nothing on record.
func testReturnedValuesAreTheCallers(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "order-returned")
	r := request(t, `{"amount":100}`)
	want := idem.StoredError{Class: "declined", Message: "no", Cause: "issuer"}
	ok(t, b.store.FailPermanent(ctx, k, fresh(t, b.store, k, r), want), "FailPermanent")

	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.PriorError)
	if o.Error == nil {
		t.Fatal("PriorError without its error")
	}
	*o.Error = idem.StoredError{Class: "changed-by-begin"}
	rec := get(t, b.store, k)
	if rec.Error == nil || *rec.Error != want {
		t.Fatalf("stored error = %+v after the caller changed Begin's, want %+v", rec.Error, want)
	}
	*rec.Error = idem.StoredError{Class: "changed-by-get"}
	copy(rec.Request, `{"amount":999}`)
	m := begin(t, b.store, k, request(t, `{"amount":5}`), nil)
	wantKind(t, m, idem.Mismatch)
	if !sameJSON(t, m.RecordedRequest, []byte(`{"amount":100}`)) {
		t.Fatalf("recorded request = %s after the caller changed Get's, want {\"amount\":100}", m.RecordedRequest)
	}
	copy(m.RecordedRequest, `{"amount":777}`)

	o = begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.PriorError)
	if o.Error == nil || *o.Error != want {
		t.Errorf("replayed error = %+v after the caller changed Get's, want %+v", o.Error, want)
	}
	if rec := get(t, b.store, k); !sameJSON(t, rec.Request, []byte(`{"amount":100}`)) {
		t.Errorf("recorded request = %s after the caller changed Mismatch's, want {\"amount\":100}", rec.Request)
	}
}

func testFailPermanentReplay(t *testing.T, b *bundle) {
	k := b.key(t, "order-3")
	r := request(t, `{"card":"4000"}`)
	lease := fresh(t, b.store, k, r)
	want := idem.StoredError{Class: "payment.declined", Message: "card declined: insufficient funds", Cause: "issuer said no"}
	ok(t, b.store.FailPermanent(context.Background(), k, lease, want), "FailPermanent")
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.PriorError)
	if o.Error == nil || *o.Error != want {
		t.Fatalf("replayed error = %+v, want %+v", o.Error, want)
	}
	var se *idem.StoredError
	if err := o.Err(); !errors.As(err, &se) || se.Class != want.Class {
		t.Errorf("Outcome.Err() = %v, want the *StoredError", err)
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusFailed || rec.Error == nil || *rec.Error != want {
		t.Errorf("record = %s %+v, want failed_permanent with the error", rec.Status, rec.Error)
	}
}

func testFailTransient(t *testing.T, b *bundle) {
	k := b.key(t, "order-4")
	r := request(t, `{"n":1}`)
	lease := fresh(t, b.store, k, r)
	ok(t, b.store.FailTransient(context.Background(), k, lease), "FailTransient")
	if _, err := b.store.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after FailTransient: %v, want ErrNotFound", err)
	}
	lease2 := fresh(t, b.store, k, r)
	if lease2.Token == lease.Token {
		t.Error("a new reservation reused the old token")
	}
	if err := b.store.Commit(context.Background(), k, lease, []byte(`1`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Commit with the released lease: %v, want ErrStaleToken", err)
	}
	ok(t, b.store.Commit(context.Background(), k, lease2, []byte(`2`)), "Commit")
}

func testMismatch(t *testing.T, b *bundle) {
	k := b.key(t, "order-5")
	a := request(t, `{"amount":100}`)
	bb := request(t, `{"amount":200}`)
	lease := fresh(t, b.store, k, a)
	ok(t, b.store.Commit(context.Background(), k, lease, []byte(`{"ok":true}`)), "Commit")
	o := begin(t, b.store, k, bb, nil)
	wantKind(t, o, idem.Mismatch)
	if o.RecordedHash != a.Fingerprint || o.SubmittedHash != bb.Fingerprint {
		t.Errorf("mismatch hashes = %s / %s, want %s / %s", o.RecordedHash, o.SubmittedHash, a.Fingerprint, bb.Fingerprint)
	}
	if !sameJSON(t, o.RecordedRequest, a.Payload) {
		t.Errorf("recorded request = %s, want %s", o.RecordedRequest, a.Payload)
	}
	var me *idem.MismatchError
	if err := o.Err(); !errors.As(err, &me) || !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("Outcome.Err() = %v, want *MismatchError", err)
	}
	// The record is unchanged: the original still replays.
	wantKind(t, begin(t, b.store, k, a, nil), idem.PriorResult)
}

func testMismatchBeatsInFlight(t *testing.T, b *bundle) {
	k := b.key(t, "order-6")
	fresh(t, b.store, k, request(t, `{"a":1}`))
	wantKind(t, begin(t, b.store, k, request(t, `{"a":2}`), nil), idem.Mismatch)
	// Even after the lease lapsed, another request does not take over.
	b.clock.Advance(Lease + time.Second)
	wantKind(t, begin(t, b.store, k, request(t, `{"a":2}`), nil), idem.Mismatch)
}

func testInFlight(t *testing.T, b *bundle) {
	k := b.key(t, "order-7")
	r := request(t, `{"a":1}`)
	lease := fresh(t, b.store, k, r)
	b.clock.Advance(2 * time.Second)
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.InFlight)
	if want := Lease - 2*time.Second; o.RetryAfter != want {
		t.Errorf("RetryAfter = %v, want the rest of the lease %v", o.RetryAfter, want)
	}
	if err := o.Err(); !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("Outcome.Err() = %v, want ErrInFlight", err)
	}
	// The rejected caller changed nothing: the owner still commits.
	ok(t, b.store.Commit(context.Background(), k, lease, []byte(`{}`)), "owner Commit")
}

func testConcurrentBegin(t *testing.T, b *bundle) {
	const n = 32
	k := b.key(t, "order-8")
	r := request(t, `{"a":1}`)
	kinds := make([]idem.Kind, n)
	errs := make([]error, n)
	all(n, func(i int) {
		o, err := b.store.Begin(context.Background(), k, r, nil)
		kinds[i], errs[i] = o.Kind, err
	})
	counts := map[idem.Kind]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Begin %d: %v", i, errs[i])
		}
		counts[kinds[i]]++
	}
	if counts[idem.Fresh] != 1 || counts[idem.InFlight] != n-1 {
		t.Fatalf("outcomes = %v, want exactly one fresh and %d in_flight", counts, n-1)
	}
}

func testTakeover(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "order-9")
	r := request(t, `{"a":1}`)
	old := fresh(t, b.store, k, r)
	b.clock.Advance(Lease - time.Millisecond)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	b.clock.Advance(time.Millisecond)
	o := begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.Fresh)
	if !o.TakenOver || o.Lease.Fence <= old.Fence || o.Lease.Token == old.Token {
		t.Fatalf("takeover lease = %+v (taken over %v), want a higher fence than %d and a new token", o.Lease, o.TakenOver, old.Fence)
	}
	for name, err := range map[string]error{
		"Commit":        b.store.Commit(ctx, k, old, []byte(`"late"`)),
		"FailPermanent": b.store.FailPermanent(ctx, k, old, idem.StoredError{Class: "late"}),
		"FailTransient": b.store.FailTransient(ctx, k, old),
	} {
		if !errors.Is(err, idem.ErrStaleToken) {
			t.Errorf("%s with the old lease: %v, want ErrStaleToken", name, err)
		}
	}
	if _, err := b.store.Heartbeat(ctx, k, old, 0); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Heartbeat with the old lease: %v, want ErrStaleToken", err)
	}
	// Same token, other fence: still stale.
	forged := o.Lease
	forged.Fence = old.Fence
	if err := b.store.Commit(ctx, k, forged, []byte(`"forged"`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Commit with the new token and the old fence: %v, want ErrStaleToken", err)
	}
	rec := get(t, b.store, k)
	if rec.Status != idem.StatusInProgress || rec.Fence != o.Lease.Fence {
		t.Fatalf("record after stale calls = %s fence %d, want in_progress fence %d", rec.Status, rec.Fence, o.Lease.Fence)
	}
	ok(t, b.store.Commit(ctx, k, o.Lease, []byte(`"new"`)), "new owner Commit")
	p := begin(t, b.store, k, r, nil)
	wantKind(t, p, idem.PriorResult)
	if string(p.Result) != `"new"` {
		t.Errorf("replayed %s, want the new owner's result", p.Result)
	}
}

func testHeartbeat(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "order-10")
	r := request(t, `{"a":1}`)
	lease := fresh(t, b.store, k, r)
	b.clock.Advance(Lease - time.Second)
	l2, err := b.store.Heartbeat(ctx, k, lease, 0)
	ok(t, err, "Heartbeat")
	if want := b.clock.Now().Add(Lease); !sameTime(l2.ExpiresAt, want) || l2.Token != lease.Token || l2.Fence != lease.Fence {
		t.Fatalf("heartbeat lease = %+v, want same token and fence, expiring %v", l2, want)
	}
	b.clock.Advance(2 * time.Second) // past the original lease
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	l3, err := b.store.Heartbeat(ctx, k, l2, time.Minute)
	ok(t, err, "Heartbeat with explicit extension")
	if want := b.clock.Now().Add(time.Minute); !sameTime(l3.ExpiresAt, want) {
		t.Errorf("extended lease expires %v, want %v", l3.ExpiresAt, want)
	}
	l4, err := b.store.Heartbeat(ctx, k, l3, -time.Second)
	ok(t, err, "Heartbeat with a negative extension")
	if want := b.clock.Now().Add(Lease); !sameTime(l4.ExpiresAt, want) {
		t.Errorf("lease extended by -1s expires %v, want %v (the store's lease, as for 0)", l4.ExpiresAt, want)
	}
	ok(t, b.store.Commit(ctx, k, lease, []byte(`1`)), "Commit with the lease from Begin")
}

func testSettledLeaseStale(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "order-11")
	r := request(t, `{"a":1}`)
	lease := fresh(t, b.store, k, r)
	ok(t, b.store.Commit(ctx, k, lease, []byte(`1`)), "Commit")
	if err := b.store.Commit(ctx, k, lease, []byte(`2`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("second Commit: %v, want ErrStaleToken", err)
	}
	if err := b.store.FailTransient(ctx, k, lease); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("FailTransient after Commit: %v, want ErrStaleToken", err)
	}
	if _, err := b.store.Heartbeat(ctx, k, lease, 0); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Heartbeat after Commit: %v, want ErrStaleToken", err)
	}
	if rec := get(t, b.store, k); string(rec.Result) != `1` {
		t.Errorf("result = %s, want the first commit's", rec.Result)
	}
	// A lease that lapsed without a takeover is still the owner's.
	k2 := b.key(t, "order-11b")
	lease2 := fresh(t, b.store, k2, r)
	b.clock.Advance(2 * Lease)
	ok(t, b.store.Commit(ctx, k2, lease2, []byte(`3`)), "Commit after the lease lapsed, not taken over")
}

func testPurge(t *testing.T, b *bundle) {
	ctx := context.Background()
	other := RandomNamespace(t)
	r := request(t, `{"a":1}`)
	short := &idem.BeginOpts{Retention: time.Minute}
	for _, v := range []string{"p1", "p2"} {
		wantKind(t, begin(t, b.store, b.key(t, v), r, short), idem.Fresh)
	}
	live := b.key(t, "p3")
	wantKind(t, begin(t, b.store, live, r, nil), idem.Fresh)
	ko, err := idem.ParseKey(other, "p1")
	ok(t, err, "ParseKey")
	wantKind(t, begin(t, b.store, ko, r, short), idem.Fresh)

	n, err := b.store.PurgeExpired(ctx, b.ns, b.clock.Now().Add(time.Minute-time.Millisecond))
	ok(t, err, "PurgeExpired before expiry")
	if n != 0 {
		t.Fatalf("purged %d records before they expired", n)
	}
	b.clock.Advance(time.Minute)
	n, err = b.store.PurgeExpired(ctx, b.ns, b.clock.Now())
	ok(t, err, "PurgeExpired")
	if n != 2 {
		t.Errorf("purged %d, want 2 (expires_at <= asOf, own namespace)", n)
	}
	get(t, b.store, live)
	n, err = b.store.PurgeExpired(ctx, other, b.clock.Now())
	ok(t, err, "PurgeExpired other namespace")
	if n != 1 {
		t.Errorf("other namespace purged %d, want 1: its expired record must have survived the first purge", n)
	}
}

func testOverride(t *testing.T, b *bundle) {
	k := b.key(t, "order-12")
	o := begin(t, b.store, k, request(t, `{}`), &idem.BeginOpts{Retention: 90 * time.Minute, Lease: 3 * time.Second})
	wantKind(t, o, idem.Fresh)
	now := b.clock.Now()
	if rec := get(t, b.store, k); !sameTime(rec.ExpiresAt, now.Add(90*time.Minute)) {
		t.Errorf("expires_at = %v, want now + override = %v", rec.ExpiresAt, now.Add(90*time.Minute))
	}
	if !sameTime(o.Lease.ExpiresAt, now.Add(3*time.Second)) || o.Lease.TTL != 3*time.Second {
		t.Errorf("lease = %+v, want 3s", o.Lease)
	}
	b.clock.Advance(3 * time.Second)
	wantKind(t, begin(t, b.store, k, request(t, `{}`), nil), idem.Fresh)
}

func testExpiry(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "order-13")
	r := request(t, `{"a":1}`)
	lease := fresh(t, b.store, k, r)
	ok(t, b.store.Commit(ctx, k, lease, []byte(`"v1"`)), "Commit")
	b.clock.Advance(Retention - time.Millisecond)
	wantKind(t, begin(t, b.store, k, r, nil), idem.PriorResult)
	b.clock.Advance(time.Millisecond)
	if _, err := b.store.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get of an expired record: %v, want ErrNotFound", err)
	}
	// Expired counts as absent, even for another request: the Begin
	// reserves the key anew, taking nothing over. The new record may start
	// its fence again from 1 (see idem.Lease); its token is new.
	o := begin(t, b.store, k, request(t, `{"a":2}`), nil)
	wantKind(t, o, idem.Fresh)
	if o.TakenOver || o.Lease.Fence < 1 || o.Lease.Token == lease.Token {
		t.Errorf("Begin after expiry = lease %+v (taken over %v), want a new token, a fence of 1 or more, and no takeover (the old lease had fence %d)",
			o.Lease, o.TakenOver, lease.Fence)
	}
}

// testNeverExpiresWhileLeased: a record in progress does not expire before
// its lease ends, though its retention be shorter, so that a run outlasting
// the retention is never joined by a second one: a lease longer than the
// retention, or a heartbeat past it, keeps the record, and another Begin
// meanwhile is InFlight, not Fresh.
func testNeverExpiresWhileLeased(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)

	k := b.key(t, "lease-longer-than-retention")
	o := begin(t, b.store, k, r, &idem.BeginOpts{Retention: time.Second, Lease: 10 * time.Second})
	wantKind(t, o, idem.Fresh)
	b.clock.Advance(5 * time.Second)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	ok(t, b.store.Commit(ctx, k, o.Lease, []byte(`1`)), "Commit after the retention, within the lease")
	wantKind(t, begin(t, b.store, k, r, nil), idem.PriorResult)

	k = b.key(t, "heartbeat-past-retention")
	o = begin(t, b.store, k, r, &idem.BeginOpts{Retention: 20 * time.Second, Lease: 10 * time.Second})
	wantKind(t, o, idem.Fresh)
	b.clock.Advance(8 * time.Second)
	lease, err := b.store.Heartbeat(ctx, k, o.Lease, 30*time.Second) // to 38 s
	ok(t, err, "Heartbeat")
	b.clock.Advance(17 * time.Second) // 25 s: past the retention
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	if rec := get(t, b.store, k); rec.ExpiresAt.Before(lease.ExpiresAt) {
		t.Errorf("expires_at %v, before the lease's end %v", rec.ExpiresAt, lease.ExpiresAt)
	}
	ok(t, b.store.Commit(ctx, k, lease, []byte(`2`)), "Commit after the retention, within the extended lease")
	wantKind(t, begin(t, b.store, k, r, nil), idem.PriorResult)
	// Once the lease's end has passed, the record expires as any other.
	b.clock.Advance(14 * time.Second) // 39 s
	wantKind(t, begin(t, b.store, k, r, nil), idem.Fresh)
}

// testLeaseNeverShorter: a lease whose length is not a whole number of
// the backend's time unit (500 ns over) is kept, rounded up, at least as
// long as the Lease.ExpiresAt the owner was given, from Begin and from
// Heartbeat: a Begin just before that instant is InFlight.
func testLeaseNeverShorter(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	const odd = 10*time.Second + 500*time.Nanosecond

	k := b.key(t, "odd-lease")
	o := begin(t, b.store, k, r, &idem.BeginOpts{Lease: odd})
	wantKind(t, o, idem.Fresh)
	if want := b.clock.Now().Add(odd); o.Lease.ExpiresAt.Before(want) {
		t.Errorf("lease ends %v, want %v or later", o.Lease.ExpiresAt, want)
	}
	b.clock.Advance(10 * time.Second)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)

	k = b.key(t, "odd-heartbeat")
	o = begin(t, b.store, k, r, nil)
	wantKind(t, o, idem.Fresh)
	lease, err := b.store.Heartbeat(ctx, k, o.Lease, odd)
	ok(t, err, "Heartbeat")
	if want := b.clock.Now().Add(odd); lease.ExpiresAt.Before(want) {
		t.Errorf("heartbeat lease ends %v, want %v or later", lease.ExpiresAt, want)
	}
	b.clock.Advance(10 * time.Second)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	ok(t, b.store.Commit(ctx, k, lease, []byte(`1`)), "Commit")
}

func testIsolation(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	k := b.key(t, "shared")
	ka, err := k.WithScope("caller-a")
	ok(t, err, "WithScope")
	kb, err := k.WithScope("caller-b")
	ok(t, err, "WithScope")
	other, err := idem.ParseKey(RandomNamespace(t), "shared")
	ok(t, err, "ParseKey")
	leases := map[idem.Key]idem.Lease{}
	for _, key := range []idem.Key{k, ka, kb, other} {
		leases[key] = fresh(t, b.store, key, r)
	}
	for i, key := range []idem.Key{k, ka, kb, other} {
		ok(t, b.store.Commit(ctx, key, leases[key], []byte{'0' + byte(i)}), "Commit")
	}
	for i, key := range []idem.Key{k, ka, kb, other} {
		o := begin(t, b.store, key, r, nil)
		wantKind(t, o, idem.PriorResult)
		if string(o.Result) != string([]byte{'0' + byte(i)}) {
			t.Errorf("%s replayed %s, want its own result %c", key, o.Result, '0'+byte(i))
		}
	}
	if rec := get(t, b.store, ka); rec.Key != ka {
		t.Errorf("Get(%v).Key = %v", ka, rec.Key)
	}
}

func testBadInput(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "bad")
	r := request(t, `{}`)
	if _, err := b.store.Begin(ctx, idem.Key{}, r, nil); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("Begin with the zero Key: %v, want ErrInvalidKey", err)
	}
	if _, err := b.store.Begin(ctx, k, idem.Request{Payload: []byte(`{}`)}, nil); !errors.Is(err, idem.ErrInvalidFingerprint) {
		t.Errorf("Begin without a fingerprint: %v, want ErrInvalidFingerprint", err)
	}
	bad := idem.Request{Fingerprint: r.Fingerprint, Payload: []byte(`{"a":`)}
	if _, err := b.store.Begin(ctx, k, bad, nil); !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Begin with invalid JSON: %v, want ErrInvalidPayload", err)
	}
	badUTF8 := idem.Request{Fingerprint: r.Fingerprint, Payload: []byte("\"\xff\"")}
	if _, err := b.store.Begin(ctx, k, badUTF8, nil); !errors.Is(err, idem.ErrInvalidPayload) {
		t.Errorf("Begin with invalid UTF-8: %v, want ErrInvalidPayload", err)
	}
	if _, err := b.store.Begin(ctx, k, r, &idem.BeginOpts{Retention: -time.Second}); !errors.Is(err, idem.ErrInvalidOptions) {
		t.Errorf("Begin with a negative retention: %v, want ErrInvalidOptions", err)
	}
	if _, err := b.store.Begin(ctx, k, r, &idem.BeginOpts{Lease: -time.Second}); !errors.Is(err, idem.ErrInvalidOptions) {
		t.Errorf("Begin with a negative lease: %v, want ErrInvalidOptions", err)
	}
	if _, err := b.store.Get(ctx, k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("rejected Begins left a record: Get = %v", err)
	}
	if err := b.store.Commit(ctx, k, idem.Lease{}, []byte(`1`)); !errors.Is(err, idem.ErrStaleToken) {
		t.Errorf("Commit with the zero Lease: %v, want ErrStaleToken", err)
	}
	if _, err := b.store.PurgeExpired(ctx, idem.Namespace("Bad NS"), time.Now()); !errors.Is(err, idem.ErrInvalidNamespace) {
		t.Errorf("PurgeExpired with an invalid namespace: %v, want ErrInvalidNamespace", err)
	}
	// A nil payload is recorded as null.
	wantKind(t, begin(t, b.store, k, idem.Request{Fingerprint: r.Fingerprint}, nil), idem.Fresh)
	if rec := get(t, b.store, k); !sameJSON(t, rec.Request, []byte("null")) {
		t.Errorf("nil payload recorded as %s, want null", rec.Request)
	}
}

func testInvalidResult(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "bad-result")
	r := request(t, `{}`)
	lease := fresh(t, b.store, k, r)
	if err := b.store.Commit(ctx, k, lease, []byte(`{"unterminated"`)); !errors.Is(err, idem.ErrInvalidPayload) {
		t.Fatalf("Commit with invalid JSON: %v, want ErrInvalidPayload", err)
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusInProgress {
		t.Fatalf("record after a rejected Commit = %s, want in_progress", rec.Status)
	}
	ok(t, b.store.Commit(ctx, k, lease, []byte(`{"fine":true}`)), "Commit after a rejected one")
}

func testCancelled(t *testing.T, b *bundle) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := b.key(t, "cancelled")
	r := request(t, `{}`)
	if _, err := b.store.Begin(ctx, k, r, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Begin with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := b.store.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("cancelled Begin left a record: %v", err)
	}
	lease := fresh(t, b.store, k, r)
	if err := b.store.Commit(ctx, k, lease, []byte(`1`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context: %v, want context.Canceled", err)
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusInProgress {
		t.Errorf("cancelled Commit changed the record to %s", rec.Status)
	}
}

func testPayloadLimit(t *testing.T, b *bundle) {
	if b.h.MaxPayload <= 0 {
		t.Skip("Harness.MaxPayload not set")
	}
	ctx := context.Background()
	big := []byte(`"` + strings.Repeat("x", b.h.MaxPayload) + `"`)
	k := b.key(t, "big")
	r := request(t, `{}`)
	var tooLarge *idem.PayloadTooLargeError
	if _, err := b.store.Begin(ctx, k, idem.Request{Fingerprint: r.Fingerprint, Payload: big}, nil); !errors.As(err, &tooLarge) {
		t.Errorf("Begin with a payload over the limit: %v, want *PayloadTooLargeError", err)
	}
	lease := fresh(t, b.store, k, r)
	if err := b.store.Commit(ctx, k, lease, big); !errors.Is(err, idem.ErrPayloadTooLarge) {
		t.Errorf("Commit with a result over the limit: %v, want ErrPayloadTooLarge", err)
	}
	se := idem.StoredError{Class: "big", Message: strings.Repeat("x", b.h.MaxPayload)}
	if err := b.store.FailPermanent(ctx, k, lease, se); !errors.Is(err, idem.ErrPayloadTooLarge) {
		t.Errorf("FailPermanent with an encoded error over the limit: %v, want ErrPayloadTooLarge", err)
	}
	if rec := get(t, b.store, k); rec.Status != idem.StatusInProgress {
		t.Errorf("oversized Commit or FailPermanent changed the record to %s", rec.Status)
	}
}

// testDurationsForGood: a retention, lease or heartbeat of math.MaxInt64
// (292 years, a way of saying "for good") lasts at least two centuries;
// none wraps around into a record or lease already expired.
func testDurationsForGood(t *testing.T, b *bundle) {
	ctx := context.Background()
	forGood := time.Duration(math.MaxInt64)
	centuries := 200 * 365 * 24 * time.Hour
	k := b.key(t, "for-good")
	r := request(t, `{"a":1}`)
	o := begin(t, b.store, k, r, &idem.BeginOpts{Retention: forGood, Lease: forGood})
	wantKind(t, o, idem.Fresh)
	if !o.Lease.ExpiresAt.After(b.clock.Now().Add(centuries)) {
		t.Errorf("lease of MaxInt64 expires at %v", o.Lease.ExpiresAt)
	}
	b.clock.Advance(10 * Retention)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	lease, err := b.store.Heartbeat(ctx, k, o.Lease, forGood)
	ok(t, err, "Heartbeat by MaxInt64")
	if !lease.ExpiresAt.After(b.clock.Now().Add(centuries)) {
		t.Errorf("lease extended by MaxInt64 expires at %v", lease.ExpiresAt)
	}
	b.clock.Advance(10 * Retention)
	wantKind(t, begin(t, b.store, k, r, nil), idem.InFlight)
	ok(t, b.store.Commit(ctx, k, lease, []byte(`"kept"`)), "Commit")
	b.clock.Advance(10 * Retention)
	if o := begin(t, b.store, k, r, nil); o.Kind != idem.PriorResult || string(o.Result) != `"kept"` {
		t.Errorf("Begin after the Commit = %v %s, want the result kept", o.Kind, o.Result)
	}
	if rec := get(t, b.store, k); !rec.ExpiresAt.After(b.clock.Now().Add(centuries)) {
		t.Errorf("record retained for MaxInt64 expires at %v", rec.ExpiresAt)
	}
}
