package redistest

import (
	"errors"
	"testing"

	"github.com/idemgo/idem/internal/testserver"
)

// ErrUnavailable is wrapped by the errors of Launch and LaunchCluster when
// this machine cannot run a Redis server, or a cluster: redis-server, or
// redis-cli, is missing.
var ErrUnavailable = errors.New("redistest: no Redis server available")

// giveUp ends tb for err: a skip when err only says that no server can be
// had here and servers are not required, a failure otherwise.
func giveUp(tb testing.TB, err error) {
	tb.Helper()
	testserver.GiveUp(tb, err, ErrUnavailable, "set TEST_REDIS_URL, or install Redis with scripts/install-test-deps.sh")
}
