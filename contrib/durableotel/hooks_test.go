package durableotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/idemgo/idem/contrib/durableotel"
	"github.com/idemgo/idem/durable"
)

// setup returns Hooks recording into a MeterProvider read by the returned
// ManualReader.
func setup(t *testing.T) (durable.Hooks, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, err := durableotel.Hooks(mp)
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

// collect returns the metrics of r's scope by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != durableotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, durableotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	return got
}

// sum is the expected data of a cumulative monotonic Int64 counter.
func sum(points ...metricdata.DataPoint[int64]) metricdata.Sum[int64] {
	return metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: points}
}

func point(v int64, kvs ...attribute.KeyValue) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(kvs...), Value: v}
}

// check asserts that got has a metric name with data want, ignoring times.
func check[T metricdata.Aggregation](t *testing.T, got map[string]metricdata.Metrics, name string, want T) {
	t.Helper()
	m, ok := got[name]
	if !ok {
		t.Errorf("no metric %s", name)
		return
	}
	metricdatatest.AssertAggregationsEqual(t, want, m.Data, metricdatatest.IgnoreTimestamp())
}

func TestStepStop(t *testing.T) {
	h, r := setup(t)
	h.StepStop(durable.StepStopEvent{ID: 1, FSM: "order", Step: "charge", Attempt: 1, Kind: durable.KindNext, Duration: 20 * time.Millisecond})
	h.StepStop(durable.StepStopEvent{ID: 2, FSM: "order", Step: "charge", Attempt: 1, Kind: durable.KindNext, Duration: 40 * time.Millisecond})
	h.StepStop(durable.StepStopEvent{ID: 3, FSM: "order", Step: "charge", Attempt: 2, Kind: durable.KindRetry, Duration: 3 * time.Second, Err: errors.New("boom")})
	h.StepStop(durable.StepStopEvent{ID: 4, FSM: "order", Step: "ship", Attempt: 1, Kind: durable.KindDone, Duration: time.Millisecond, Fenced: true})
	h.StepStop(durable.StepStopEvent{ID: 5, FSM: "order", Step: "ship", Attempt: 1, Kind: durable.KindDone, Duration: time.Millisecond, CommitErr: errors.New("conn reset")})
	h.StepStop(durable.StepStopEvent{ID: 6, FSM: "order", Step: "ship", Attempt: 1, Duration: 2 * time.Millisecond, Err: context.Canceled, HandedBack: true})
	got := collect(t, r)

	m := got["durable.step.duration"]
	if m.Unit != "s" {
		t.Errorf("durable.step.duration unit %q, want s", m.Unit)
	}
	hist, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("durable.step.duration is %T, want a float64 histogram", m.Data)
	}
	attrs := func(step string, kind durable.OutcomeKind, commit string, failed bool) attribute.Set {
		return attribute.NewSet(durableotel.FSMKey.String("order"), durableotel.StepKey.String(step),
			durableotel.OutcomeKey.String(string(kind)), durableotel.CommitKey.String(commit), durableotel.ErrorKey.Bool(failed))
	}
	want := map[attribute.Set]struct {
		count uint64
		sum   float64
	}{
		attrs("charge", durable.KindNext, durableotel.Committed, false): {2, 0.06},
		attrs("charge", durable.KindRetry, durableotel.Committed, true): {1, 3},
		attrs("ship", durable.KindDone, durableotel.Fenced, false):      {1, 0.001},
		attrs("ship", durable.KindDone, durableotel.CommitError, false): {1, 0.001},
		attrs("ship", "", durableotel.HandedBack, true):                 {1, 0.002},
	}
	if len(hist.DataPoints) != len(want) {
		t.Errorf("%d histogram points, want %d", len(hist.DataPoints), len(want))
	}
	for _, p := range hist.DataPoints {
		w, ok := want[p.Attributes]
		if !ok {
			t.Errorf("unexpected point %v", p.Attributes.Encoded(attribute.DefaultEncoder()))
			continue
		}
		if p.Count != w.count || p.Sum < w.sum-1e-9 || p.Sum > w.sum+1e-9 {
			t.Errorf("%v: count %d sum %g, want %d and %g", p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count, p.Sum, w.count, w.sum)
		}
	}

	check(t, got, "durable.step.fenced", sum(point(1,
		durableotel.FSMKey.String("order"), durableotel.StepKey.String("ship"), durableotel.OutcomeKey.String("done"))))
}

func TestPickAndSaturation(t *testing.T) {
	h, r := setup(t)
	h.PickStop(durable.PickStopEvent{Queue: "default", Worker: "engine-1", Count: 3, Demand: 8})
	h.PickStop(durable.PickStopEvent{Queue: "default", Worker: "engine-1", Count: 0, Demand: 5})
	h.PickStop(durable.PickStopEvent{Queue: "mail", Worker: "engine-1", Count: 2, Demand: 2})
	h.SchedulerSaturation(durable.SaturationEvent{Queue: "default", InFlight: 7, Buffer: 1, Concurrency: 8, Prefetch: 4})
	h.SchedulerSaturation(durable.SaturationEvent{Queue: "default", InFlight: 8, Buffer: 2, Concurrency: 8, Prefetch: 4})
	got := collect(t, r)

	def, mail := durableotel.QueueKey.String("default"), durableotel.QueueKey.String("mail")
	check(t, got, "durable.pick.claims", sum(point(2, def), point(1, mail)))
	check(t, got, "durable.pick.rows", sum(point(3, def), point(2, mail)))
	check(t, got, "durable.pick.demand", sum(point(13, def), point(2, mail)))
	gauge := func(v int64) metricdata.Gauge[int64] {
		return metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{point(v, def)}}
	}
	check(t, got, "durable.queue.in_flight", gauge(8)) // the last poll's
	check(t, got, "durable.queue.buffered", gauge(2))
	check(t, got, "durable.queue.concurrency", gauge(8))
	check(t, got, "durable.queue.prefetch", gauge(4))
}

