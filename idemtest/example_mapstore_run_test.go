package idemtest_test

import "testing"

// TestExampleMapStoreConformance runs the conformance test of the example
// store written from idem.Store's contract (ExampleExercise_mapStore), so
// that what the example shows passes the suite.
func TestExampleMapStoreConformance(t *testing.T) { mapStoreConformance(t) }
