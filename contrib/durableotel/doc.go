// Package durableotel records the telemetry events of the durable engine
// (github.com/idemgo/idem/durable) as OpenTelemetry metrics: Hooks turns a
// metric.MeterProvider into durable.Hooks, to be set as durable.Config.Hooks.
// Use it when the program already exports OpenTelemetry metrics; otherwise
// set durable.Hooks to functions of your own.
//
//	hooks, err := durableotel.Hooks(otel.GetMeterProvider()) // or the SDK's *sdkmetric.MeterProvider
//	if err != nil { … }
//	client, err := durable.NewClient(pool, &durable.Config{…, Hooks: hooks})
//
// The global provider of otel.GetMeterProvider may be passed before the
// program installs its SDK with otel.SetMeterProvider: the instruments made
// from it forward to the SDK's from then on.
//
// Each event of steps, picks, drains, the reaper and the collector becomes
// a measurement: step durations in a histogram with the FSM, step, outcome
// kind and commit fate as attributes; claims, drains, reaped leases and
// collected rows in counters; a queue's load at each poll in gauges. Hooks
// documents each instrument. The step-duration histogram has explicit
// buckets from 1 ms to 10 s; a View of the MeterProvider changes them. The
// hooks only record: export is the MeterProvider's business (a periodic
// reader, a Prometheus exporter), off the engine's goroutines.
//
// Hooks fills the fields of durable.Hooks it records and leaves the others
// nil. To watch an event as well (a log line for fenced steps, say), set a
// nil field, or wrap a filled one in a function that calls it and then your
// own; the example of Hooks does both. The engine calls every hook
// synchronously, so what is added must return quickly too.
//
// The only error is Hooks' own: a nil MeterProvider, or an instrument the
// provider failed to create.
//
// This package is a module of its own, so that OpenTelemetry is a
// dependency only of programs that use it.
package durableotel
