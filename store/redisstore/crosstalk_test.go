package redisstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/redistest"
	"github.com/idemgo/idem/store/redisstore"
)

// TestAutoPipelineAnswersEachCallerItsOwn: a thousand callers at once
// through an auto-pipelined store each get their own answers
// (idemtest.Crowd); a caller whose payload is too large fails alone; and a
// caller whose deadline ended first leaves its key free soon after (what
// it reserved is released).
func TestAutoPipelineAnswersEachCallerItsOwn(t *testing.T) {
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Config{Lease: time.Hour, MaxPayload: 1 << 12, AutoPipeline: true})
	if err != nil {
		t.Fatal(err)
	}
	idemtest.Crowd(t, s, idemtest.CrowdOpts{
		Refuse: func(i int) idem.Request {
			return mustRequest(t, fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 1<<12)))
		},
		Refused: func(err error) bool {
			_, ok := errors.AsType[*idem.PayloadTooLargeError](err)
			return ok
		},
		Leave: true,
	})
}
