package pgtest_test

import (
	"testing"

	"github.com/idemgo/idem/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
