package redistest

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the program has exited and been reaped
	err  error         // how the program exited; read only after done is closed
}

// startProcess starts cmd and reaps it in the background.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the program has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the program to exit; if it has not within grace, it kills
// it and says so.
func (p *process) wait(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("redis-server did not exit within %v; killed it", grace)
	}
}

// kill ends the program at once, as a crash would, and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
