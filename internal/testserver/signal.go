// Package testserver holds what the throwaway test servers (pgtest,
// redistest) share: their working directories, which outlive no process,
// free ports, closing them on a signal, and the rule that decides whether a
// missing server skips or fails a test.
package testserver

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// closer is a server to close should a signal end the process.
type closer = io.Closer

// watched are the servers that tests started and an interrupt, termination
// or hang-up signal closes before it ends the process, so that no data
// directory is left behind. Without this the server would still go (the
// kernel sends it the death signal its start set), but its directory
// would stay.
var watched struct {
	mu      sync.Mutex
	servers map[closer]bool
	stop    func() // ends the signal watch; nil while there is none
}

// CloseOnSignal has an interrupt, termination or hang-up signal close s
// before it ends the process, until ForgetOnSignal(s).
func CloseOnSignal(s io.Closer) {
	watched.mu.Lock()
	defer watched.mu.Unlock()
	if watched.servers == nil {
		watched.servers = make(map[closer]bool)
	}
	watched.servers[s] = true
	if watched.stop == nil {
		watched.stop = watchSignals()
	}
}

// ForgetOnSignal undoes CloseOnSignal(s), and ends the watch when no server
// is left to close.
func ForgetOnSignal(s io.Closer) {
	watched.mu.Lock()
	delete(watched.servers, s)
	stop := watched.stop
	if len(watched.servers) > 0 {
		stop = nil
	} else {
		watched.stop = nil
	}
	watched.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watchSignals waits for a signal, closes the watched servers and lets the
// signal end the process as it would have, until the returned stop is
// called.
func watchSignals() (stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-signals:
			watched.mu.Lock()
			var servers []closer
			for s := range watched.servers {
				servers = append(servers, s)
			}
			watched.mu.Unlock()
			for _, s := range servers {
				_ = s.Close()
			}
			signal.Stop(signals)
			// With no handler left the signal takes its default action;
			// if another helper still watches, it does the same in turn.
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-quit:
			signal.Stop(signals)
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
