package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// binaries are the Redis programs servers are run and joined with.
type binaries struct {
	server string // redis-server
	cli    string // redis-cli, needed only for clusters
}

// findBinaries looks for redis-server, and redis-cli beside it, on PATH and
// then in /usr/bin and /usr/local/bin. It reports ErrUnavailable when there
// is no redis-server; cli is empty when there is no redis-cli.
func findBinaries() (binaries, error) {
	var dirs []string
	if p, err := exec.LookPath("redis-server"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	dirs = append(dirs, "/usr/bin", "/usr/local/bin")
	for _, dir := range dirs {
		b := binaries{server: filepath.Join(dir, "redis-server")}
		if !isExecutable(b.server) {
			continue
		}
		if cli := filepath.Join(dir, "redis-cli"); isExecutable(cli) {
			b.cli = cli
		} else if cli, err := exec.LookPath("redis-cli"); err == nil {
			b.cli = cli
		}
		return b, nil
	}
	return binaries{}, fmt.Errorf("%w: redis-server is neither on PATH nor in /usr/bin or /usr/local/bin", ErrUnavailable)
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}
