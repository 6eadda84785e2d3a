package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When the process that started withservers dies without signalling it
// (go run killed: it passes no SIGTERM on), withservers gives its command
// SIGTERM and exits, instead of living on, with its servers, under init.
func TestOrphanedWithserversStops(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "withservers")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pidFile := filepath.Join(dir, "command.pid")
	// The parent prints withservers' pid, then waits; withservers' command
	// writes its own pid and sleeps. No server is started: both URLs are
	// given.
	parent := exec.Command("sh", "-c", `"$0" -- sh -c 'echo $$ > "$1"; exec sleep 300' _ "$1" & echo $!; wait`, bin, pidFile)
	parent.Env = append(os.Environ(), "TEST_DATABASE_URL=postgres://unused", "TEST_REDIS_URL=redis://unused")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	ws, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	command := 0
	t.Cleanup(func() { // whatever the test found
		_ = parent.Process.Kill()
		_ = syscall.Kill(ws, syscall.SIGKILL)
		if command > 0 {
			_ = syscall.Kill(command, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); command == 0; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			command, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}

	_ = parent.Process.Kill()
	_ = parent.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(ws) || alive(command); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after its parent died: withservers alive %t, its command alive %t", alive(ws), alive(command))
		}
	}
}

// alive reports whether the process pid exists and has not ended (a
// zombie, which init reaps soon, counts as ended).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
