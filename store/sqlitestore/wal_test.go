package sqlitestore_test

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// walRestarts is the checkpoint sequence number in the header of the WAL
// file at path: SQLite increments it each time it starts the log over from
// its beginning, after a checkpoint copied all of it into the database.
func walRestarts(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var h [32]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(h[12:])
}

// TestWALCutBackAfterALargeTransaction: with the parameters the package
// documentation recommends, a -wal file that one large transaction grew
// past 16 MiB (a batch of large results) is cut back to 16 MiB at most
// once SQLite's automatic checkpoint has let the log start over, instead
// of keeping its largest size for as long as the database is open.
func TestWALCutBackAfterALargeTransaction(t *testing.T) {
	db, path := newDB(t, 1)
	wal := path + "-wal"
	s := newStore(t, db, nil)
	ctx := context.Background()
	ns := idem.MustNamespace("wal")
	r := mustRequest(t, `{}`)
	large := []byte(`"` + strings.Repeat("r", 60000) + `"`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := s.WithTx(tx)
	for i := range 400 { // some 24 MB of results
		k := mustKey(t, ns, "large-"+strconv.Itoa(i))
		o, err := ts.Begin(ctx, k, r, nil)
		if err == nil {
			err = ts.Commit(ctx, k, o.Lease, large)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	const limit = 16 << 20
	fi, err := os.Stat(wal)
	if err != nil || fi.Size() <= limit {
		t.Fatalf("after the large transaction the -wal file is %v bytes (%v): the test needs more than %d", fi.Size(), err, limit)
	}
	start := walRestarts(t, wal)
	for i := 0; walRestarts(t, wal) == start; i++ {
		if i == 100 {
			t.Fatal("the log did not start over in 100 small transactions")
		}
		k := mustKey(t, ns, "small-"+strconv.Itoa(i))
		o := mustBegin(t, s, k, r, idem.Fresh)
		if err := s.Commit(ctx, k, o.Lease, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(wal); err != nil || fi.Size() > limit {
		t.Errorf("the log started over, and the -wal file is %d bytes (%v), want at most %d", fi.Size(), err, limit)
	}
}
