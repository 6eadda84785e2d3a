package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
