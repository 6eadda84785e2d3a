package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/idemgo/idem/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Wrap(m))
}
