//go:build !unix

package main

import "syscall"

// raise does nothing where a process cannot send itself a signal: the
// caller then exits with the status a shell gives a process ended by sig.
func raise(syscall.Signal) {}
