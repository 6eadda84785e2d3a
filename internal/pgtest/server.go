package pgtest

import (
	"context"
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

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/internal/testserver"
)

// Server is a PostgreSQL server this package started, in a temporary
// directory of its own, listening on 127.0.0.1 on a port of its own, with a
// superuser "postgres" that needs no password. Its methods are safe for
// concurrent use.
type Server struct {
	bin   binaries
	owner owner
	work  testserver.WorkDir // holds data/, the unix socket and postgres.log
	port  int

	mu     sync.Mutex
	proc   *testserver.Process // nil while stopped
	closed bool
}

const (
	readyTimeout = 60 * time.Second // for a start, from exec to the first connection
	stopTimeout  = 30 * time.Second // for a fast shutdown, before a kill
)

// Start starts a private server for tb, removed when tb ends. It is
// started by this package even when TEST_DATABASE_URL is set, so tb may stop,
// kill and restart it. When the binaries are missing, tb is skipped, or
// fails under CI=true or TEST_REQUIRE_SERVERS=1.
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
			tb.Errorf("pgtest: %v", err)
		}
		testserver.ForgetOnSignal(s)
	})
	return s
}

// Launch initializes a data directory in a new temporary directory and
// starts a server on it, on a free port, returning once it accepts
// connections. The caller must Close it. The error wraps ErrUnavailable when
// this machine cannot run PostgreSQL.
func Launch() (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	own, err := findOwner()
	if err != nil {
		return nil, err
	}
	work, err := testserver.NewWorkDir(serverParent(own), "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{bin: bin, owner: own, work: work}
	if err := s.initdb(); err != nil {
		_ = work.Remove()
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if s.port, err = testserver.FreePort(); err == nil {
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

// serverParent is where server directories go: the temporary directory,
// unless the unix socket's path inside it would be too long, or the server
// runs as another user who may not enter it.
func serverParent(o owner) string {
	dir := os.TempDir()
	if len(dir) > 60 {
		return "/tmp"
	}
	if info, err := os.Stat(dir); o.cred != nil && (err != nil || info.Mode().Perm()&0o001 == 0) {
		return "/tmp"
	}
	return dir
}

func (s *Server) dataDir() string { return filepath.Join(s.work.Path, "data") }
func (s *Server) logFile() string { return filepath.Join(s.work.Path, "postgres.log") }

// initdb creates the cluster: superuser postgres, trust authentication,
// UTF-8, the C locale, and no fsync while writing it.
func (s *Server) initdb() error {
	if err := s.owner.give(s.work.Path); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := exec.Command(s.bin.initdb,
		"--pgdata", s.dataDir(),
		"--username", "postgres",
		"--auth", "trust",
		"--encoding", "UTF8",
		"--locale", "C",
		"--no-sync",
	)
	cmd.Dir = s.work.Path
	cmd.SysProcAttr = s.owner.attr(syscall.SIGKILL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: %s: %v\n%s", s.bin.initdb, err, out)
	}
	return nil
}

// URL is the server's connection URL: the superuser on the database
// postgres, without TLS.
func (s *Server) URL() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.port) + "/postgres?sslmode=disable"
}

// Start starts the server again, on the same port and data directory, and
// returns once it accepts connections; after a Kill, that includes crash
// recovery. Starting a running server does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("pgtest: Start after Close")
	}
	if s.proc != nil && !s.proc.Exited() {
		return nil
	}
	s.proc = nil
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer log.Close()
	logStart, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := exec.Command(s.bin.postgres,
		"-D", s.dataDir(),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.work.Path,
		// fsync=off costs nothing when the server process dies, only when
		// the machine does; commits stay synchronous, so a commit that
		// returned survives Kill, as fault tests expect.
		"-c", "fsync=off",
		"-c", "max_connections=300",
	)
	cmd.Dir = s.work.Path
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = s.owner.attr(syscall.SIGQUIT) // SIGQUIT: immediate shutdown
	p, err := testserver.StartProcess(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := s.waitReady(p, logStart); err != nil {
		p.Kill()
		return fmt.Errorf("%w\n%s", err, testserver.LogTail(s.logFile(), logStart))
	}
	s.proc = p
	return nil
}

// waitReady waits until the server accepts a connection, or exits.
func (s *Server) waitReady(p *testserver.Process, logStart int64) error {
	err := testserver.WaitReady(p, s.logFile(), logStart, readyTimeout, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgconn.Connect(ctx, s.URL())
		if err == nil {
			err = conn.Close(ctx)
		}
		cancel()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgtest: postgres on port %d: %w", s.port, err)
	}
	return nil
}

// Stop shuts the server down the fast way: open sessions are ended, their
// transactions rolled back, and a checkpoint is written. Stopping a stopped
// server does nothing. The error says the server had died on its own, or
// had to be killed.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop()
}

func (s *Server) stop() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	if p.Exited() {
		return fmt.Errorf("pgtest: postgres on port %d had exited on its own: %v", s.port, p.Err())
	}
	if err := p.Stop(syscall.SIGINT, stopTimeout); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// Kill ends the server and all its backends at once with SIGKILL, as a
// crash would; the next Start runs crash recovery. Killing a stopped server
// does nothing. The error says the server had died on its own.
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
	if exited {
		return fmt.Errorf("pgtest: postgres on port %d had exited on its own: %v", s.port, p.Err())
	}
	return nil
}

// Close stops the server and removes its directory. Closing twice does
// nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.stop()
	if rmErr := s.work.Remove(); rmErr != nil && err == nil {
		err = fmt.Errorf("pgtest: %w", rmErr)
	}
	return err
}
