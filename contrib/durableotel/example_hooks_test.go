package durableotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgo/idem/contrib/durableotel"
	"github.com/idemgo/idem/durable"
)

// The hooks of durableotel can be combined with the program's own: wrap a
// hook Hooks filled to call both, and set one it left nil.
func ExampleHooks() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	hooks, err := durableotel.Hooks(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output for the example
			}
			return a
		},
	}))
	record := hooks.StepStop
	hooks.StepStop = func(ev durable.StepStopEvent) {
		record(ev) // the metrics
		if ev.Fenced {
			logger.Warn("step outcome fenced off", "fsm", ev.FSM, "step", ev.Step, "id", ev.ID)
		}
	}
	hooks.RateLimitThrottled = func(ev durable.RateLimitThrottledEvent) { // left nil by Hooks
		logger.Info("rate limit biting", "bucket", ev.Key, "wanted", ev.Wanted, "granted", ev.Granted)
	}
	cfg := durable.Config{Hooks: hooks} // with the pool: durable.NewClient(pool, &cfg)

	// The engine calls the hooks; here, by hand.
	cfg.Hooks.StepStop(durable.StepStopEvent{ID: 7, FSM: "order", Step: "charge", Kind: durable.KindNext, Fenced: true, Duration: time.Second})
	cfg.Hooks.RateLimitThrottled(durable.RateLimitThrottledEvent{Key: "mail:42", Wanted: 10, Granted: 4})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				fmt.Println(m.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// level=WARN msg="step outcome fenced off" fsm=order step=charge id=7
	// level=INFO msg="rate limit biting" bucket=mail:42 wanted=10 granted=4
	// durable.step.fenced 1
}
