package pgtest

import (
	"errors"
	"os"
	"testing"
)

// ErrUnavailable is wrapped by the errors of Launch when this machine cannot
// run a PostgreSQL server: the binaries are missing, or the process is root
// and there is no unprivileged user to run the server as.
var ErrUnavailable = errors.New("pgtest: no PostgreSQL server available")

// required reports whether a missing server fails a test rather than skips it.
func required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("IDEM_REQUIRE_SERVERS") == "1"
}

// giveUp ends tb for err: a skip when err only says that no server can be
// had here and servers are not required, a failure otherwise.
func giveUp(tb testing.TB, err error) {
	tb.Helper()
	switch {
	case !errors.Is(err, ErrUnavailable):
		tb.Fatal(err)
	case required():
		tb.Fatalf("%v; servers are required here (CI=true or IDEM_REQUIRE_SERVERS=1): set TEST_DATABASE_URL, or install PostgreSQL with scripts/install-test-deps.sh", err)
	default:
		tb.Skipf("%v (set TEST_DATABASE_URL, or install PostgreSQL with scripts/install-test-deps.sh)", err)
	}
}
