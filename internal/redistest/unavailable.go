package redistest

import (
	"errors"
	"os"
	"testing"
)

// ErrUnavailable is wrapped by the errors of Launch and LaunchCluster when
// this machine cannot run a Redis server, or a cluster: redis-server, or
// redis-cli, is missing.
var ErrUnavailable = errors.New("redistest: no Redis server available")

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
		tb.Fatalf("%v; servers are required here (CI=true or IDEM_REQUIRE_SERVERS=1): set TEST_REDIS_URL, or install Redis with scripts/install-test-deps.sh", err)
	default:
		tb.Skipf("%v (set TEST_REDIS_URL, or install Redis with scripts/install-test-deps.sh)", err)
	}
}
