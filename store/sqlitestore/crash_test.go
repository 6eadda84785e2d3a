package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/sqlitestore"
)

// The crash test writes records, stops without settling the reservations,
// reopens the database and checks that every record is there and behaves:
// once after closing the *sql.DB, once after killing a child process
// mid-way (SIGKILL: no close, no checkpoint; the records are in the WAL).

const (
	crashChildEnv = "SQLITESTORE_CRASH_CHILD" // the database path
	crashNowEnv   = "SQLITESTORE_CRASH_NOW"   // the clock, Unix milliseconds
	crashBatchEnv = "SQLITESTORE_CRASH_BATCH" // "1": the child's store batches
	crashBurst    = 32                        // records committed at once
	crashNS       = "crash"
	crashWrote    = "crash child: records written"
)

var crashResults = []string{`{"n":0}`, ` [1, 2,  3] `, `"\u00e9t\u00e9"`}

// crashWrite writes the records the crash test checks: committed ones, a
// failed one, and reservations left open (one of them heartbeated).
func crashWrite(s idem.Store, r idem.Request) error {
	ctx := context.Background()
	ns := idem.MustNamespace(crashNS)
	key := func(v string) idem.Key { k, _ := idem.ParseKey(ns, v); return k }
	begin := func(v string) (idem.Lease, error) {
		o, err := s.Begin(ctx, key(v), r, nil)
		if err == nil && o.Kind != idem.Fresh {
			err = fmt.Errorf("Begin(%s) = %s, want fresh", v, o.Kind)
		}
		return o.Lease, err
	}
	for i, res := range crashResults {
		l, err := begin("committed-" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		if err := s.Commit(ctx, key("committed-"+strconv.Itoa(i)), l, []byte(res)); err != nil {
			return err
		}
	}
	l, err := begin("failed")
	if err != nil {
		return err
	}
	if err := s.FailPermanent(ctx, key("failed"), l, idem.StoredError{Class: "c", Message: "m", Cause: "x"}); err != nil {
		return err
	}
	for i := range 3 {
		if _, err := begin("open-" + strconv.Itoa(i)); err != nil {
			return err
		}
	}
	l, err = begin("heartbeated")
	if err != nil {
		return err
	}
	if _, err = s.Heartbeat(ctx, key("heartbeated"), l, time.Minute); err != nil {
		return err
	}
	// A burst of concurrent pairs, which a batching store commits
	// together.
	errs := make(chan error, crashBurst)
	for i := range crashBurst {
		go func() {
			v := "burst-" + strconv.Itoa(i)
			l, err := begin(v)
			if err == nil {
				err = s.Commit(ctx, key(v), l, []byte(strconv.Itoa(i)))
			}
			errs <- err
		}()
	}
	for range crashBurst {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// crashCheck checks, on the reopened database, what crashWrite wrote at
// the time start.
func crashCheck(t *testing.T, db *sql.DB, start time.Time, r idem.Request) {
	t.Helper()
	ctx := context.Background()
	var integrity string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
	clock := idemtest.NewClock()
	clock.Advance(start.Sub(clock.Now()))
	s := newStore(t, db, clock.Now)
	ns := idem.MustNamespace(crashNS)
	for i, res := range crashResults {
		o := mustBegin(t, s, mustKey(t, ns, "committed-"+strconv.Itoa(i)), r, idem.PriorResult)
		if string(o.Result) != res {
			t.Errorf("committed-%d replays %q, want %q", i, o.Result, res)
		}
	}
	o := mustBegin(t, s, mustKey(t, ns, "failed"), r, idem.PriorError)
	if want := (idem.StoredError{Class: "c", Message: "m", Cause: "x"}); o.Error == nil || *o.Error != want {
		t.Errorf("failed replays %+v, want %+v", o.Error, want)
	}
	for i := range 3 {
		k := mustKey(t, ns, "open-"+strconv.Itoa(i))
		if o := mustBegin(t, s, k, r, idem.InFlight); o.RetryAfter != idemtest.Lease {
			t.Errorf("open-%d RetryAfter = %v, want the whole lease %v", i, o.RetryAfter, idemtest.Lease)
		}
		rec, err := s.Get(ctx, k)
		if err != nil || rec.Status != idem.StatusInProgress || rec.Fence != 1 || !rec.LeaseExpiresAt.Equal(start.Add(idemtest.Lease)) {
			t.Errorf("open-%d record = %+v, %v; want in_progress, fence 1, lease until %v", i, rec, err, start.Add(idemtest.Lease))
		}
	}
	for i := range crashBurst {
		o := mustBegin(t, s, mustKey(t, ns, "burst-"+strconv.Itoa(i)), r, idem.PriorResult)
		if string(o.Result) != strconv.Itoa(i) {
			t.Errorf("burst-%d replays %q", i, o.Result)
		}
	}
	hb := mustKey(t, ns, "heartbeated")
	clock.Advance(idemtest.Lease)
	mustBegin(t, s, hb, r, idem.InFlight) // the heartbeat was kept
	o = mustBegin(t, s, mustKey(t, ns, "open-0"), r, idem.Fresh)
	if !o.TakenOver || o.Lease.Fence != 2 {
		t.Errorf("after the lease: %+v, want a takeover with fence 2", o)
	}
	clock.Advance(time.Minute)
	mustBegin(t, s, hb, r, idem.Fresh)
}

func TestCrashSafety(t *testing.T) {
	r := mustRequest(t, `{"op":"charge"}`)
	start := time.UnixMilli(time.Now().UnixMilli()).UTC()
	clock := func() time.Time { return start }

	t.Run("ClosedWithoutSettling", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "idem.db")
		db := openDB(t, path, dsnParams, 4)
		migrate(t, db)
		if err := crashWrite(newStore(t, db, clock), r); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		crashCheck(t, openDB(t, path, dsnParams, 4), start, r)
	})

	for name, batch := range map[string]string{"ProcessKilled": "", "ProcessKilledBatch": "1"} {
		t.Run(name, func(t *testing.T) { crashKill(t, start, r, batch) })
	}
}

// crashKill runs crashChild, with a batching store when batch is "1", and
// checks what it left.
func crashKill(t *testing.T, start time.Time, r idem.Request, batch string) {
	path := filepath.Join(t.TempDir(), "idem.db")
	migrate(t, openDB(t, path, dsnParams, 1))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashNowEnv+"="+strconv.FormatInt(start.UnixMilli(), 10),
		crashBatchEnv+"="+batch)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), crashWrote) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no WAL file after the kill (%v): the test would not exercise recovery", err)
	}
	crashCheck(t, openDB(t, path, dsnParams, 4), start, r)
}

