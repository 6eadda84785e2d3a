package main_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sqliteTinyDisk mounts a tmpfs of size bytes on a new directory and
// returns it; the test is skipped where mounting needs privileges the
// test lacks. The file system is unmounted when the test ends, after the
// proxies it started have stopped.
func sqliteTinyDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v): not run", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// sqliteFill fills the file system of dir with a file, until it is full,
// and returns a function that removes that file.
func sqliteFill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSQLiteFullDisk: on a full disk idem proxy does not start, exiting 1
// with a message that names the database and says that the disk is full.
// A proxy running when its disk fills up answers the requests it cannot
// record 503 (never another status, never a dropped connection), still
// replays what it recorded before, and once there is room again answers
// every key: a key answered 201 while the disk was full never runs again.
func TestSQLiteFullDisk(t *testing.T) {
	dir := sqliteTinyDisk(t, 1<<20)
	db := filepath.Join(dir, "idem.db")

	free := sqliteFill(t, dir)
	r := runIdem(t, t.TempDir(), nil, "proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--store", "sqlite:"+db)
	if r.code != 1 || !strings.Contains(r.stderr, db) || !strings.Contains(r.stderr, "full") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("idem proxy on a full disk: exit %d, stderr %q; want 1 and one line naming %s and the full disk", r.code, r.stderr, db)
	}
	free()

	up := newCounting(t)
	up.size = 3000
	const lease = time.Second
	p := startProxy(t, "--upstream", up.srv.URL, "--store", "sqlite:"+db, "--lease", lease.String(), "--ttl", "1h")
	before := send(t, p.base, "before", `{}`)
	if before.status != http.StatusCreated {
		t.Fatalf("before the disk filled up: %+v", before)
	}

	free = sqliteFill(t, dir)
	const keys = 30
	got := map[string]reply{}
	unavailable := 0
	for i := range keys {
		key := fmt.Sprintf("full-%d", i)
		r := send(t, p.base, key, `{}`)
		switch r.status {
		case http.StatusCreated:
			got[key] = r
		case http.StatusServiceUnavailable:
			unavailable++
		default:
			t.Errorf("%s on a full disk: %d %s; want 201 or 503", key, r.status, r.body)
		}
	}
	if unavailable == 0 {
		t.Errorf("no request of %d was refused on a full disk: the test did not fill it", keys)
	}
	if r := send(t, p.base, "before", `{}`); r.status != http.StatusCreated || !r.replayed || r.body != before.body {
		t.Errorf("replay on a full disk: %+v", r)
	}
	free()

	for i := range keys {
		key := fmt.Sprintf("full-%d", i)
		deadline := time.Now().Add(lease + 10*time.Second)
		for {
			r := send(t, p.base, key, `{}`)
			if (r.status == http.StatusConflict || r.status == http.StatusServiceUnavailable) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if r.status != http.StatusCreated {
				t.Errorf("%s with room again: %d %s", key, r.status, r.body)
			} else if prev, ok := got[key]; ok && (!r.replayed || r.body != prev.body) {
				t.Errorf("%s: answered %q on the full disk, and %q (replayed %v) after", key, prev.body, r.body, r.replayed)
			}
			break
		}
		if _, ok := got[key]; ok && up.runs(key) != 1 {
			t.Errorf("%s: answered 201 on the full disk, ran %d times", key, up.runs(key))
		}
	}
	t.Logf("on the full disk: %d requests answered 201, %d 503", len(got), unavailable)
	if res := sqliteIntegrity(t, db); res != "ok" {
		t.Errorf("integrity_check: %s", res)
	}
}
