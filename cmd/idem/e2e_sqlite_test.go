package main_test

// End-to-end tests of idem proxy on its default, embedded store, SQLite,
// as a user runs it: several proxies on one database file, a proxy killed
// under load and started again on the same file, the WAL under steady
// load, a purge of a big table while requests flow, and the forms of the
// sqlite: DSN.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/sqlitestore"
)

// sqlitePost sends one protected request and returns its status, body and
// whether it was a replay; err is a transport error (the proxy died, the
// connection was cut). It is safe to call from any goroutine.
func sqlitePost(client *http.Client, base, key, body string) (status int, text string, replayed bool, err error) {
	req, err := http.NewRequest(http.MethodPost, base+"/charges", strings.NewReader(body))
	if err != nil {
		return 0, "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return 0, "", false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, "", false, err
	}
	return res.StatusCode, string(b), res.Header.Get("Idempotent-Replayed") == "true", nil
}

// TestSeveralProxiesOneSQLite: three idem proxies on one SQLite file (two
// batching their store calls, one not), clients sending each key to all
// of them at once and retrying on 409: the upstream runs each key once in
// total, every client gets that run's response, and no request fails
// with 503 (the write lock is waited for, under busy_timeout, not
// reported). Afterwards every key replays through every proxy: none is
// left in flight.
func TestSeveralProxiesOneSQLite(t *testing.T) {
	up := newCounting(t)
	dsn := sqliteDSN(t)
	var proxies []*proxy
	for _, batch := range []string{"true", "false", "true"} {
		proxies = append(proxies, startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--batch-store-calls="+batch))
	}
	const keys, perKey = 60, 6
	var unavailable, conflicts atomic.Int64
	bodies := make([][]string, keys)
	var wg sync.WaitGroup
	for k := range keys {
		bodies[k] = make([]string, perKey)
		for j := range perKey {
			wg.Go(func() {
				key := fmt.Sprintf("multi-%d", k)
				deadline := time.Now().Add(30 * time.Second)
				for attempt := 0; ; attempt++ {
					status, body, _, err := sqlitePost(http.DefaultClient, proxies[(j+attempt)%len(proxies)].base, key, `{"amount":1}`)
					switch {
					case err != nil:
						t.Errorf("%s: %v", key, err)
						return
					case status == http.StatusConflict:
						conflicts.Add(1)
					case status == http.StatusServiceUnavailable:
						unavailable.Add(1)
						t.Errorf("%s: 503 %s", key, body)
					case status != http.StatusCreated:
						t.Errorf("%s: %d %s", key, status, body)
						return
					default:
						bodies[k][j] = body
						return
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: no answer but 409 or 503 in 30 s", key)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d answers 409, %d answers 503", conflicts.Load(), unavailable.Load())
	for k := range keys {
		key := fmt.Sprintf("multi-%d", k)
		if n := up.runs(key); n != 1 {
			t.Errorf("%s ran %d times across three proxies on one SQLite file", key, n)
		}
		for j, b := range bodies[k] {
			if b != bodies[k][0] {
				t.Errorf("%s: client %d got %q, client 0 %q", key, j, b, bodies[k][0])
			}
		}
	}
	for k := range keys {
		key := fmt.Sprintf("multi-%d", k)
		for i, p := range proxies {
			status, body, replayed, err := sqlitePost(http.DefaultClient, p.base, key, `{"amount":1}`)
			if err != nil || status != http.StatusCreated || !replayed || body != bodies[k][0] {
				t.Errorf("%s through proxy %d afterwards: %d %q replayed=%v %v; want the recorded 201", key, i, status, body, replayed, err)
			}
		}
	}
}

// sqliteAnswer is what a client of TestSQLiteProxyKilledUnderLoad saw for
// a key before the kill: a response, or a transport error.
type sqliteAnswer struct {
	status int
	body   string
	err    error
}

// TestSQLiteProxyKilledUnderLoad: two proxies share a SQLite file, and one
// of them is SIGKILLed while sixteen clients send both new keys as fast as
// they answer (so that some requests of the killed one are between the
// upstream's answer and their commit, or mid-commit). The other proxy
// goes on: a key whose client got a 2xx before the kill replays that
// response and never runs again; a key whose client got no answer is
// answered once its lease has lapsed (it was recorded, or it is taken over
// and run again), none stays in flight. Then the surviving proxy is killed
// too, and a new one opens the file, recovering the WAL they left: the
// database passes SQLite's integrity check and every key replays what its
// last client got.
func TestSQLiteProxyKilledUnderLoad(t *testing.T) {
	up := newCounting(t)
	dsn := sqliteDSN(t)
	path := strings.TrimPrefix(dsn, "sqlite:")
	const lease = 2 * time.Second
	args := []string{"--upstream", up.srv.URL, "--store", dsn, "--lease", lease.String()}
	a := startProxy(t, args...)
	b := startProxy(t, append(args, "--batch-store-calls=false")...)

	const workers, killAfter = 16, 300
	var (
		mu       sync.Mutex
		answers  = map[string]sqliteAnswer{}
		answered atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 20 * time.Second}
	for w := range workers {
		base := []string{a.base, b.base}[w%2]
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("kill-%d-%d", w, i)
				status, body, _, err := sqlitePost(client, base, key, `{"amount":1}`)
				mu.Lock()
				answers[key] = sqliteAnswer{status, body, err}
				mu.Unlock()
				if err != nil {
					return
				}
				answered.Add(1)
			}
		})
	}
	for deadline := time.Now().Add(30 * time.Second); answered.Load() < killAfter; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests answered in 30 s", answered.Load())
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.wait()
	stop.Store(true)
	wg.Wait()

	final := map[string]string{}
	lost := 0
	for key, before := range answers {
		if before.err == nil && before.status != http.StatusCreated {
			t.Errorf("%s: %d %s before the kill", key, before.status, before.body)
			continue
		}
		if before.err != nil {
			lost++
		}
		wg.Go(func() {
			deadline := time.Now().Add(lease + 10*time.Second)
			for {
				status, body, replayed, err := sqlitePost(client, b.base, key, `{"amount":1}`)
				switch {
				case err == nil && status == http.StatusConflict && time.Now().Before(deadline):
					time.Sleep(50 * time.Millisecond)
					continue
				case err != nil || status != http.StatusCreated:
					t.Errorf("%s after the kill: %d %q %v", key, status, body, err)
				case before.err == nil && (!replayed || body != before.body):
					t.Errorf("%s: the client got %q before the kill, and its retry got %q (replayed %v)", key, before.body, body, replayed)
				default:
					mu.Lock()
					final[key] = body
					mu.Unlock()
				}
				return
			}
		})
	}
	wg.Wait()
	t.Logf("%d keys sent before the kill, %d of them without an answer", len(answers), lost)

	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.wait()
	c := startProxy(t, args...)
	if res := sqliteIntegrity(t, path); res != "ok" {
		t.Fatalf("integrity_check after the kills: %s", res)
	}
	for key, body := range final {
		wg.Go(func() {
			status, got, replayed, err := sqlitePost(client, c.base, key, `{"amount":1}`)
			if err != nil || status != http.StatusCreated || !replayed || got != body {
				t.Errorf("%s after both kills: %d %q replayed=%v %v; want the replay of %q", key, status, got, replayed, err, body)
			}
		})
	}
	wg.Wait()
	// Killed rather than stopped: a race-enabled proxy's last checkpoint,
	// as it closes the database, takes seconds, and is not under test.
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for key, before := range answers {
		n := up.runs(key)
		switch {
		case before.err == nil && n != 1:
			t.Errorf("%s: answered before the kill, ran %d times", key, n)
		case n < 1 || n > 2:
			t.Errorf("%s: cut by the kill, ran %d times", key, n)
		}
	}
}

// sqliteIntegrity runs SQLite's integrity check on the database at path,
// which a proxy may be using, and returns its verdict ("ok").
func sqliteIntegrity(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// sqliteWALCheckpoints is the checkpoint sequence number in the header of
// the WAL file at path, which SQLite increments each time it starts the
// log over from its beginning, having copied every page of it into the
// database (a checkpoint). ok is false while there is no valid header.
func sqliteWALCheckpoints(path string) (seq uint32, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var h [32]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, false
	}
	if magic := binary.BigEndian.Uint32(h[0:]); magic != 0x377f0682 && magic != 0x377f0683 {
		return 0, false
	}
	return binary.BigEndian.Uint32(h[12:]), true
}

// TestSQLiteWALCheckpointed: under steady load on two proxies sharing one
// SQLite file, the WAL is checkpointed and started over again and again
// (SQLite's automatic checkpoint, every 1000 pages), and the -wal file
// stays below 6 MB, though the load writes more than that to it.
func TestSQLiteWALCheckpointed(t *testing.T) {
	up := newCounting(t)
	up.size = 3000 // a record of a few kB: the log fills sooner
	dsn := sqliteDSN(t)
	wal := strings.TrimPrefix(dsn, "sqlite:") + "-wal"
	var proxies []*proxy
	for range 2 {
		proxies = append(proxies, startProxy(t, "--upstream", up.srv.URL, "--store", dsn))
	}
	var (
		sent atomic.Int64
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	defer wg.Wait()
	defer stop.Store(true)
	for w := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				status, body, _, err := sqlitePost(http.DefaultClient, proxies[w%2].base, fmt.Sprintf("wal-%d-%d", w, i), `{}`)
				if err != nil || status != http.StatusCreated {
					t.Errorf("%d %.200s %v", status, body, err)
					return
				}
				sent.Add(1)
			}
		})
	}
	const limit = 6 << 20
	var (
		first, last uint32
		seen        bool
		largest     int64
	)
	for deadline := time.Now().Add(20 * time.Second); !seen || last-first < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %d requests in 20 s the WAL was started over %d times, want 2 (largest %d bytes)", sent.Load(), last-first, largest)
		}
		if fi, err := os.Stat(wal); err == nil && fi.Size() > largest {
			largest = fi.Size()
		}
		if seq, ok := sqliteWALCheckpoints(wal); ok {
			if !seen {
				first, seen = seq, true
			}
			last = seq
		}
	}
	t.Logf("%d requests; the WAL was started over %d times; largest -wal file %d bytes", sent.Load(), last-first, largest)
	if largest > limit {
		t.Errorf("the -wal file grew to %d bytes, want at most %d", largest, limit)
	}
}

