package durable

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/idemgo/idem/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
