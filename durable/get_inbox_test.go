package durable_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/durable"
)

// Get returns a bounded head of a huge inbox (100,000 unconsumed signals),
// oldest first, and counts them all in InboxLen, rather than loading the
// whole inbox into memory.
func TestGetBoundsAHugeInbox(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	id := b.insert(t, ctl.With(ctlState{}), &durable.InsertOpts{})
	const n = 100_000
	b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload)
		SELECT $1, 'noise', to_jsonb(k) FROM generate_series(1, $2::int) k`, id, n)

	in := b.get(t, id)
	if len(in.Inbox) != durable.GetInboxLimit || in.InboxLen != n {
		t.Fatalf("Get returned %d signals of the inbox and InboxLen %d, want %d and %d",
			len(in.Inbox), in.InboxLen, durable.GetInboxLimit, n)
	}
	for i, s := range in.Inbox {
		if want := fmt.Sprint(i + 1); string(s.Payload) != want || (i > 0 && s.ID <= in.Inbox[i-1].ID) {
			t.Fatalf("signal %d of the head has payload %s (id %d), want the oldest first (payload %s)", i, s.Payload, s.ID, want)
		}
	}
}

// Get returns no more payload than GetInboxBytes of an inbox of large
// signals, except that the oldest is returned whatever its size; InboxLen
// counts every signal.
func TestGetBoundsTheInboxPayloadBytes(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for name, tc := range map[string]struct {
		first int // the JSON size of the oldest signal's payload
		want  int // how many signals Get returns
	}{
		"Even":           {first: mib + 2, want: durable.GetInboxBytes / (mib + 2)},
		"OldestTooLarge": {first: durable.GetInboxBytes + mib + 2, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
			// Payloads of a JSON string: its characters and two quotes.
			b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload) VALUES ($1, 'big', to_jsonb(repeat('a', $2::int)))`,
				id, tc.first-2)
			const n = 40
			b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload)
				SELECT $1, 'big', to_jsonb(repeat('a', $2::int)) FROM generate_series(2, $3::int)`, id, mib, n)

			in := b.get(t, id)
			total := 0
			for _, s := range in.Inbox {
				total += len(s.Payload)
			}
			if len(in.Inbox) != tc.want || in.InboxLen != n || len(in.Inbox[0].Payload) != tc.first {
				t.Fatalf("Get returned %d signals (%d bytes of payload) and InboxLen %d; want %d, the first of %d bytes, and %d",
					len(in.Inbox), total, in.InboxLen, tc.want, tc.first, n)
			}
		})
	}
}

// Get of an instance with an empty inbox returns an empty, non-nil Inbox
// and InboxLen 0, as it did before the inbox was bounded.
func TestGetEmptyInbox(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.insert(t, ctlFSM(t).With(ctlState{}), nil)
	if in := b.get(t, id); in.Inbox == nil || len(in.Inbox) != 0 || in.InboxLen != 0 {
		t.Fatalf("Get of an empty inbox: Inbox %#v, InboxLen %d; want an empty slice and 0", in.Inbox, in.InboxLen)
	}
}

// Get reads the head of a small inbox through the index of its instance's
// signals, even under a generic plan, which PostgreSQL may take for a
// prepared statement after a few runs and which estimates every instance
// to hold the average inbox (here 5,000 signals): walking the signals in
// id order instead, looking for the instance's first GetInboxLimit, would
// read the whole table for an instance with few.
func TestGetInboxHeadPlanUsesTheInstanceIndex(t *testing.T) {
	t.Parallel()
	ctl := ctlFSM(t)
	b := setup(t, nil)
	for range 20 {
		id := b.insert(t, ctl.With(ctlState{}), nil)
		b.exec(t, `INSERT INTO durable_signal (instance_id, name, payload)
			SELECT $1, 'noise', to_jsonb(k) FROM generate_series(1, 5000) k`, id)
	}
	small := b.insert(t, ctl.With(ctlState{}), nil)
	b.signal(t, durable.ByID(small), "go", 1, "")
	b.exec(t, `ANALYZE durable_signal`)

	ctx := ctxT(t)
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE head(bigint, bigint, bigint) AS ` + durable.InboxHeadSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE head; RESET plan_cache_mode`) }()
	rows, err := conn.Query(ctx, fmt.Sprintf(`EXPLAIN EXECUTE head(%d, %d, %d)`, small, durable.GetInboxLimit, durable.GetInboxBytes))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "durable_signal_pkey") || !strings.Contains(text, "durable_signal_instance_idx") {
		t.Fatalf("the generic plan of Get's inbox head does not read the instance's signals through their index:\n%s", text)
	}
}
