package idemtest_test

import "testing"

// TestExampleConformance runs the conformance test of the example of
// Exercise, so that the example a store's author copies passes the suite.
func TestExampleConformance(t *testing.T) { conformance(t) }
