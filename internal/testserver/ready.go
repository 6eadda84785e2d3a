package testserver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrExited says a server program exited while it was starting.
var ErrExited = errors.New("exited while starting")

// ErrPortTaken says a server could not listen on its port: another
// process took it between FreePort and the start. Callers try another port.
var ErrPortTaken = errors.New("port taken")

// WaitReady calls probe every interval until it succeeds. It fails with
// ErrPortTaken when p exits having logged (in log, from offset on) that its
// address was in use, with ErrExited when p exits otherwise, and with the
// probe's last error once timeout has passed.
func WaitReady(p *Process, log string, offset int64, timeout, interval time.Duration, probe func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := probe()
		switch {
		case err == nil:
			return nil
		case p.Exited():
			if strings.Contains(LogTail(log, offset), "Address already in use") {
				return ErrPortTaken
			}
			return fmt.Errorf("%w: %v", ErrExited, p.Err())
		case time.Now().After(deadline):
			return fmt.Errorf("not ready after %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// LogTail returns what a server logged to the file log from offset on, the
// end of it when that is long.
func LogTail(log string, offset int64) string {
	b, err := os.ReadFile(log)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	b = b[offset:]
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
