package sqlitestore_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/store/sqlitestore"
)

// Two processes sharing one database file (two idem proxies on the same
// sqlite:PATH): their goroutines race Begin and Commit on the same keys at
// the same time. Exactly one caller in either process gets Fresh for each
// key, every other caller gets InFlight or the winner's result, and no
// call fails: the write lock is waited for (busy_timeout), not reported.

const (
	raceChildEnv = "SQLITESTORE_RACE_CHILD" // the database path
	raceBatchEnv = "SQLITESTORE_RACE_BATCH" // "1": the stores batch
	raceKeys     = 300
	raceWorkers  = 8 // goroutines per process
	raceNS       = "race"
	// raceDSNParams are dsnParams with a busy timeout of a minute: this is
	// a test of who wins, not of how long the loser waits. A batched
	// process retakes the write lock as soon as it commits, while the
	// other polls for it (see the package doc), and on a loaded machine
	// a Begin waited over 5 s.
	raceDSNParams = "?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_pragma=journal_size_limit(16777216)&_txlock=immediate"
)

// raceRun runs the workload of one process, named name, on the database at
// path, and writes what its callers saw to out, a line each:
// "fresh KEY RESULT", "prior KEY RESULT" or "error TEXT". InFlight answers
// are not written.
func raceRun(name, path string, batch bool, out io.Writer) error {
	db, err := sql.Open("sqlite", path+raceDSNParams)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // as idem proxy does
	s, err := sqlitestore.New(db, sqlitestore.Config{Retention: idemtest.Retention, Lease: idemtest.Lease, Batch: batch})
	if err != nil {
		return err
	}
	r, err := idem.NewRequest([]byte(`{"op":"race"}`))
	if err != nil {
		return err
	}
	ns := idem.MustNamespace(raceNS)
	ctx := context.Background()
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	var slowest atomic.Int64
	var wg sync.WaitGroup
	for g := range raceWorkers {
		wg.Go(func() {
			for i := range raceKeys {
				v := "k" + strconv.Itoa(i)
				k, err := idem.ParseKey(ns, v)
				if err != nil {
					report("error %v", err)
					return
				}
				start := time.Now()
				o, err := s.Begin(ctx, k, r, nil)
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d) // racy maximum, good enough for a log line
				}
				switch {
				case err != nil:
					report("error Begin(%s): %v", v, err)
				case o.Kind == idem.Fresh:
					res := strconv.Quote(name + "-" + strconv.Itoa(g))
					if err := s.Commit(ctx, k, o.Lease, []byte(res)); err != nil {
						report("error Commit(%s): %v", v, err)
					} else {
						report("fresh %s %s", v, res)
					}
				case o.Kind == idem.PriorResult:
					report("prior %s %s", v, o.Result)
				case o.Kind != idem.InFlight:
					report("error Begin(%s) = %s", v, o.Kind)
				}
			}
		})
	}
	wg.Wait()
	report("slowest %s Begin took %v", name, time.Duration(slowest.Load()))
	return nil
}

// raceChild is the other process: it opens the database, says so, waits
// for the word on stdin, runs the workload and exits.
func raceChild() {
	path := os.Getenv(raceChildEnv)
	db, err := sql.Open("sqlite", path+raceDSNParams)
	if err == nil {
		err = db.Ping() // the file is open before the race starts
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	if err := raceRun("child", path, os.Getenv(raceBatchEnv) == "1", w); err != nil {
		fmt.Fprintln(w, "error", err)
	}
	_ = w.Flush()
	_ = db.Close()
	os.Exit(0)
}

func TestTwoProcessesRaceOnOneFile(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("Batch=", batch), func(t *testing.T) {
			db, path := newDB(t, 1)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), raceChildEnv+"="+path, raceBatchEnv+"="+map[bool]string{true: "1"}[batch])
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			childOut := bufio.NewReader(stdout)
			if line, err := childOut.ReadString('\n'); line != "ready\n" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child: %q, %v", line, err)
			}
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			var parentOut strings.Builder
			parentErr := raceRun("parent", path, batch, &parentOut)
			rest, readErr := io.ReadAll(childOut)
			if err := cmd.Wait(); err != nil || readErr != nil {
				t.Fatalf("child: %v, %v\n%s", err, readErr, rest)
			}
			if parentErr != nil {
				t.Fatal(parentErr)
			}

			fresh := map[string][]string{} // key: the results of the callers that got Fresh
			prior := map[string][]string{}
			wins := map[string]int{}
			for _, line := range strings.Split(parentOut.String()+string(rest), "\n") {
				f := strings.SplitN(line, " ", 3)
				switch {
				case line == "":
				case f[0] == "fresh" && len(f) == 3:
					fresh[f[1]] = append(fresh[f[1]], f[2])
					wins[strings.Trim(strings.SplitN(f[2], "-", 2)[0], `"`)]++
				case f[0] == "slowest":
					t.Log(line)
				case f[0] == "prior" && len(f) == 3:
					prior[f[1]] = append(prior[f[1]], f[2])
				default:
					t.Errorf("%s", line)
				}
			}
			t.Logf("keys won: %v", wins)
			s := newStore(t, db, nil)
			for i := range raceKeys {
				v := "k" + strconv.Itoa(i)
				if len(fresh[v]) != 1 {
					t.Errorf("%s: %d callers got Fresh (%v), want exactly one", v, len(fresh[v]), fresh[v])
					continue
				}
				want := fresh[v][0]
				for _, got := range prior[v] {
					if got != want {
						t.Errorf("%s: a caller replayed %s, the winner committed %s", v, got, want)
					}
				}
				rec, err := s.Get(context.Background(), mustKey(t, idem.MustNamespace(raceNS), v))
				if err != nil || rec.Status != idem.StatusCommitted || string(rec.Result) != want || rec.Fence != 1 {
					t.Errorf("%s: record %+v, %v; want committed by %s with fence 1", v, rec, err, want)
				}
			}
		})
	}
}
