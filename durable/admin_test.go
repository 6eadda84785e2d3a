package durable_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

func TestListStatsLookup(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil) // no engine: instances stay runnable
	a := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{CorrelationKey: "order:1"})
	c := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{Queue: "slow"})
	later := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{ScheduleIn: time.Hour})
	ctx := ctxT(t)

	all, err := b.client.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != a || all[1].ID != c || all[2].ID != later || all[0].CorrelationKey != "order:1" || all[0].FSM != "ctl" {
		t.Fatalf("List = %+v", all)
	}
	slow, err := b.client.List(ctx, &durable.ListOpts{Queue: "slow"})
	if err != nil || len(slow) != 1 || slow[0].ID != c {
		t.Fatalf("List(queue slow) = %+v, %v", slow, err)
	}
	page, err := b.client.List(ctx, &durable.ListOpts{AfterID: a, Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != c {
		t.Fatalf("List(after %d, limit 1) = %+v, %v", a, page, err)
	}
	if _, err := b.client.List(ctx, &durable.ListOpts{Status: "sleeping"}); err == nil {
		t.Error("an unknown status was accepted")
	}
	if _, err := b.client.List(ctx, &durable.ListOpts{Limit: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}

	stats, err := b.client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byQueue := map[string]durable.QueueStats{}
	for _, q := range stats {
		byQueue[q.Queue] = q
	}
	def := byQueue[durable.DefaultQueue]
	if def.Counts[durable.StatusRunnable] != 2 || byQueue["slow"].Counts[durable.StatusRunnable] != 1 {
		t.Fatalf("Stats = %+v", stats)
	}
	if def.OldestRunnable <= 0 || def.OldestRunnable > time.Minute {
		t.Errorf("oldest runnable age %v: want the age of the eligible instance, not of the scheduled one", def.OldestRunnable)
	}

	id, err := b.client.Lookup(ctx, "order:1")
	if err != nil || id != a {
		t.Fatalf("Lookup(order:1) = %d, %v", id, err)
	}
	if _, err := b.client.Lookup(ctx, "order:2"); !errors.Is(err, durable.ErrNoTarget) {
		t.Errorf("Lookup of a free key: %v, want ErrNoTarget", err)
	}
}

// The operators' calls fail as the package's other calls do: with an
// error that begins with "durable: " and names the call, wrapping the
// database's.
func TestAdminErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	// No Migrate: every statement fails, as on a database without the
	// tables.
	c := newClient(t, newPool(t, pgtest.URL(t)), nil, &recorder{})
	ctx := ctxT(t)
	_, errList := c.List(ctx, nil)
	_, errStats := c.Stats(ctx)
	_, errLookup := c.Lookup(ctx, "order:1")
	_, errBuckets := c.RateLimitStats(ctx)
	for call, err := range map[string]error{"List": errList, "Stats": errStats, "Lookup": errLookup, "RateLimitStats": errBuckets} {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42P01" {
			t.Errorf("%s: %v, want the undefined table error (42P01) wrapped", call, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "durable: "+call+": ") {
			t.Errorf("%s: %q does not begin with %q", call, err, "durable: "+call+": ")
		}
	}
}

// List filters that hold text PostgreSQL cannot store (a NUL, invalid
// UTF-8) fail with ErrUnstorable, as Lookup's key does, rather than with
// the database's encoding error: no instance can match them.
func TestListUnstorableFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, bad := range []string{"a\x00b", "a\xffb"} {
		for field, opts := range map[string]*durable.ListOpts{
			"Queue": {Queue: bad}, "FSM": {FSM: bad}, "CorrelationKey": {CorrelationKey: bad},
		} {
			if _, err := b.client.List(ctxT(t), opts); !errors.Is(err, durable.ErrUnstorable) ||
				!strings.Contains(err.Error(), "ListOpts."+field) {
				t.Errorf("List with %s %q: %v, want ErrUnstorable naming ListOpts.%s", field, bad, err, field)
			}
		}
	}
}

// Stats reports an instance runnable since long ago (an EligibleAt
// centuries back, more than a time.Duration holds) as waiting the longest
// Duration, not as none waiting.
func TestStatsOfAnInstanceRunnableForCenturies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.insert(t, ctlFSM(t).With(ctlState{}), &durable.InsertOpts{EligibleAt: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)})
	stats, err := b.client.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].OldestRunnable != time.Duration(math.MaxInt64) {
		t.Fatalf("Stats = %+v, want the default queue's oldest runnable at the longest Duration", stats)
	}
}
