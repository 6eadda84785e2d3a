package durable_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/pgtest"
)

// TestStartRefusesASchemaWithoutItsTables checks that Start on a schema
// Migrate has not prepared, or on a pool whose search_path names no
// schema that exists, fails with an error saying so, rather than starting
// an engine whose pickers and timer log a failed query at every poll.
func TestStartRefusesASchemaWithoutItsTables(t *testing.T) {
	t.Parallel()
	empty := pgtest.URL(t) // a fresh schema, not migrated
	c := newClient(t, newPool(t, empty), fast(ctlFSM(t)), &recorder{})
	err := c.Start(ctxT(t))
	if err == nil {
		t.Cleanup(func() { _ = c.Stop(ctxT(t)) })
		t.Fatal("Start on a schema without the engine's tables succeeded")
	}
	if !strings.Contains(err.Error(), "Migrate") {
		t.Errorf("Start on an unmigrated schema: %v; want it to say to run Migrate", err)
	}
	select {
	case <-c.Stopped():
	default:
		t.Error("Stopped is not closed after a Start that failed")
	}

	u, err := url.Parse(empty)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "no_such_schema_"+strings.TrimPrefix(q.Get("search_path"), "pgtest_"))
	u.RawQuery = q.Encode()
	c = newClient(t, newPool(t, u.String()), fast(ctlFSM(t)), &recorder{})
	err = c.Start(ctxT(t))
	if err == nil {
		t.Cleanup(func() { _ = c.Stop(ctxT(t)) })
		t.Fatal("Start on a search_path naming no schema succeeded")
	}
	if !strings.Contains(err.Error(), "search_path") {
		t.Errorf("Start on a search_path naming no schema: %v; want it to name the search_path", err)
	}
}
