package pgtest

import (
	"errors"
	"testing"

	"github.com/idemgo/idem/internal/testserver"
)

// ErrUnavailable is wrapped by the errors of Launch when this machine cannot
// run a PostgreSQL server: the binaries are missing, or the process is root
// and there is no unprivileged user to run the server as.
var ErrUnavailable = errors.New("pgtest: no PostgreSQL server available")

// giveUp ends tb for err: a skip when err only says that no server can be
// had here and servers are not required, a failure otherwise.
func giveUp(tb testing.TB, err error) {
	tb.Helper()
	testserver.GiveUp(tb, err, ErrUnavailable, "set TEST_DATABASE_URL, or install PostgreSQL with scripts/install-test-deps.sh")
}
