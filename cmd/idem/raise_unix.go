//go:build unix

package main

import (
	"os"
	"syscall"
)

// raise sends sig to the process itself, so that it ends by the signal's
// default action.
func raise(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }
