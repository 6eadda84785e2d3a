package durableotel

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemgo/idem/durable"
)

// ScopeName is the instrumentation scope of the meter Hooks takes from its
// MeterProvider.
const ScopeName = "github.com/idemgo/idem/contrib/durableotel"

// The attribute keys of the instruments.
const (
	// FSMKey is the FSM's name (StepStopEvent.FSM).
	FSMKey = attribute.Key("durable.fsm")
	// StepKey is the step that ran (StepStopEvent.Step).
	StepKey = attribute.Key("durable.step")
	// OutcomeKey is the outcome's kind (durable.OutcomeKind): next, retry,
	// await, schedule_childs, done, stop or cancel; empty for a step the
	// engine's hard stop or the lapse of its lease interrupted, which has
	// none: handed back, or, when the hand-back found the lease taken by
	// another claim or failed, fenced or error.
	OutcomeKey = attribute.Key("durable.outcome")
	// CommitKey is the fate of the outcome: "committed", "fenced" (the
	// lease was lost, nothing changed), "error" (the commit failed) or
	// "handed_back" (the engine's hard stop, or the lapse of the lease,
	// cancelled the step, which failed: nothing was committed and the row
	// is runnable again, its attempt unchanged).
	CommitKey = attribute.Key("durable.commit")
	// ErrorKey is true when the step returned an error or panicked: its
	// outcome, if it has one, came from the error handling (a step handed
	// back has none).
	ErrorKey = attribute.Key("durable.step.error")
	// QueueKey is the queue of pick, saturation and drain events.
	QueueKey = attribute.Key("durable.queue")
)

// The values of CommitKey.
const (
	Committed   = "committed"
	Fenced      = "fenced"
	CommitError = "error"
	HandedBack  = "handed_back"
)

