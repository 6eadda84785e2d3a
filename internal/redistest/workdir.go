package redistest

import (
	"os"
	"path/filepath"
	"syscall"
)

// dirPattern names server directories, for os.MkdirTemp and for the sweep.
const dirPattern = "redistest-"

// lockName is the file in a server directory that the process owning the
// directory holds an exclusive flock(2) on for as long as it needs it. The
// kernel lets go of the lock when the process dies, however it dies.
const lockName = "owner.lock"

// workDir is a server's directory, claimed by this process.
type workDir struct {
	path string
	lock *os.File // holds the flock; closing it gives up the claim
}

// newWorkDir makes and claims a new server directory in parent, after
// removing those there that processes left behind when they died without
// cleaning up (killed, or timed out by go test).
func newWorkDir(parent string) (workDir, error) {
	sweep(parent)
	path, err := os.MkdirTemp(parent, dirPattern)
	if err != nil {
		return workDir{}, err
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
		return workDir{}, err
	}
	return workDir{path: path, lock: lock}, nil
}

// remove deletes the directory and gives up the claim.
func (d workDir) remove() error {
	err := os.RemoveAll(d.path)
	_ = d.lock.Close()
	return err
}

// sweep removes the server directories in parent whose lock file no live
// process holds. Directories without a lock file are left alone: they are
// being made.
func sweep(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPattern+"*"))
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
