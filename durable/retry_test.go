package durable_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem/durable"
)

// A failed instance retried by key runs its step again, at attempt 1.
func TestRetryRunsTheFailedStepAgain(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, fast(ctl))
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:9"})
	b.start(t)
	b.waitStatus(t, id, durable.StatusAwaitingSignal)
	b.signal(t, durable.ByID(id), "go", "a", "")
	b.signal(t, durable.ByID(id), "fail", nil, "")
	failed := b.waitStatus(t, id, durable.StatusFailed)

	got, err := b.client.Retry(ctxT(t), durable.ByKey("order:9"), nil)
	if err != nil || got != id {
		t.Fatalf("Retry: %d, %v; want %d", got, err, id)
	}
	in := b.waitStatus(t, id, durable.StatusAwaitingSignal)
	if in.Step != "got" || in.Attempt != 1 || !in.FinishedAt.IsZero() || string(in.State) != string(failed.State) {
		t.Fatalf("retried: step %s, attempt %d, finished %v, state %s (failed with %s)",
			in.Step, in.Attempt, in.FinishedAt, in.State, failed.State)
	}
	b.signal(t, durable.ByKey("order:9"), "finish", 7, "")
	if in := b.waitStatus(t, id, durable.StatusDone); string(in.Result) != "7" {
		t.Fatalf("result %s", in.Result)
	}
}

func TestRetryErrors(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	ctx := ctxT(t)
	fail := func(id int64) {
		b.exec(t, `UPDATE durable_instance SET status = 'failed', finished_at = now(), error = 'boom' WHERE id = $1`, id)
	}

	failed := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	fail(failed)
	occupant := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "k"})
	_, err := b.client.Retry(ctx, durable.ByID(failed), nil)
	var dup *durable.DuplicateError
	if !errors.As(err, &dup) || dup.ID != occupant || dup.CorrelationKey != "k" {
		t.Fatalf("Retry onto an occupied key: %v, want a *DuplicateError with id %d", err, occupant)
	}
	if in := b.get(t, failed); in.Status != durable.StatusFailed {
		t.Fatalf("a rejected Retry left the instance %s", in.Status)
	}

	cancelled := b.insert(t, ctl.With(ctlState{}), nil)
	if err := b.client.Cancel(ctx, durable.ByID(cancelled), ""); err != nil {
		t.Fatal(err)
	}
	other := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "twice"})
	fail(other)
	again := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "twice"})
	fail(again)
	for _, tc := range []struct {
		target durable.Target
		want   error
	}{
		{durable.ByID(occupant), durable.ErrNotFailed},
		{durable.ByID(cancelled), durable.ErrNotFailed},
		{durable.ByID(again + 100), durable.ErrNoTarget},
		{durable.ByKey("none"), durable.ErrNoTarget},
		{durable.ByKey("twice"), durable.ErrAmbiguousTarget},
		{durable.Target{}, durable.ErrNoTarget},
	} {
		if _, err := b.client.Retry(ctx, tc.target, nil); !errors.Is(err, tc.want) {
			t.Errorf("Retry(%v): %v, want %v", tc.target, err, tc.want)
		}
	}

	// Retry at a later time; once the occupant is gone, the key is free.
	if err := b.client.Cancel(ctx, durable.ByID(occupant), ""); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if _, err := b.client.Retry(ctx, durable.ByID(failed), &durable.RetryOpts{At: at}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	in := b.get(t, failed)
	if in.Status != durable.StatusRunnable || in.Attempt != 1 || !in.EligibleAt.Equal(at) || in.Error != "boom" {
		t.Fatalf("retried: status %s, attempt %d, eligible %v (want %v), error %q", in.Status, in.Attempt, in.EligibleAt, at, in.Error)
	}
	if id, err := b.client.Lookup(ctx, "k"); err != nil || id != failed {
		t.Fatalf("Lookup after Retry: %d, %v; want %d", id, err, failed)
	}
}

// RetryTx revives a failed instance only if the caller's transaction
// commits, and leaves the transaction usable when it refuses.
func TestRetryTxJoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	ctx := ctxT(t)
	fail := func(id int64) {
		b.exec(t, `UPDATE durable_instance SET status = 'failed', finished_at = now(), attempt = 4, error = 'boom' WHERE id = $1`, id)
	}
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "tx:1"})
	fail(id)

	// Rolled back: nothing happened.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.client.RetryTx(ctx, tx, durable.ByID(id), nil); err != nil || got != id {
		t.Fatalf("RetryTx: %d, %v; want %d", got, err, id)
	}
	if in := b.get(t, id); in.Status != durable.StatusFailed {
		t.Fatalf("outside the open transaction the instance is %s, want failed", in.Status)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if in := b.get(t, id); in.Status != durable.StatusFailed || in.Attempt != 4 || in.FinishedAt.IsZero() {
		t.Fatalf("after the rollback: status %s, attempt %d, finished %v", in.Status, in.Attempt, in.FinishedAt)
	}

	// Refused: the transaction is still usable, and commits its other work.
	other := b.insert(t, ctl.With(ctlState{}), nil)
	occupant := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "tx:1"})
	tx, err = b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.client.RetryTx(ctx, tx, durable.ByKey("tx:1"), nil)
	var dup *durable.DuplicateError
	if !errors.As(err, &dup) || dup.ID != occupant {
		t.Fatalf("RetryTx onto an occupied key: %v, want a *DuplicateError with id %d", err, occupant)
	}
	if _, err := b.client.RetryTx(ctx, tx, durable.ByID(other), nil); !errors.Is(err, durable.ErrNotFailed) {
		t.Fatalf("RetryTx of a live instance: %v, want ErrNotFailed", err)
	}
	if err := b.client.CancelTx(ctx, tx, durable.ByID(occupant), "make room"); err != nil {
		t.Fatalf("CancelTx after the refused RetryTx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit after the refused RetryTx: %v", err)
	}
	if in := b.get(t, id); in.Status != durable.StatusFailed {
		t.Fatalf("a refused RetryTx left the instance %s", in.Status)
	}

	// Committed: the instance is runnable again, and has its key back.
	tx, err = b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.client.RetryTx(ctx, tx, durable.ByKey("tx:1"), nil); err != nil || got != id {
		t.Fatalf("RetryTx: %d, %v; want %d", got, err, id)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if in := b.get(t, id); in.Status != durable.StatusRunnable || in.Attempt != 1 || !in.FinishedAt.IsZero() {
		t.Fatalf("after the commit: status %s, attempt %d, finished %v", in.Status, in.Attempt, in.FinishedAt)
	}
	if got, err := b.client.Lookup(ctx, "tx:1"); err != nil || got != id {
		t.Fatalf("Lookup: %d, %v; want %d", got, err, id)
	}
}
