package redistest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/testserver"
)

// Server is a redis-server this package started, in a temporary directory
// of its own, listening on 127.0.0.1 on a port of its own, with no password
// and no persistence of its own accord. Its methods are safe for concurrent
// use.
type Server struct {
	bin   binaries
	work  testserver.WorkDir // the working directory: redis.log, dump.rdb, nodes.conf
	port  int
	extra []string // more configuration, for cluster nodes

	mu     sync.Mutex
	proc   *testserver.Process // nil while stopped
	closed bool
}

const (
	readyTimeout = 30 * time.Second // for a start, from exec to the first PONG
	stopTimeout  = 30 * time.Second // for a shutdown, before a kill
)

// Start starts a private server for tb, removed when tb ends. It is started
// by this package even when TEST_REDIS_URL is set, so tb may stop, kill and
// restart it. When redis-server is missing, tb is skipped, or fails under
// CI=true or TEST_REQUIRE_SERVERS=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := Launch()
	if err != nil {
		giveUp(tb, err)
		return nil
	}
	testserver.CloseOnSignal(s)
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("redistest: %v", err)
		}
		testserver.ForgetOnSignal(s)
	})
	return s
}

// Launch starts a server in a new temporary directory, on a free port,
// returning once it answers PING. The caller must Close it. The error wraps
// ErrUnavailable when redis-server is missing.
func Launch() (*Server, error) {
	return launch(testserver.FreePort, nil)
}

// launch starts a server on a port from choose, with extra configuration.
func launch(choose func() (int, error), extra []string) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	work, err := testserver.NewWorkDir(os.TempDir(), "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{bin: bin, work: work, extra: extra}
	for attempt := 1; ; attempt++ {
		if s.port, err = choose(); err == nil {
			err = s.Start()
		}
		if err == nil {
			return s, nil
		}
		if attempt == 5 || !errors.Is(err, testserver.ErrPortTaken) {
			_ = work.Remove()
			return nil, err
		}
	}
}

func (s *Server) logFile() string { return filepath.Join(s.work.Path, "redis.log") }

// Addr is the server's host:port.
func (s *Server) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// URL is the server's redis:// URL, for database 0.
func (s *Server) URL() string {
	return "redis://" + s.Addr() + "/0"
}

// Start starts the server again on the same port and directory, and returns
// once it answers PING; it has the data the last Stop saved, none after a
// Kill. Starting a running server does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: Start after Close")
	}
	if s.proc != nil && !s.proc.Exited() {
		return nil
	}
	s.proc = nil
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	defer log.Close()
	logStart, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.work.Path,
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
	}
	cmd := exec.Command(s.bin.server, append(args, s.extra...)...)
	cmd.Dir = s.work.Path
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's interrupt reaches only the test process
		Pdeathsig: syscall.SIGKILL, // should the process that started it die
	}
	p, err := testserver.StartProcess(cmd)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	if err := s.waitReady(p, logStart); err != nil {
		p.Kill()
		return fmt.Errorf("%w\n%s", err, testserver.LogTail(s.logFile(), logStart))
	}
	s.proc = p
	return nil
}

// waitReady waits until the server answers PING, or exits.
func (s *Server) waitReady(p *testserver.Process, logStart int64) error {
	err := testserver.WaitReady(p, s.logFile(), logStart, readyTimeout, 10*time.Millisecond, func() error {
		_, err := command(s.Addr(), "PING")
		return err
	})
	if err != nil {
		return fmt.Errorf("redistest: redis-server on port %d: %w", s.port, err)
	}
	return nil
}

// Stop shuts the server down gracefully, saving its data set to disk for
// the next Start, and closing every connection. Stopping a stopped server
// does nothing. The error says the server had died on its own, or had to
// be killed.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop(true)
}

// Freeze stops the server process (SIGSTOP) without ending it, as a
// server that hangs would: connections are still accepted by the kernel,
// but nothing is answered until Thaw. Stop, Kill and Close thaw it first.
// Freezing a stopped server does nothing.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Signal(syscall.SIGSTOP)
	}
}

// Thaw lets a frozen server go on (SIGCONT); it answers what it was sent
// meanwhile. Thawing a server that is not frozen does nothing.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Signal(syscall.SIGCONT)
	}
}

// stop ends the server, saving its data or not.
func (s *Server) stop(save bool) error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	p.Signal(syscall.SIGCONT) // frozen, it would not take the signal
	if p.Exited() {
		return fmt.Errorf("redistest: redis-server on port %d had exited on its own: %v", s.port, p.Err())
	}
	if save {
		// The server closes the connection instead of answering.
		_, _ = command(s.Addr(), "SHUTDOWN", "SAVE")
	} else {
		p.Signal(syscall.SIGTERM)
	}
	if err := p.Wait(stopTimeout); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	return nil
}

// Kill ends the server at once with SIGKILL, as a crash would: its data is
// lost, and the next Start begins empty (for a cluster node, with the
// cluster configuration it had). Killing a stopped server does nothing. The
// error says the server had died on its own.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	exited := p.Exited()
	p.Kill()
	_ = os.Remove(filepath.Join(s.work.Path, "dump.rdb")) // a crash loses what a Stop saved since
	if exited {
		return fmt.Errorf("redistest: redis-server on port %d had exited on its own: %v", s.port, p.Err())
	}
	return nil
}

// Close stops the server, without saving, and removes its directory.
// Closing twice does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.stop(false)
	if rmErr := s.work.Remove(); rmErr != nil && err == nil {
		err = fmt.Errorf("redistest: %w", rmErr)
	}
	return err
}
