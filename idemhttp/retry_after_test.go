package idemhttp_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// inFlightStore answers InFlight with the RetryAfter it holds, whatever
// the key, as a store of one's own may: 0 (it does not know) or a lease
// held for good.
type inFlightStore struct {
	*memstore.Store
	retryAfter time.Duration
}

func (s inFlightStore) Begin(context.Context, idem.Key, idem.Request, *idem.BeginOpts) (idem.Outcome, error) {
	return idem.Outcome{Kind: idem.InFlight, RetryAfter: s.retryAfter}, nil
}

// A 409 for a request in progress always has a Retry-After of at least a
// second, as the package doc promises, and one that says how long the
// store answered, however long that is.
func TestInProgressAlwaysHasRetryAfter(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	for _, tc := range []struct {
		retryAfter time.Duration
		want       int
	}{
		{0, 1},
		{-time.Second, 1},
		{1500 * time.Millisecond, 2},
		{math.MaxInt64, int(math.MaxInt64/time.Second) + 1},
	} {
		b := setup(t, idemhttp.Config{Store: inFlightStore{s, tc.retryAfter}})
		w := b.do(t, "POST", "/x", `{}`, key("busy"))
		wantProblem(t, w, 409, idemhttp.ProblemInProgress)
		if got := w.Header().Get("Retry-After"); got != strconv.Itoa(tc.want) {
			t.Errorf("store's RetryAfter %v: Retry-After %q, want %d", tc.retryAfter, got, tc.want)
		}
	}
	w := httptest.NewRecorder()
	idemhttp.WriteProblem(w, nil, &idemhttp.Problem{Status: 503, RetryAfter: math.MaxInt64})
	if got, want := w.Header().Get("Retry-After"), strconv.Itoa(int(math.MaxInt64/time.Second)+1); got != want {
		t.Errorf("WriteProblem with the longest RetryAfter: Retry-After %q, want %s", got, want)
	}
}
