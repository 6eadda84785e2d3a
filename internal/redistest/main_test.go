package redistest_test

import (
	"testing"

	"github.com/idemgo/idem/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Wrap(m))
}