// stepDurationBuckets are the bucket boundaries, in seconds, of
// durable.step.duration: steps are short, from a millisecond to seconds.
var stepDurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Hooks returns durable.Hooks that record the engine's step, pick,
// saturation, drain, reaper and GC events on instruments of a meter named
// ScopeName from mp:
//
//	durable.step.duration     histogram, s: every finished step, from the call
//	                          of the step to its return; attributes FSMKey,
//	                          StepKey, OutcomeKey, CommitKey, ErrorKey
//	durable.step.fenced       counter: outcomes not committed because the
//	                          lease was lost (reaped or taken over meanwhile);
//	                          FSMKey, StepKey, OutcomeKey
//	durable.pick.claims       counter: claims a picker made; QueueKey
//	durable.pick.rows         counter: rows claimed; QueueKey
//	durable.pick.demand       counter: rows asked for; QueueKey
//	durable.queue.in_flight   gauge: steps running at the last poll; QueueKey
//	durable.queue.buffered    gauge: rows claimed, not yet running; QueueKey
//	durable.queue.concurrency gauge: the queue's Concurrency; QueueKey
//	durable.queue.prefetch    gauge: the queue's Prefetch; QueueKey
//	durable.queue.drains      counter: graceful stops of a queue; QueueKey
//	durable.drain.released    counter: claimed rows handed back at a stop;
//	                          QueueKey
//	durable.drain.in_flight   counter: running steps a stop waited for;
//	                          QueueKey
//	durable.reaper.reaped     counter: expired leases taken back
//	durable.gc.swept          counter: terminal rows deleted
//
// The engine ID (PickStopEvent.Worker) and instance ids are not attributes:
// their cardinality is unbounded. Put the engine's identity in the
// MeterProvider's resource instead.
//
// The hooks of concurrency keys and rate limits (ConcurrencyContended,
// RateLimitThrottled, RateLimitUnknown) are left nil: their keys are
// unbounded too. Set them on the returned Hooks to watch those.
//
// The hooks are safe for concurrent use and never block on export: they
// only record into mp's instruments. The error is that of creating an
// instrument, or one for a nil mp, such as a nil *sdkmetric.MeterProvider
// (whose Meter would panic); the Hooks are then the zero Hooks.
func Hooks(mp metric.MeterProvider) (durable.Hooks, error) {
	if mp == nil {
		return durable.Hooks{}, errors.New("durableotel: nil MeterProvider")
	}
	if v := reflect.ValueOf(mp); v.Kind() == reflect.Pointer && v.IsNil() {
		// A provider kept although its set-up failed, or never made.
		return durable.Hooks{}, fmt.Errorf("durableotel: nil %T MeterProvider", mp)
	}
	m := mp.Meter(ScopeName)
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		g, err := m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	stepDuration, err := m.Float64Histogram("durable.step.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time from the call of a step to its return."),
		metric.WithExplicitBucketBoundaries(stepDurationBuckets...))
	errs = append(errs, err)
	var (
		stepFenced  = counter("durable.step.fenced", "{outcome}", "Step outcomes not committed because the lease was lost.")
		pickClaims  = counter("durable.pick.claims", "{claim}", "Claims made by a queue's picker.")
		pickRows    = counter("durable.pick.rows", "{row}", "Rows claimed by a queue's picker.")
		pickDemand  = counter("durable.pick.demand", "{row}", "Rows a queue's picker asked for.")
		inFlight    = gauge("durable.queue.in_flight", "{step}", "Steps of the queue running, at the picker's last poll.")
		buffered    = gauge("durable.queue.buffered", "{row}", "Rows claimed and not yet running, at the picker's last poll.")
		concurrency = gauge("durable.queue.concurrency", "{step}", "The queue's configured concurrency.")
		prefetch    = gauge("durable.queue.prefetch", "{row}", "The queue's configured prefetch.")
		drains      = counter("durable.queue.drains", "{drain}", "Graceful stops of a queue.")
		released    = counter("durable.drain.released", "{row}", "Claimed rows handed back unrun when a queue stopped.")
		drainWaited = counter("durable.drain.in_flight", "{step}", "Running steps a queue's stop waited for.")
		reaped      = counter("durable.reaper.reaped", "{row}", "Rows whose expired lease was taken back.")
		swept       = counter("durable.gc.swept", "{row}", "Terminal rows deleted by garbage collection.")
	)
	if err := errors.Join(errs...); err != nil {
		return durable.Hooks{}, err
	}

	ctx := context.Background()
	queue := func(name string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(QueueKey.String(name)))
	}
	return durable.Hooks{
		StepStop: func(e durable.StepStopEvent) {
			commit := Committed
			switch {
			case e.CommitErr != nil:
				commit = CommitError
			case e.Fenced:
				commit = Fenced
			case e.HandedBack:
				commit = HandedBack
			}
			stepDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(attribute.NewSet(
				FSMKey.String(e.FSM), StepKey.String(e.Step), OutcomeKey.String(string(e.Kind)),
				CommitKey.String(commit), ErrorKey.Bool(e.Err != nil))))
			if e.Fenced {
				stepFenced.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
					FSMKey.String(e.FSM), StepKey.String(e.Step), OutcomeKey.String(string(e.Kind)))))
			}
		},
		PickStop: func(e durable.PickStopEvent) {
			q := queue(e.Queue)
			pickClaims.Add(ctx, 1, q)
			pickRows.Add(ctx, int64(e.Count), q)
			pickDemand.Add(ctx, int64(e.Demand), q)
		},
		SchedulerSaturation: func(e durable.SaturationEvent) {
			q := queue(e.Queue)
			inFlight.Record(ctx, int64(e.InFlight), q)
			buffered.Record(ctx, int64(e.Buffer), q)
			concurrency.Record(ctx, int64(e.Concurrency), q)
			prefetch.Record(ctx, int64(e.Prefetch), q)
		},
		SchedulerDrain: func(e durable.DrainEvent) {
			q := queue(e.Queue)
			drains.Add(ctx, 1, q)
			released.Add(ctx, int64(e.Released), q)
			drainWaited.Add(ctx, int64(e.InFlight), q)
		},
		ReaperReaped: func(e durable.ReapedEvent) {
			reaped.Add(ctx, int64(e.Count))
		},
		GCSwept: func(e durable.SweptEvent) {
			swept.Add(ctx, int64(e.Count))
		},
	}, nil
}