func TestDrainReaperGC(t *testing.T) {
	h, r := setup(t)
	h.SchedulerDrain(durable.DrainEvent{Queue: "default", Released: 4, InFlight: 2})
	h.SchedulerDrain(durable.DrainEvent{Queue: "default", Released: 1, InFlight: 0})
	h.ReaperReaped(durable.ReapedEvent{Count: 2, IDs: []int64{10, 11}})
	h.ReaperReaped(durable.ReapedEvent{Count: 1, IDs: []int64{12}})
	h.GCSwept(durable.SweptEvent{Count: 1000})
	h.GCSwept(durable.SweptEvent{Count: 17})
	got := collect(t, r)

	def := durableotel.QueueKey.String("default")
	check(t, got, "durable.queue.drains", sum(point(2, def)))
	check(t, got, "durable.drain.released", sum(point(5, def)))
	check(t, got, "durable.drain.in_flight", sum(point(2, def)))
	check(t, got, "durable.reaper.reaped", sum(point(3)))
	check(t, got, "durable.gc.swept", sum(point(1017)))
}

// TestNoEventNoMetric: instruments report nothing before their first
// event, so that a dashboard never shows a zero that was not measured.
func TestNoEventNoMetric(t *testing.T) {
	_, r := setup(t)
	if got := collect(t, r); len(got) != 0 {
		t.Errorf("metrics before any event: %v", got)
	}
}

func TestEveryHookSet(t *testing.T) {
	h, _ := setup(t)
	if h.StepStop == nil || h.PickStop == nil || h.SchedulerSaturation == nil ||
		h.SchedulerDrain == nil || h.ReaperReaped == nil || h.GCSwept == nil {
		t.Errorf("a hook is nil: %+v", h)
	}
}

func TestNilMeterProvider(t *testing.T) {
	for name, mp := range map[string]metric.MeterProvider{
		"nil":                          nil,
		"nil *sdkmetric.MeterProvider": (*sdkmetric.MeterProvider)(nil),
	} {
		h, err := durableotel.Hooks(mp)
		if err == nil {
			t.Errorf("%s: no error for a nil MeterProvider", name)
		}
		if h.StepStop != nil {
			t.Errorf("%s: hooks set despite the error", name)
		}
	}
}

// globalProviderInstalled is set by the test that installs the global
// MeterProvider, which can be done once per process.
var globalProviderInstalled bool

// TestGlobalProviderInstalledLater: Hooks made from the global provider
// before the program installs its SDK record into the SDK's instruments
// once it is installed, as the package documentation promises. (The only
// test of the package that sets the global provider.)
func TestGlobalProviderInstalledLater(t *testing.T) {
	if globalProviderInstalled {
		t.Skip("the global provider forwards to the first SDK installed only; this run (-count) comes after it")
	}
	globalProviderInstalled = true
	h, err := durableotel.Hooks(otel.GetMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	h.GCSwept(durable.SweptEvent{Count: 5}) // before the SDK: dropped

	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	otel.SetMeterProvider(mp)

	h.StepStop(durable.StepStopEvent{FSM: "order", Step: "charge", Kind: durable.KindNext, Duration: 30 * time.Millisecond})
	h.GCSwept(durable.SweptEvent{Count: 7})
	got := collect(t, r)

	check(t, got, "durable.gc.swept", sum(point(7)))
	hist, ok := got["durable.step.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(hist.DataPoints) != 1 {
		t.Fatalf("durable.step.duration: %+v, want one histogram point", got["durable.step.duration"].Data)
	}
	if p := hist.DataPoints[0]; p.Count != 1 || len(p.Bounds) != 16 || p.Bounds[0] != 0.001 || p.Bounds[15] != 10 {
		t.Errorf("step-duration point: count %d bounds %v, want 1 and the package's 16 buckets from 1 ms to 10 s", p.Count, p.Bounds)
	}
}

// TestNoopMeterProvider: the no-op provider, which a program gets when it
// turns telemetry off, gives every hook, and they record nothing without
// failing.
func TestNoopMeterProvider(t *testing.T) {
	h, err := durableotel.Hooks(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	h.StepStop(durable.StepStopEvent{FSM: "order", Step: "charge", Kind: durable.KindNext, Fenced: true})
	h.PickStop(durable.PickStopEvent{Queue: "default", Count: 1, Demand: 1})
	h.SchedulerSaturation(durable.SaturationEvent{Queue: "default"})
	h.SchedulerDrain(durable.DrainEvent{Queue: "default"})
	h.ReaperReaped(durable.ReapedEvent{Count: 1})
	h.GCSwept(durable.SweptEvent{Count: 1})
}
