package durable

import (
	"testing"
	"time"
)

// TestNextDueAfterAShortClaim pins nextDueSQL, which follows a claim of
// claimFreeSQL that locked fewer rows than it asked for: a row scheduled
// for later is reported by how long until it is eligible; a row that
// became eligible after the claim's now() but before the lookup is
// reported as due at once (becameDue), so that the picker claims again;
// and a row already eligible at the claim's now(), which the claim passed
// over, is not counted, so that the picker does not come back for it.
func TestNextDueAfterAShortClaim(t *testing.T) {
	t.Parallel()
	cs := newClaimSetup(t, &Config{})
	var dbNow time.Time
	if err := cs.pool.QueryRow(cs.ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	id, err := cs.c.Insert(cs.ctx, cs.fsm.With(struct{}{}), &InsertOpts{EligibleAt: dbNow.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	// Eligible before the claim: passed over, not counted.
	if d, became, err := nextDue(cs.ctx, cs.pool, DefaultQueue, dbNow); err != nil || d != 0 || became {
		t.Fatalf("a row eligible at the claim: nextDue %v, becameDue %v, err %v; want 0, false", d, became, err)
	}
	// Eligible after the claim's now(), before the lookup's: claim again.
	if d, became, err := nextDue(cs.ctx, cs.pool, DefaultQueue, dbNow.Add(-time.Hour)); err != nil || d != 0 || !became {
		t.Fatalf("a row that became eligible since the claim: nextDue %v, becameDue %v, err %v; want 0, true", d, became, err)
	}
	// Scheduled for later: how long until then.
	if _, err := cs.pool.Exec(cs.ctx, "UPDATE durable_instance SET eligible_at = now() + interval '1 hour' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	d, became, err := nextDue(cs.ctx, cs.pool, DefaultQueue, dbNow)
	if err != nil || became || d <= 59*time.Minute || d > time.Hour {
		t.Fatalf("a row scheduled in an hour: nextDue %v, becameDue %v, err %v; want about an hour", d, became, err)
	}
}
