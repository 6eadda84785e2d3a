package pgtest

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// binaries are the PostgreSQL programs a server is made and run with.
type binaries struct {
	initdb   string
	postgres string
}

// findBinaries looks for initdb and postgres in one directory: the one that
// holds initdb on PATH, then the highest-versioned /usr/lib/postgresql/*/bin.
// It reports ErrUnavailable when there is none.
func findBinaries() (binaries, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(resolved))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	dirs = append(dirs, debianDirs()...)
	for _, dir := range dirs {
		b := binaries{
			initdb:   filepath.Join(dir, "initdb"),
			postgres: filepath.Join(dir, "postgres"),
		}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("%w: initdb and postgres are neither on PATH nor in /usr/lib/postgresql/*/bin", ErrUnavailable)
}

// debianDirs lists /usr/lib/postgresql/*/bin, highest major version first.
func debianDirs() []string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		if err != nil {
			return -1
		}
		return v
	}
	slices.SortStableFunc(matches, func(a, b string) int {
		return cmp.Compare(version(b), version(a))
	})
	return matches
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}
