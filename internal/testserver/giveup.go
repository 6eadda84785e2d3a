package testserver

import (
	"errors"
	"os"
	"testing"
)

// Required reports whether a missing server fails a test rather than skips
// it: under CI=true or TEST_REQUIRE_SERVERS=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("TEST_REQUIRE_SERVERS") == "1"
}

// GiveUp ends tb for err: a skip when err only says that no server can be
// had here (errors.Is(err, unavailable)) and servers are not Required, a
// failure otherwise. hint tells the reader how to get a server.
func GiveUp(tb testing.TB, err, unavailable error, hint string) {
	tb.Helper()
	switch {
	case !errors.Is(err, unavailable):
		tb.Fatal(err)
	case Required():
		tb.Fatalf("%v; servers are required here (CI=true or TEST_REQUIRE_SERVERS=1): %s", err, hint)
	default:
		tb.Skipf("%v (%s)", err, hint)
	}
}
