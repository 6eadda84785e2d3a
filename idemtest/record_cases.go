package idemtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// testRecordTimes: Get reports when a record was created, until when it
// is kept and, while it is in progress, until when its lease runs; the
// lease's end follows Heartbeat and is zero once the record is settled.
func testRecordTimes(t *testing.T, b *bundle) {
	ctx := context.Background()
	k := b.key(t, "times")
	r := request(t, `{"a":1}`)
	created := b.clock.Now()
	lease := fresh(t, b.store, k, r)
	rec := get(t, b.store, k)
	if !sameTime(rec.CreatedAt, created) || !sameTime(rec.ExpiresAt, created.Add(Retention)) || !sameTime(rec.LeaseExpiresAt, lease.ExpiresAt) {
		t.Errorf("record times = created %v expires %v lease %v, want %v %v %v",
			rec.CreatedAt, rec.ExpiresAt, rec.LeaseExpiresAt, created, created.Add(Retention), lease.ExpiresAt)
	}
	b.clock.Advance(time.Second)
	lease, err := b.store.Heartbeat(ctx, k, lease, time.Minute)
	ok(t, err, "Heartbeat")
	if rec := get(t, b.store, k); !sameTime(rec.LeaseExpiresAt, lease.ExpiresAt) || !sameTime(rec.CreatedAt, created) {
		t.Errorf("after Heartbeat: lease %v created %v, want %v %v", rec.LeaseExpiresAt, rec.CreatedAt, lease.ExpiresAt, created)
	}
	ok(t, b.store.Commit(ctx, k, lease, []byte(`1`)), "Commit")
	if rec := get(t, b.store, k); !rec.LeaseExpiresAt.IsZero() || !sameTime(rec.ExpiresAt, created.Add(Retention)) {
		t.Errorf("after Commit: lease %v expires %v, want no lease and %v", rec.LeaseExpiresAt, rec.ExpiresAt, created.Add(Retention))
	}
}

// testOddKeys: keys at every length limit, and keys made of the characters
// a backend's own syntax uses (separators, escapes, wildcards, hash tags,
// quotes), are stored and found as any other; keys that differ only in
// case, in surrounding spaces or in Unicode normalisation are distinct
// records.
func testOddKeys(t *testing.T, b *bundle) {
	ctx := context.Background()
	r := request(t, `{"a":1}`)
	ns, err := idem.NewNamespace(string(b.ns) + strings.Repeat("-", idem.MaxNamespaceLen-len(b.ns)))
	ok(t, err, "NewNamespace")
	// An sf-string keeps surrounding spaces, but holds ASCII only.
	sf := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	parse := func(ns idem.Namespace, v, scope string) idem.Key {
		t.Helper()
		header := v
		if strings.Trim(v, " ") != v {
			header = `"` + sf.Replace(v) + `"`
		}
		k, err := idem.ParseKey(ns, header)
		ok(t, err, "ParseKey")
		k, err = k.WithScope(scope)
		ok(t, err, "WithScope")
		return k
	}
	longest := strings.Repeat("é", idem.MaxKeyLen/2) + "x"
	keys := []idem.Key{
		parse(ns, longest, strings.Repeat("ß", idem.MaxScopeLen/2)),
		parse(b.ns, longest, ""),
		parse(b.ns, `%25{x}:*?[a-z]\'";--%`, `{}:0:%7B`),
		parse(b.ns, `0:`, `x`),
		parse(b.ns, `x:0:`, ``),
		parse(b.ns, `Key`, ``),
		parse(b.ns, `key`, ``),
		parse(b.ns, ` key `, ``),
		parse(b.ns, "caf\u00e9", ``),
		parse(b.ns, "cafe\u0301", ``),
		parse(b.ns, "key", "Scope"),
		parse(b.ns, "key", "scope"),
	}
	leases := make([]idem.Lease, len(keys))
	for i, k := range keys {
		leases[i] = fresh(t, b.store, k, r)
	}
	for i, k := range keys {
		ok(t, b.store.Commit(ctx, k, leases[i], []byte(strconv.Itoa(i))), "Commit "+k.String())
	}
	for i, k := range keys {
		o := begin(t, b.store, k, r, nil)
		if o.Kind != idem.PriorResult || string(o.Result) != strconv.Itoa(i) {
			t.Errorf("%q replayed %s %s, want its own result %d", k.String(), o.Kind, o.Result, i)
		}
		if rec := get(t, b.store, k); rec.Key != k {
			t.Errorf("Get(%q).Key = %q", k.String(), rec.Key.String())
		}
	}
	n, err := b.store.PurgeExpired(ctx, ns, b.clock.Now().Add(Retention))
	ok(t, err, "PurgeExpired of the longest namespace")
	if n != 1 {
		t.Errorf("PurgeExpired of the longest namespace deleted %d records, want 1", n)
	}
}
