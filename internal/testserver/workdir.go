package testserver

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the file in a server directory that the process owning the
// directory holds an exclusive flock(2) on for as long as it needs it. The
// kernel lets go of the lock when the process dies, however it dies.
const lockName = "owner.lock"

// WorkDir is a server's directory, claimed by this process.
type WorkDir struct {
	Path string
	lock *os.File // holds the flock; closing it gives up the claim
}

// NewWorkDir makes and claims a new server directory in parent, named
// pattern followed by random characters, after removing the directories of
// that pattern there that processes left behind when they died without
// cleaning up (killed, or timed out by go test).
func NewWorkDir(parent, pattern string) (WorkDir, error) {
	sweep(parent, pattern)
	path, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		return WorkDir{}, err
	}
	// Locked under another name and then renamed, so that a sweep never
	// finds the lock file unlocked.
	tmp := filepath.Join(path, lockName+".new")
	lock, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			err = os.Rename(tmp, filepath.Join(path, lockName))
		}
		if err != nil {
			_ = lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(path)
		return WorkDir{}, err
	}
	return WorkDir{Path: path, lock: lock}, nil
}

// Remove deletes the directory and gives up the claim.
func (d WorkDir) Remove() error {
	err := os.RemoveAll(d.Path)
	_ = d.lock.Close()
	return err
}

// sweep removes the server directories of pattern in parent whose lock
// file no live process holds. Directories without a lock file are left
// alone: they are being made.
func sweep(parent, pattern string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, pattern+"*"))
	for _, dir := range dirs {
		lock, err := os.Open(filepath.Join(dir, lockName))
		if err != nil {
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		_ = lock.Close()
	}
}