// sqliteExpired writes n committed records of namespace http, expired an
// hour ago, each with a result of a few kB, into the SQLite database at
// path, which it creates: one INSERT, in the store's schema.
func sqliteExpired(t *testing.T, path string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := idem.NewRequest([]byte(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(-2 * time.Hour).UnixMicro()
	_, err = db.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?1)
INSERT INTO idempotency_record (namespace, key_value, request_hash, request_payload, status,
	result_payload, owner_token, fence, created_at, expires_at)
SELECT 'http', 'old-' || n, ?2, '{"amount":1}', 'committed', '"' || printf('%.*c', 3000, 'r') || '"', 't', 1, ?3, ?4 FROM i`,
		n, r.Fingerprint.Bytes(), created, created+time.Hour.Microseconds())
	if err != nil {
		t.Fatal(err)
	}
}

// sqlitePurged reads idem_purged_records_total from the proxy's /metrics.
func sqlitePurged(t *testing.T, p *proxy) int {
	t.Helper()
	res, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "idem_purged_records_total "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no idem_purged_records_total in /metrics:\n%s", b)
	return 0
}

// TestSQLitePurgeWhileServing: a proxy whose SQLite file holds 20000
// expired records purges them all (--purge-interval) while clients keep
// sending it requests, each of which is answered 201; some are sent after
// the purge deleted its first records and answered before it deleted its
// last (the purge deletes in batches, each its own statement, and does
// not hold the store for the whole table); the records written meanwhile
// are kept, and replay. What the test reads of the purge's progress is
// the expired records left, as another connection sees them: no clock, so
// that a loaded machine, on which one batch may take longer than a short
// --store-timeout, does not fail it.
func TestSQLitePurgeWhileServing(t *testing.T) {
	const expired = 20000
	up := newCounting(t)
	dsn := sqliteDSN(t)
	path := strings.TrimPrefix(dsn, "sqlite:")
	sqliteExpired(t, path, expired)
	reader, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	left := func() int {
		var n int
		if err := reader.QueryRow(`SELECT count(*) FROM idempotency_record WHERE key_value LIKE 'old-%'`).Scan(&n); err != nil {
			t.Errorf("count the expired records left: %v", err)
			return -1
		}
		return n
	}
	p := startProxy(t, "--upstream", up.srv.URL, "--store", dsn, "--purge-interval", "300ms", "--store-timeout", "30s")
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		live   = map[string]string{}
		during atomic.Int64 // requests sent and answered within the purge
	)
	defer wg.Wait()
	defer stop.Store(true)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("new-%d-%d", w, i)
				before := left()
				status, body, _, err := sqlitePost(http.DefaultClient, p.base, key, `{}`)
				if err != nil || status != http.StatusCreated {
					t.Errorf("%s during the purge: %d %.200s %v", key, status, body, err)
					return
				}
				if after := left(); before < expired && after > 0 {
					during.Add(1)
				}
				mu.Lock()
				live[key] = body
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(60 * time.Second); sqlitePurged(t, p) < expired; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d expired records purged in 60 s", sqlitePurged(t, p), expired)
		}
	}
	stop.Store(true)
	wg.Wait()
	if during.Load() == 0 {
		t.Error("no request was sent after the purge's first batch and answered before its last: the purge held the store throughout")
	}
	if n := sqlitePurged(t, p); n != expired {
		t.Errorf("purged %d records, want the %d expired ones", n, expired)
	}
	for key, body := range live {
		if status, got, replayed, err := sqlitePost(http.DefaultClient, p.base, key, `{}`); err != nil || status != http.StatusCreated || !replayed || got != body {
			t.Errorf("%s after the purge: %d %q replayed=%v %v; want its recorded 201", key, status, got, replayed, err)
		}
	}
	t.Logf("%d requests answered while the proxy purged, %d of them sent and answered between its first batch and its last", len(live), during.Load())
}

// TestSQLiteDSNPaths: sqlite:PATH names the database file by its path as
// it is written, relative to the working directory or absolute, spaces,
// '?', '#' and '%' included (none is read as a URI's query, fragment or
// escape): idem migrate creates exactly that file, a proxy started in the
// directory with the relative form records into it, and idem inspect
// given the absolute form reads the record back.
func TestSQLiteDSNPaths(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"a b", "sub"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	forms := []string{"a b/my q?x#frag%41%zz=.db", "sub/../dots.db", filepath.Join(dir, "a b", "abs ?#%.db")}
	for _, form := range forms {
		if r := runIdem(t, dir, nil, "migrate", "--store", "sqlite:"+form); r.code != 0 {
			t.Errorf("idem migrate --store sqlite:%s: exit %d, %s", form, r.code, r.stderr)
			continue
		}
		want := form
		if !filepath.IsAbs(form) {
			want = filepath.Join(dir, form)
		}
		if fi, err := os.Stat(want); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("sqlite:%s: no database file at %s (%v)", form, want, err)
		}
	}
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	if want := len(forms); len(files) != want {
		t.Errorf("files in the directory: %q, want the %d databases alone", files, want)
	}

	up := newCounting(t)
	rel := forms[0]
	t.Setenv("SQLITE_E2E_DIR", dir) // the proxy's working directory
	p := startProxyVia(t, []string{"sh", "-c", `cd "$SQLITE_E2E_DIR" && exec "$0" "$@"`}, "--upstream", up.srv.URL, "--store", "sqlite:"+rel)
	if r := send(t, p.base, "k", `{}`); r.status != http.StatusCreated {
		t.Fatalf("through the proxy on sqlite:%s: %+v", rel, r)
	}
	r := runIdem(t, t.TempDir(), nil, "inspect", "--key", "k", "--store", "sqlite:"+filepath.Join(dir, rel))
	if r.code != 0 || !strings.Contains(r.stdout, `"committed"`) {
		t.Errorf("idem inspect of sqlite:%s (the proxy's sqlite:%s): exit %d, %s%s", filepath.Join(dir, rel), rel, r.code, r.stdout, r.stderr)
	}
}

// TestSQLiteTildeIsNotExpanded: sqlite:~/PATH, where no shell expands the
// '~' (it does so only at the start of a word), is refused as a usage
// mistake that says so and shows the path with the home directory written
// out, for each command that opens a store, rather than advising to create
// a directory named "~" in the working directory (a later rm -r ~ would
// remove the home directory). A directory that is named "~" and exists is
// taken, as the path is written.
func TestSQLiteTildeIsNotExpanded(t *testing.T) {
	dir := t.TempDir()
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}
	for _, args := range [][]string{proxy, {"migrate"}, {"purge"}, {"inspect", "--key", "k"}} {
		r := runIdem(t, dir, nil, append(args, "--store", "sqlite:~/idem.db")...)
		if r.code != 2 || !strings.Contains(r.stderr, "not expanded") || !strings.Contains(r.stderr, "sqlite:$HOME/idem.db") || strings.Contains(r.stderr, "mkdir") {
			t.Errorf("idem %s --store sqlite:~/idem.db: exit %d, stderr %q; want 2 and the '~' explained, with sqlite:$HOME/idem.db", args[0], r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "~")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused sqlite:~/idem.db left %s behind (%v)", filepath.Join(dir, "~"), err)
	}
	if err := os.Mkdir(filepath.Join(dir, "~"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runIdem(t, dir, nil, "migrate", "--store", "sqlite:~/idem.db"); r.code != 0 {
		t.Errorf("idem migrate --store sqlite:~/idem.db with a directory named ~ there: exit %d, stderr %q; want it taken", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "~", "idem.db")); err != nil {
		t.Errorf("no database in the directory named ~: %v", err)
	}
}