// crashChild is the child process of ProcessKilled: it writes the records
// and kills itself with the database open.
func crashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	ms, err := strconv.ParseInt(os.Getenv(crashNowEnv), 10, 64)
	if err != nil {
		fail(err)
	}
	db, err := sql.Open("sqlite", os.Getenv(crashChildEnv)+dsnParams)
	if err != nil {
		fail(err)
	}
	s, err := sqlitestore.New(db, sqlitestore.Config{
		Retention: idemtest.Retention, Lease: idemtest.Lease,
		Now:   func() time.Time { return time.UnixMilli(ms) },
		Batch: os.Getenv(crashBatchEnv) == "1",
	})
	if err != nil {
		fail(err)
	}
	if err := crashWrite(s, mustRequestOrExit(`{"op":"charge"}`)); err != nil {
		fail(err)
	}
	fmt.Println(crashWrote)
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		fail(err)
	}
	_ = p.Kill()
	select {}
}

func mustRequestOrExit(payload string) idem.Request {
	r, err := idem.NewRequest([]byte(payload))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	return r
}

func TestTxBound(t *testing.T) {
	db, _ := newDB(t, 2)
	migrate(t, db)
	s := newStore(t, db, nil)
	if b, ok := idem.Store(s).(idem.TxBound); ok && b.TxBound() {
		t.Error("the lease-mode Store reports TxBound")
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if b, ok := s.WithTx(tx).(idem.TxBound); !ok || !b.TxBound() {
		t.Error("WithTx store is not TxBound")
	}
}
