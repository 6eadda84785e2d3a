package sqlitestore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // never returns: the process kills itself
	}
	if os.Getenv(raceChildEnv) != "" {
		raceChild() // never returns
	}
	goleak.VerifyTestMain(m)
}
