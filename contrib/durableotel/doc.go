// Package durableotel records the telemetry events of the durable engine
// (github.com/idemgo/idem/durable) as OpenTelemetry metrics: Hooks turns a
// metric.MeterProvider into durable.Hooks, to be set as durable.Config.Hooks.
//
//	hooks, err := durableotel.Hooks(meterProvider)
//	if err != nil { … }
//	client, err := durable.NewClient(pool, &durable.Config{…, Hooks: hooks})
//
// Each event of steps, picks, drains, the reaper and the collector becomes
// a measurement: step durations in a histogram with the FSM, step, outcome
// kind and commit fate as attributes; claims, drains, reaped leases and
// collected rows in counters; a queue's load at each poll in gauges. Hooks
// documents each instrument. The hooks only record: export is the
// MeterProvider's business (a periodic reader, a Prometheus exporter), off
// the engine's goroutines.
//
// This package is a module of its own, so that OpenTelemetry is a
// dependency only of programs that use it.
package durableotel
