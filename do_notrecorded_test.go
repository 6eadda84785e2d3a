package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
)

// Do's error says, with ErrNotRecorded, when fn's outcome could not be
// recorded, so that a caller in a transaction can tell a permanent failure
// it may commit (recorded with it) from one it must roll back; a recorded
// outcome and a transient failure are not ErrNotRecorded.
func TestDoErrorSaysWhenTheOutcomeIsNotRecorded(t *testing.T) {
	s, err := memstore.New(memstore.Config{MaxPayload: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := idem.MustNamespace("orders")
	big := strings.Repeat("x", 4<<10)
	errGone := errors.New("out of stock")
	for _, tc := range []struct {
		name          string
		fn            func(context.Context) (string, error)
		notRecorded   bool
		permanent     bool
		storeErr      error
		messagePrefix string
	}{
		{"result recorded", func(context.Context) (string, error) { return "ok", nil }, false, false, nil, ""},
		{"result too large", func(context.Context) (string, error) { return big, nil }, true, false, idem.ErrPayloadTooLarge, "idem: result not recorded: "},
		{"failure recorded", func(context.Context) (string, error) { return "", idem.Permanent("gone", errGone) }, false, true, nil, ""},
		{"failure too large", func(context.Context) (string, error) { return "", idem.Permanent("gone", errors.New(big)) }, true, true, idem.ErrPayloadTooLarge, ""},
		{"transient failure", func(context.Context) (string, error) { return "", errGone }, false, false, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _ := idem.NewKey(ns, tc.name)
			_, err := idem.Do(ctx, s, key, "req", tc.fn, nil)
			if got := errors.Is(err, idem.ErrNotRecorded); got != tc.notRecorded {
				t.Errorf("errors.Is(%v, ErrNotRecorded) = %v, want %v", err, got, tc.notRecorded)
			}
			if got := idem.IsPermanent(err); got != tc.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, got, tc.permanent)
			}
			if tc.storeErr != nil && !errors.Is(err, tc.storeErr) {
				t.Errorf("%v does not wrap the store's %v", err, tc.storeErr)
			}
			if tc.messagePrefix != "" && !strings.HasPrefix(err.Error(), tc.messagePrefix) {
				t.Errorf("message %q, want it to start %q", err, tc.messagePrefix)
			}
		})
	}
}

// When a heartbeat panics, nothing is recorded, whatever fn returns: Do's
// error is ErrNotRecorded, also beside a permanent failure of fn's.
func TestDoErrorIsNotRecordedAfterAHeartbeatPanic(t *testing.T) {
	s := panickyHeartbeats{newMem(t, nil)}
	opts := &idem.DoOpts{Begin: &idem.BeginOpts{Lease: time.Hour}, HeartbeatEvery: time.Millisecond}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"result", nil, false},
		{"permanent failure", idem.Permanent("gone", errors.New("out of stock")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKey(t, "heartbeat-panic-"+tc.name)
			_, err := idem.Do(context.Background(), s, k, "req", func(ctx context.Context) (int, error) {
				waitCancelled(t, ctx)
				return 1, tc.err
			}, opts)
			if !errors.Is(err, idem.ErrNotRecorded) || idem.IsPermanent(err) != tc.permanent {
				t.Errorf("Do = %v: ErrNotRecorded %v, IsPermanent %v; want true, %v", err, errors.Is(err, idem.ErrNotRecorded), idem.IsPermanent(err), tc.permanent)
			}
			if _, err := s.Get(context.Background(), k); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Get after Do = %v, want ErrNotFound (nothing recorded)", err)
			}
		})
	}
}
