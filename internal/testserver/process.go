package testserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one run of a server program, reaped in the background.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the program has exited and been reaped
	err  error         // how the program exited; read only after done is closed
}

// StartProcess starts cmd and reaps it in the background.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the program has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the program exited; nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Signal sends sig to the program.
func (p *Process) Signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// Stop sends sig and waits for the program to exit, as Wait does.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	p.Signal(sig)
	return p.Wait(grace)
}

// Wait waits for the program to exit; if it has not within grace, it kills
// the program and its children and says so.
func (p *Process) Wait(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not exit within %v; killed it", filepath.Base(p.cmd.Path), grace)
	}
}

// Kill ends the program and its children at once, as a crash would, and
// waits for them to be gone. The children matter: PostgreSQL backends sit
// in sessions of their own and outlive a killed postmaster for a moment,
// attached to the shared memory that a restart insists be free.
func (p *Process) Kill() {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP) // no new children while we look
	children := childrenOf(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	<-p.done
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range children {
		for running(c) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// childrenOf lists the processes whose parent is pid, as /proc tells.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(child); ok && ppid == pid {
			children = append(children, child)
		}
	}
	return children
}

// running reports whether pid is a process that has not yet exited; a
// zombie has exited, and an init that never reaps may keep it forever.
func running(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}

// procStat reads the state and parent of pid from /proc/pid/stat.
func procStat(pid int) (state string, ppid int, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// After the command name, in parentheses and free to hold anything,
	// come: state ppid ...
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return fields[0], ppid, err == nil
}
