package redistest

import (
	"os"
	"os/signal"
	"syscall"
)

// onSignal calls cleanup when the process gets an interrupt, termination or
// hang-up signal, then lets that signal end the process as it would have.
// The returned stop ends the watch; it must be called before the process
// exits normally.
func onSignal(cleanup func()) (stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-signals:
			cleanup()
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
