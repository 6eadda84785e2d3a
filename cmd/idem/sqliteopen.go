package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteOpenError explains err, SQLite's failure to open or set up the
// database at path (absolute), by what the file system says of the path,
// since SQLite's own words ("unable to open database file", "attempt to
// write a readonly database") name neither the cause nor the file: a
// directory that is not there, a path that is a directory, a directory in
// which this user may not create files (SQLite keeps PATH-wal and
// PATH-shm next to the database), or a database file this user may not
// write. Other failures are returned naming the path.
func sqliteOpenError(path string, err error) error {
	dir := filepath.Dir(path)
	fi, statErr := os.Stat(path)
	if statErr == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: give the path of the database file in it, e.g. sqlite:%s", path, filepath.Join(path, "idem.db"))
	}
	di, dirErr := os.Stat(dir)
	switch {
	case errors.Is(dirErr, fs.ErrNotExist):
		return fmt.Errorf("cannot create the SQLite database %s: there is no directory %s; create it (mkdir -p %s) or give another path", path, dir, dir)
	case dirErr == nil && !di.IsDir():
		return fmt.Errorf("cannot create the SQLite database %s: %s is not a directory", path, dir)
	case !canCreateIn(dir):
		return fmt.Errorf("cannot use the SQLite database %s: this user may not create files in %s, where SQLite keeps the database and its -wal and -shm files; give it write access to the directory or give another path", path, dir)
	case statErr == nil && !canWrite(path):
		return sqliteReadOnly(path)
	}
	return fmt.Errorf("open sqlite database %s: %w", path, err)
}

// sqliteReadOnly is the error for a database file at path that this user
// may not write. SQLite would open it read-only without a word, and every
// write (each request the proxy records, a purge) would fail later.
func sqliteReadOnly(path string) error {
	return fmt.Errorf("cannot use the SQLite database %s: the file is read-only for this user, and the store writes to it; give it write access or give another path", path)
}

// canCreateIn reports whether a file can be created in dir: it creates one
// and removes it.
func canCreateIn(dir string) bool {
	f, err := os.CreateTemp(dir, ".idem-probe-*")
	if err != nil {
		return false
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return true
}

// canWrite reports whether the file at path can be opened for writing; it
// writes nothing.
func canWrite(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// sqliteOpenTries bounds how long pingSQLite tries again: about as long as
// the connections' busy_timeout (sqliteParams).
const sqliteOpenTries = 10 * time.Second

// pingSQLite opens db's connection. The first connection to a new file
// switches it to WAL (sqliteParams), and SQLite refuses that at once with
// SQLITE_BUSY, whatever busy_timeout says, while another connection (of
// another proxy started at the same moment) does the same; such an open is
// tried again, for up to sqliteOpenTries, instead of failing the start-up.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(sqliteOpenTries)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !isSQLiteBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// isSQLiteBusy reports whether err is SQLite's SQLITE_BUSY (or one of its
// extended codes).
func isSQLiteBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}
