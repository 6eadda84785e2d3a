package idemhttp_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/sqlitestore"
)

// sqlTxKey is the context key of the handler's *sql.Tx.
type sqlTxKey struct{}

// Transaction mode on sqlitestore.WithTx (database/sql): a handler's 502
// rolls back its row, the retry's 201 commits one row with the record, and
// a further retry is answered from the record without running again.
func TestTxSQLite(t *testing.T) {
	db, beginTx := sqliteTx(t)
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, sku TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{RequireKey: true, BeginTx: beginTx})
	if err != nil {
		t.Fatal(err)
	}
	status, runs := http.StatusBadGateway, 0
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		tx := r.Context().Value(sqlTxKey{}).(*sql.Tx)
		sku, _ := io.ReadAll(r.Body)
		var id int64
		if err := tx.QueryRowContext(r.Context(), `INSERT INTO orders (sku) VALUES (?) RETURNING id`, string(sku)).Scan(&id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"id":%d}`, id)
	}))
	rows := func() int {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if w := postTx(h, "k-sqlite", "mug"); w.Code != http.StatusBadGateway || rows() != 0 {
		t.Fatalf("%d %s, %d rows; want the 502 and no row", w.Code, w.Body, rows())
	}
	status = http.StatusCreated
	first := postTx(h, "k-sqlite", "mug")
	if first.Code != http.StatusCreated || rows() != 1 {
		t.Fatalf("retry: %d %s, %d rows; want 201 and 1 row", first.Code, first.Body, rows())
	}
	w := postTx(h, "k-sqlite", "mug")
	if w.Code != http.StatusCreated || w.Header().Get(idemhttp.ReplayedHeader) != "true" || w.Body.String() != first.Body.String() || !strings.HasPrefix(first.Body.String(), `{"id":`) {
		t.Fatalf("second retry: %d %q %s; want the first's %s replayed", w.Code, w.Header().Get(idemhttp.ReplayedHeader), w.Body, first.Body)
	}
	if rows() != 1 || runs != 2 {
		t.Fatalf("%d rows, %d runs; want 1 row, 2 runs", rows(), runs)
	}
}

// A BeginTx that reads the request's body (to choose a database, say)
// leaves the handler the whole body all the same.
func TestTxBeginTxReadingTheBody(t *testing.T) {
	_, beginTx := sqliteTx(t)
	mw, err := idemhttp.New(idemhttp.Config{BeginTx: func(r *http.Request) (*idemhttp.Tx, error) {
		if b, err := io.ReadAll(r.Body); err != nil || string(b) != "mug" {
			return nil, fmt.Errorf("BeginTx read %q, %v", b, err)
		}
		return beginTx(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "got %q", b)
	}))
	if w := postTx(h, "k-body", "mug"); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `got "mug"`) {
		t.Errorf("%d %s; want 201 with the whole body", w.Code, w.Body)
	}
}

// sqliteTx opens a migrated SQLite database for t and returns it with the
// Config.BeginTx of a database/sql program on it, which puts the *sql.Tx
// in the handler's context under sqlTxKey.
func sqliteTx(t *testing.T) (*sql.DB, func(*http.Request) (*idemhttp.Tx, error)) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "tx.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, func(r *http.Request) (*idemhttp.Tx, error) {
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			return nil, err
		}
		return &idemhttp.Tx{
			Store:    store.WithTx(tx),
			Context:  context.WithValue(r.Context(), sqlTxKey{}, tx),
			Commit:   func(context.Context) error { return tx.Commit() },
			Rollback: func(context.Context) error { return tx.Rollback() },
		}, nil
	}
}

// Two requests with one key in transaction mode on SQLite: the second
// waits for the first's transaction to end and is answered from its
// record; the handler runs once.
func TestTxSQLiteConcurrentSameKey(t *testing.T) {
	_, beginTx := sqliteTx(t)
	mw, err := idemhttp.New(idemhttp.Config{BeginTx: beginTx})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Load())
	}))
	firstDone := make(chan string, 1)
	go func() { w := postTx(h, "k-sqlite-twice", "mug"); firstDone <- fmt.Sprint(w.Code, " ", w.Body) }()
	<-started
	secondDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { secondDone <- postTx(h, "k-sqlite-twice", "mug") }()
	select {
	case w := <-secondDone:
		t.Fatalf("the second request was answered %d %s while the first's transaction was open", w.Code, w.Body)
	case <-time.After(100 * time.Millisecond): // it waits: nothing to see, so a bounded look
	}
	close(release)
	if first := <-firstDone; first != "201 run 1" {
		t.Fatalf("first: %s; want 201 run 1", first)
	}
	w := <-secondDone
	if w.Code != http.StatusCreated || w.Body.String() != "run 1" || w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("second: %d %q %s; want the first's 201 replayed", w.Code, w.Header().Get(idemhttp.ReplayedHeader), w.Body)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
