package idem_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: Do,
// Owner and the keeper start heartbeats that must end with their runs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
