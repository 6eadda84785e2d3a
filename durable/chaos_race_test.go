//go:build race

package durable_test

// chaosRace reports whether the race detector is on: the chaos test then
// builds its worker with it too.
const chaosRace = true
