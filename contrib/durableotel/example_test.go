package durableotel_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgo/idem/contrib/durableotel"
	"github.com/idemgo/idem/durable"
)

func Example() {
	// In a program: the MeterProvider of its OpenTelemetry set-up, with a
	// periodic reader and an exporter. Here a ManualReader, to show what
	// is recorded.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	hooks, err := durableotel.Hooks(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The engine calls the hooks: durable.NewClient(pool,
	// &durable.Config{…, Hooks: hooks}). Here, one event by hand.
	_ = durable.Config{Hooks: hooks}
	hooks.StepStop(durable.StepStopEvent{FSM: "order", Step: "charge", Kind: durable.KindNext, Duration: 15 * time.Millisecond})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				fmt.Println(m.Name, p.Count, p.Sum, p.Attributes.Encoded(attribute.DefaultEncoder()))
			}
		}
	}
	// Output:
	// durable.step.duration 1 0.015 durable.commit=committed,durable.fsm=order,durable.outcome=next,durable.step=charge,durable.step.error=false
}
