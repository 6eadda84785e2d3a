package durableotel_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgo/idem/contrib/durableotel"
	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestEngineEvents: the hooks set on a real engine record what it did: an
// instance that runs two steps and is done gives one committed point per
// step, its FSM, step and outcome as attributes and nothing else; the
// picker's claims and the queue's configuration are recorded per queue,
// and the engine's graceful stop as one drain of each queue.
func TestEngineEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	type order struct{ ID int }
	fsm, err := durable.NewFSM(durable.FSMConfig[order]{
		Name:    "order",
		Initial: "charge",
		Steps: map[string]durable.StepFunc[order]{
			"charge": func(context.Context, *durable.Step[order]) (durable.Outcome, error) {
				return durable.Next("ship"), nil
			},
			"ship": func(context.Context, *durable.Step[order]) (durable.Outcome, error) {
				return durable.Done(nil), nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	hooks, reader := setup(t)
	shipped := make(chan durable.StepStopEvent, 1)
	record := hooks.StepStop
	hooks.StepStop = func(e durable.StepStopEvent) {
		record(e)
		if e.Step == "ship" {
			shipped <- e
		}
	}
	client, err := durable.NewClient(pool, &durable.Config{
		ID:           "engine-under-test",
		FSMs:         []durable.Definition{fsm},
		Queues:       map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 4, Prefetch: 2}},
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks:        hooks,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = client.Stop(context.Background())
		}
	})
	if _, err := client.Insert(ctx, fsm.With(order{ID: 1}), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-shipped:
		if e.Kind != durable.KindDone || e.Fenced || e.CommitErr != nil {
			t.Fatalf("the ship step stopped with %+v, want done and committed", e)
		}
	case <-ctx.Done():
		t.Fatal("the instance never reached its ship step")
	}
	stopped = true
	if err := client.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	got := collect(t, reader)
	hist, ok := got["durable.step.duration"].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("durable.step.duration is %T, want a float64 histogram", got["durable.step.duration"].Data)
	}
	step := func(name string, kind durable.OutcomeKind) attribute.Set {
		return attribute.NewSet(durableotel.FSMKey.String("order"), durableotel.StepKey.String(name),
			durableotel.OutcomeKey.String(string(kind)), durableotel.CommitKey.String(durableotel.Committed),
			durableotel.ErrorKey.Bool(false))
	}
	want := map[attribute.Set]bool{step("charge", durable.KindNext): true, step("ship", durable.KindDone): true}
	if len(hist.DataPoints) != len(want) {
		t.Errorf("%d step-duration points, want %d", len(hist.DataPoints), len(want))
	}
	for _, p := range hist.DataPoints {
		if !want[p.Attributes] || p.Count != 1 {
			t.Errorf("step-duration point %v count %d, want one of the two steps, once",
				p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count)
		}
	}

	def := attribute.NewSet(durableotel.QueueKey.String(durable.DefaultQueue))
	perQueue := func(name string) int64 {
		t.Helper()
		var points []metricdata.DataPoint[int64]
		switch d := got[name].Data.(type) {
		case metricdata.Sum[int64]:
			points = d.DataPoints
		case metricdata.Gauge[int64]:
			points = d.DataPoints
		default:
			t.Errorf("%s is %T, want an int64 sum or gauge", name, got[name].Data)
			return 0
		}
		if len(points) != 1 || points[0].Attributes != def {
			t.Errorf("%s has points %v, want one, for the default queue", name, points)
			return 0
		}
		return points[0].Value
	}
	if n := perQueue("durable.pick.rows"); n != 2 {
		t.Errorf("durable.pick.rows %d, want 2 (one per step)", n)
	}
	if n := perQueue("durable.pick.claims"); n < 2 {
		t.Errorf("durable.pick.claims %d, want at least the 2 that claimed a row", n)
	}
	if n := perQueue("durable.queue.concurrency"); n != 4 {
		t.Errorf("durable.queue.concurrency %d, want 4", n)
	}
	if n := perQueue("durable.queue.prefetch"); n != 2 {
		t.Errorf("durable.queue.prefetch %d, want 2", n)
	}
	if n := perQueue("durable.queue.drains"); n != 1 {
		t.Errorf("durable.queue.drains %d, want 1", n)
	}
	if _, ok := got["durable.step.fenced"]; ok {
		t.Error("durable.step.fenced recorded although no step was fenced")
	}
}
