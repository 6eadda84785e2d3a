package main_test

// End-to-end tests of what the idem command tells its user: messages,
// exit codes and which stream they go to.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/internal/pgtest"
	"github.com/idemgo/idem/internal/redistest"
)

// result is what one run of the idem binary printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// testEnv is the test's environment without its IDEM_* variables, which
// would set flags or be warned about, and with env added.
func testEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEM_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// runIdem runs the idem binary with args in dir, with env added to the
// environment (testEnv), and returns what it printed and its exit code.
func runIdem(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runIdemAs(t, idemBin, nil, dir, env, args...)
}

// runIdemAs is runIdem running the binary bin as the user cred names (nil:
// this process's user).
func runIdemAs(t *testing.T, bin string, cred *syscall.Credential, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	cmd.Env = testEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("idem %q: %v", args, err)
	}
	return r
}

// TestReadCommandsNeedAnExistingSQLiteStore: idem inspect and idem purge
// on a SQLite path where there is no database say so and create none; on
// a database without the table they say to run idem migrate.
func TestReadCommandsNeedAnExistingSQLiteStore(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	commands := [][]string{{"inspect", "--key", "k"}, {"purge"}}
	for _, args := range commands {
		r := runIdem(t, dir, nil, append(args, "--store", "sqlite:"+typo)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no SQLite database at "+typo) || !strings.Contains(r.stderr, "idem migrate --store sqlite:"+typo) {
			t.Errorf("idem %s on a missing file: exit %d, stderr %q; want 1 and a message naming the path and idem migrate", args[0], r.code, r.stderr)
		}
		if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("idem %s created %s (stat: %v)", args[0], typo, err)
		}
	}
	// A relative path is looked up from the working directory and shown
	// absolute.
	r := runIdem(t, dir, nil, "purge", "--store", "sqlite:typo.db")
	if r.code != 1 || !strings.Contains(r.stderr, "no SQLite database at "+typo) {
		t.Errorf("idem purge on a missing relative path: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := os.WriteFile(typo, nil, 0o600); err != nil { // an empty file is an empty database
		t.Fatal(err)
	}
	for _, args := range commands {
		r := runIdem(t, dir, nil, append(args, "--store", "sqlite:"+typo)...)
		if r.code != 1 || !strings.Contains(r.stderr, "run idem migrate --store sqlite:"+typo) || strings.Contains(r.stderr, "no such table") {
			t.Errorf("idem %s on a database without the table: exit %d, stderr %q; want 1 and a message saying to run idem migrate", args[0], r.code, r.stderr)
		}
	}

	if r := runIdem(t, dir, nil, "migrate", "--store", "sqlite:"+typo); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runIdem(t, dir, nil, "purge", "--store", "sqlite:"+typo); r.code != 0 || !strings.Contains(r.stdout, "purged 0 expired records") {
		t.Errorf("idem purge after migrate: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runIdem(t, dir, nil, "inspect", "--key", "k", "--store", "sqlite:"+typo); r.code != 1 || !strings.Contains(r.stderr, "no live record") {
		t.Errorf("idem inspect after migrate: exit %d, stderr %q", r.code, r.stderr)
	}

	// idem migrate creates a database that is not there yet.
	fresh := filepath.Join(dir, "fresh.db")
	if r := runIdem(t, dir, nil, "migrate", "--store", "sqlite:"+fresh); r.code != 0 {
		t.Fatalf("idem migrate on a new path: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("idem migrate did not create the database: %v", err)
	}
}

// TestInspectPostgresWithoutTable: idem inspect and idem purge on a
// Postgres database without the table say to run idem migrate.
func TestInspectPostgresWithoutTable(t *testing.T) {
	dsn := pgtest.URL(t)
	for _, args := range [][]string{{"inspect", "--key", "k"}, {"purge"}} {
		r := runIdem(t, t.TempDir(), nil, append(args, "--store", dsn)...)
		if r.code != 1 || !strings.Contains(r.stderr, "run idem migrate") {
			t.Errorf("idem %s: exit %d, stderr %q; want 1 and a message saying to run idem migrate", args[0], r.code, r.stderr)
		}
	}
}

// TestMigrateHintsPasteIntoAShell: the idem migrate command a message
// suggests, for a SQLite path with a space or a '?' and for a Postgres URL
// with a query ('?', '&'), runs as it is when pasted into a shell that
// refuses a glob matching nothing (as zsh does), and creates the schema.
func TestMigrateHintsPasteIntoAShell(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my stores")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty?.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil { // an empty file is an empty database
		t.Fatal(err)
	}
	hint := regexp.MustCompile(`run (idem migrate --store .*) to create`)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no sqlite database", []string{"purge", "--store", "sqlite:" + filepath.Join(dir, "missing.db")}},
		{"sqlite without the table", []string{"inspect", "--key", "k", "--store", "sqlite:" + empty}},
		{"postgres without the table", []string{"inspect", "--key", "k", "--store", pgtest.URL(t)}},
		{"proxy --migrate=false", []string{"proxy", "--migrate=false", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--store", pgtest.URL(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIdem(t, t.TempDir(), nil, tc.args...)
			m := hint.FindStringSubmatch(r.stderr)
			if r.code != 1 || m == nil {
				t.Fatalf("idem %q: exit %d, stderr %q; want 1 and a hint to run idem migrate", tc.args, r.code, r.stderr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sh := exec.CommandContext(ctx, "bash", "-O", "failglob", "-c", m[1])
			sh.Dir = t.TempDir()
			sh.Env = append(os.Environ(), "PATH="+filepath.Dir(idemBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			if out, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(out), "schema up to date") {
				t.Errorf("the hint pasted into a shell, %s: %v, output %q; want the schema migrated", m[1], err, out)
			}
		})
	}
}

// TestMigrateHintsHideThePassword: the migrate command a message suggests
// for a Postgres DSN with a password shows the DSN without it (xxxxx) and
// says so, as the command pasted as it is would fail to authenticate; with
// the password put back in place of xxxxx, it migrates.
func TestMigrateHintsHideThePassword(t *testing.T) {
	t.Parallel()
	pg := strings.Replace(pgtest.URL(t), "postgres://postgres@", "postgres://postgres:secret@", 1)
	if !strings.Contains(pg, ":secret@") {
		t.Fatalf("cannot put a password into %s", pg)
	}
	hint := regexp.MustCompile(`run (idem (?:durable )?migrate --(?:store|db) \S+) to create`)
	for _, tc := range []struct {
		args []string
		done string // what the migration prints
	}{
		{[]string{"inspect", "--key", "k", "--store", pg}, "schema up to date"},
		{[]string{"durable", "list", "--db", pg}, `"migrated": true`},
	} {
		r := runIdem(t, t.TempDir(), nil, tc.args...)
		m := hint.FindStringSubmatch(r.stderr)
		if r.code != 1 || m == nil || strings.Contains(r.stderr, "secret") || !strings.Contains(m[1], ":xxxxx@") ||
			!strings.Contains(r.stderr, "with the DSN's password in place of xxxxx (it is not shown here)") {
			t.Errorf("idem %q: exit %d, stderr %q; want 1, a hint to migrate with the password hidden, saying it is", tc.args[:2], r.code, r.stderr)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sh := exec.CommandContext(ctx, "bash", "-O", "failglob", "-c", strings.Replace(m[1], "xxxxx", "secret", 1))
		sh.Dir = t.TempDir()
		sh.Env = append(testEnv(), "PATH="+filepath.Dir(idemBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(out), tc.done) {
			t.Errorf("the hint with the password put back, %s: %v, output %q; want the schema migrated", m[1], err, out)
		}
		cancel()
	}
}

// TestProxyNamesItsStore: the proxy's start-up line names the SQLite
// file by its absolute path and other stores by their address, without
// the password.
func TestProxyNamesItsStore(t *testing.T) {
	up := newCounting(t)
	dir := t.TempDir()
	pg := strings.Replace(pgtest.URL(t), "postgres://postgres@", "postgres://postgres:secret@", 1)
	if !strings.Contains(pg, ":secret@") {
		t.Fatalf("cannot put a password into %s", pg)
	}
	for _, tc := range []struct {
		name, store, want string
	}{
		{"sqlite", "sqlite:rel.db", "store sqlite:" + filepath.Join(dir, "rel.db") + "\n"},
		{"memory", "memory", "store memory\n"},
		{"postgres", pg, "store postgres://postgres:xxxxx@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen, admin := freeAddr(t), freeAddr(t)
			cmd := exec.Command(idemBin, "proxy", "--listen", listen, "--admin", admin, "--upstream", up.srv.URL, "--store", tc.store)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			waitHealthy(t, "http://"+admin, done)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-done; err != nil {
				t.Fatalf("proxy: %v\n%s", err, out.String())
			}
			if s := out.String(); !strings.Contains(s, tc.want) || strings.Contains(s, "secret") {
				t.Errorf("proxy output %q: want it to contain %q and no password", s, tc.want)
			}
		})
	}
}

// waitHealthy waits until admin/healthz answers 200, failing t if the
// process ends first (done receives) or it takes too long.
func waitHealthy(t *testing.T, admin string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(admin + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("proxy exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("proxy not healthy")
}

// TestBadFlagValuesSayWhatIsAccepted: a value a flag or its IDEM_*
// variable cannot take is reported with the values the flag accepts.
func TestBadFlagValuesSayWhatIsAccepted(t *testing.T) {
	up := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory"}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"boolean variable", []string{"IDEM_REQUIRE_KEY=yes"}, nil, 2, `IDEM_REQUIRE_KEY`},
		{"boolean flag", nil, []string{"--require-key=yes"}, 2, `-require-key`},
		{"duration variable", []string{"IDEM_TTL=10"}, nil, 2, "a duration such as 30s or 24h"},
		{"duration flag", nil, []string{"--lease", "soon"}, 2, "a duration such as 30s or 24h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIdem(t, t.TempDir(), tc.env, append(up, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "parse error") {
				t.Errorf("exit %d, stderr %q; want %d and a message with %q and no bare parse error", r.code, r.stderr, tc.code, tc.want)
			}
			if strings.Contains(tc.name, "boolean") && !strings.Contains(r.stderr, "true or false (or 1/0") {
				t.Errorf("stderr %q does not name the accepted values", r.stderr)
			}
		})
	}
}

// TestPostgresStoreErrors: a Postgres store whose database does not
// exist, or whose user may not log in, is reported as such by every
// command that opens it, not as an unreachable server.
func TestPostgresStoreErrors(t *testing.T) {
	base, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB, noUser := *base, *base
	noDB.Path = "/no_such_db"
	noDB.User = url.UserPassword(base.User.Username(), "secret")
	noUser.User = url.UserPassword("no_such_role", "secret")
	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"no database", noDB.String(), []string{`no database "no_such_db"`, "3D000"}},
		{"no role", noUser.String(), []string{`authentication failed for user "no_such_role"`, "28000"}},
	} {
		for _, args := range [][]string{
			{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
			{"migrate"}, {"purge"}, {"inspect", "--key", "k"},
		} {
			t.Run(tc.name+"/"+args[0], func(t *testing.T) {
				r := runIdem(t, t.TempDir(), nil, append(args, "--store", tc.dsn)...)
				if r.code != 1 || strings.Contains(r.stderr, "unreachable") || strings.Contains(r.stderr, "secret") {
					t.Errorf("exit %d, stderr %q; want 1, no \"unreachable\" and no password", r.code, r.stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q lacks %q", r.stderr, w)
					}
				}
			})
		}
	}
}

// TestHelpGoesToStdout: help asked for (-h, --help, help) is printed on
// standard output with exit code 0, so that idem --help | less shows it;
// usage printed because of a mistake goes to standard error with a
// non-zero exit code.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "usage: idem <command>"},
		{[]string{"-h"}, "usage: idem <command>"},
		{[]string{"help"}, "usage: idem <command>"},
		{[]string{"proxy", "--help"}, "-upstream"},
		{[]string{"proxy", "-h"}, "-upstream"},
		{[]string{"proxy", "--store", "memory", "-help"}, "-upstream"},
		{[]string{"help", "proxy"}, "-upstream"},
		{[]string{"-h", "proxy"}, "-upstream"},
		{[]string{"--help", "durable", "list"}, "-status"},
		{[]string{"migrate", "-h"}, "-store"},
		{[]string{"purge", "--help"}, "-namespace"},
		{[]string{"inspect", "--help"}, "-authorization"},
	} {
		r := runIdem(t, t.TempDir(), nil, tc.args...)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) || r.stderr != "" {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 0 and the help, with %q, on stdout only", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: idem <command>"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"help", "frobnicate"}, "unknown command"},
		{[]string{"--store", "memory", "migrate"}, `idem: "--store" is a flag: flags go after the command (idem <command> [flags])`},
		{[]string{"durable", "--db", "x", "list"}, `idem durable: "--db" is a flag: flags go after the subcommand (idem durable <subcommand> --db URL [flags])`},
		// A flag mistake is named in one line, then the usage line and
		// where to find the flags: the full help would scroll the mistake
		// away (TestFlagMistakesAreShort).
		{[]string{"proxy", "--bogus"}, "idem proxy: flag provided but not defined: -bogus\nusage: idem proxy --upstream URL"},
		{[]string{"inspect", "--key", "k", "extra"}, `idem inspect: unexpected arguments: ["extra"]: it takes only flags ('idem inspect -h' lists them)`},
		{[]string{"durable", "list", "--db", "x", "extra"}, `idem durable list: unexpected arguments: ["extra"]: it takes only flags ('idem durable list -h' lists them)`},
	} {
		r := runIdem(t, t.TempDir(), nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 2 and the usage, with %q, on stderr only", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestFlagMistakesAreShort: a flag the command does not have, a value
// its flag's type cannot take, or a flag without its value is named in
// one line after the command, as other errors are, followed by the
// command's usage line (the first line of its -h) and where the flags
// are listed (for idem version, which has none, its help): three lines
// on stderr, exit 2, so that the mistake does not scroll away behind the
// full help, for every command and subcommand.
func TestFlagMistakesAreShort(t *testing.T) {
	t.Parallel()
	bad := map[string][]string{ // the flag mistakes tried besides --bogus
		"proxy":           {"--ttl", "banana"},
		"purge":           {"--namespace"},
		"durable list":    {"--limit", "ten"},
		"durable inspect": {"--id", "x"},
	}
	commands := []string{"proxy", "migrate", "purge", "inspect", "version",
		"durable list", "durable inspect", "durable signal", "durable cancel", "durable retry", "durable stats", "durable buckets", "durable migrate"}
	for _, command := range commands {
		path := strings.Fields(command)
		help := runIdem(t, t.TempDir(), nil, append(slices.Clone(path), "-h")...)
		synopsis, _, _ := strings.Cut(help.stdout, "\n")
		if help.code != 0 || !strings.HasPrefix(synopsis, "usage: idem "+command) {
			t.Fatalf("idem %s -h: exit %d, stdout %q", command, help.code, help.stdout)
		}
		listed := "the flags"
		if command == "version" { // which has none
			listed = "its help"
		}
		mistakes := [][]string{{"--bogus"}}
		if b, ok := bad[command]; ok {
			mistakes = append(mistakes, b)
		}
		for _, m := range mistakes {
			args := append(slices.Clone(path), m...)
			r := runIdem(t, t.TempDir(), nil, args...)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if r.code != 2 || r.stdout != "" || len(lines) != 3 ||
				!strings.HasPrefix(lines[0], "idem "+command+": ") || !strings.Contains(lines[0], "-"+strings.TrimLeft(m[0], "-")) ||
				lines[1] != synopsis || lines[2] != "Run 'idem "+command+" -h' for "+listed+"." {
				t.Errorf("idem %q: exit %d, stdout %q, stderr:\n%s\nwant 2 and on stderr only: \"idem %s: \" naming %s, then %q, then \"Run 'idem %s -h' for %s.\"",
					args, r.code, r.stdout, r.stderr, command, m[0], synopsis, command, listed)
			}
		}
	}
}

// TestHelpSaysWhatACommandDoes: every command's and subcommand's -h opens
// with its usage line and what it does, as idem --help and idem durable
// --help summarize it, before its flags; idem durable list -h names the
// statuses --status takes.
func TestHelpSaysWhatACommandDoes(t *testing.T) {
	t.Parallel()
	summaries := map[string]string{} // "proxy", "durable list"… to the summary listed
	line := regexp.MustCompile(`(?m)^  (\w+) +(.+)$`)
	for _, prefix := range []string{"", "durable "} {
		r := runIdem(t, t.TempDir(), nil, strings.Fields(prefix+"--help")...)
		for _, m := range line.FindAllStringSubmatch(r.stdout, -1) {
			summaries[prefix+m[1]] = m[2]
		}
	}
	delete(summaries, "durable") // a command of subcommands, its help the list
	if len(summaries) < 12 {
		t.Fatalf("found the summaries of %d commands, want every command's: %v", len(summaries), summaries)
	}
	for command, summary := range summaries {
		r := runIdem(t, t.TempDir(), nil, append(strings.Fields(command), "-h")...)
		said := strings.ToLower(strings.Join(strings.Fields(r.stdout), " ")) // its lines joined
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: idem "+command) || !strings.Contains(said, strings.ToLower(summary)) {
			t.Errorf("idem %s -h: exit %d, stdout %q; want 0, opening with its usage line, saying %q", command, r.code, r.stdout, summary)
		}
	}
	r := runIdem(t, t.TempDir(), nil, "durable", "list", "-h")
	if !strings.Contains(r.stdout, "runnable, executing") || !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("idem durable list -h: %q; want the statuses --status takes", r.stdout)
	}
}

// TestMissingRequiredFlagIsAUsageError: a required flag left out is a
// usage mistake, as an unknown flag is: exit code 2 and a message naming
// the flag on stderr, nothing on stdout.
func TestMissingRequiredFlagIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy"}, "idem proxy: --upstream is required"},
		{[]string{"proxy", "--store", "memory", "--listen", "127.0.0.1:0"}, "idem proxy: --upstream is required"},
		{[]string{"inspect", "--store", "memory"}, "idem inspect: --key is required"},
		{[]string{"durable", "stats"}, "idem durable stats: --db URL (or IDEM_DB) is required"},
		{[]string{"durable", "signal", "--id", "1", "--db", "postgres://127.0.0.1:1/db"}, "idem durable signal: --name is required"},
		{[]string{"durable", "cancel", "--db", "postgres://127.0.0.1:1/db"}, "idem durable cancel: --id or --key is required"},
	} {
		r := runIdem(t, t.TempDir(), nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 2 and %q on stderr only", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestUsageMistakesExitTwo: flags that exclude each other, and a value a
// flag's type takes but the command does not, are usage mistakes as an
// unknown flag is: exit code 2 and the message on stderr, nothing on
// stdout, and nothing connected to (the databases named are unreachable).
func TestUsageMistakesExitTwo(t *testing.T) {
	t.Parallel()
	db := []string{"--db", "postgres://127.0.0.1:1/db"}
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory", "--listen", "127.0.0.1:0"}
	store := filepath.Join(t.TempDir(), "idem.db")
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", "sqlite:"+store); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{append(proxy, "--ttl", "0s"), nil, "idem proxy: --ttl 0s: want more than 0, such as 24h\n"},
		{proxy, []string{"IDEM_TTL=0"}, "idem proxy: --ttl 0s: want more than 0, such as 24h (--ttl from IDEM_TTL)\n"},
		{append(proxy, "--lease", "-1s"), nil, "idem proxy: --lease -1s: want more than 0, such as 30s\n"},
		{append(proxy, "--ttl", "10s"), nil, "idem proxy: --ttl 10s is shorter than --lease 30s"},
		{append(proxy, "--ttl", "1m", "--lease", "2m"), nil, "idem proxy: --ttl 1m0s is shorter than --lease 2m0s"},
		{proxy, []string{"IDEM_TTL=5s"}, "idem proxy: --ttl 5s is shorter than --lease 30s"},
		{proxy, []string{"IDEM_TTL=5s"}, "(--ttl from IDEM_TTL)\n"},
		{append(proxy, "--ttl", "5s"), []string{"IDEM_LEASE=10s"}, "or a shorter --lease (--lease from IDEM_LEASE)\n"},
		{append(proxy, "--timeout", "0s"), nil, "idem proxy: --timeout 0s: want more than 0, such as 1m\n"},
		{append(proxy, "--store-timeout", "0s"), nil, "idem proxy: --store-timeout 0s: want more than 0, such as 10s\n"},
		{proxy, []string{"IDEM_STORE_TIMEOUT=-1s"}, "idem proxy: --store-timeout -1s: want more than 0, such as 10s (--store-timeout from IDEM_STORE_TIMEOUT)\n"},
		{append(proxy, "--max-body", "-1"), nil, "idem proxy: --max-body -1: want a number of bytes more than 0, such as 1048576\n"},
		{append(proxy, "--max-capture", "0"), nil, "idem proxy: --max-capture 0: want a number of bytes more than 0, such as 1048576\n"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://127.0.0.1:1", "--listen", "127.0.0.1:0", "--max-capture", "300000000"}, nil,
			"idem proxy: --max-capture 300000000 is more than a Redis store records: at most 200539392"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://127.0.0.1:1", "--listen", "127.0.0.1:0"}, []string{"IDEM_MAX_CAPTURE=300000000"},
			"idem proxy: --max-capture 300000000 is more than a Redis store records: at most 200539392 (--max-capture from IDEM_MAX_CAPTURE)\n"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "sqlite:" + store, "--listen", "127.0.0.1:0", "--max-capture", "400000000"}, nil,
			"idem proxy: --max-capture 400000000 is more than a SQLite store records: at most 374212800"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "postgres://127.0.0.1:1/db", "--listen", "127.0.0.1:0", "--max-capture", "300000000"}, nil,
			"idem proxy: --max-capture 300000000 is more than a PostgreSQL store records: at most 200539392"},
		{append(proxy, "--purge-interval", "-1s"), nil, "idem proxy: --purge-interval -1s: want 0 (never) or more, such as 10m\n"},
		{append(proxy, "--shutdown-timeout", "0s"), nil, "idem proxy: --shutdown-timeout 0s: want more than 0, such as 30s\n"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory"}, []string{"IDEM_LISTEN=8080"},
			"idem proxy: --listen \"8080\": missing port in address; want host:port, such as 127.0.0.1:8080 (or :8080 for every interface) (--listen from IDEM_LISTEN)\n"},
		{proxy, []string{"IDEM_ADMIN=http://127.0.0.1:0"}, "idem proxy: --admin \"http://127.0.0.1:0\": want host:port, such as 127.0.0.1:8080, not a URL (--admin from IDEM_ADMIN)\n"},
		{append(proxy, "--namespace", "a b"), nil, "idem proxy: --namespace: \"a b\" has ' ' at byte 1 (allowed: a-z 0-9 - _)\n"},
		{append(proxy, "--namespace", ""), nil, "idem proxy: --namespace: empty\n"},
		{proxy, []string{"IDEM_NAMESPACE=A"}, "idem proxy: --namespace: \"A\" has 'A' at byte 0 (allowed: a-z 0-9 - _) (--namespace from IDEM_NAMESPACE)\n"},
		{proxy, []string{"IDEM_TTL=soon"}, "idem proxy: invalid value \"soon\" in IDEM_TTL"},
		// The flag package takes --migrate alone, and stops at "false".
		{append(proxy, "--migrate", "false", "--ttl", "1h"), nil, "idem proxy: --migrate takes no separate value: write --migrate=false (--migrate alone means true)"},
		{append(proxy, "-require-key", "0"), nil, "idem proxy: --require-key takes no separate value: write --require-key=0"},
		{[]string{"proxy", "--upstream", "ftp://x", "--store", "memory"}, nil, "idem proxy: --upstream \"ftp://x\" is not an absolute http or https URL"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/api?tenant=a", "--store", "memory"}, nil, "idem proxy: --upstream http://127.0.0.1:1/api?… has a query string"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "mongo://x"}, nil, "idem proxy: unknown store DSN"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "sqlite:"}, nil, "idem proxy: sqlite DSN has no path"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://:secret/x@127.0.0.1:1"}, nil, "idem proxy: bad redis DSN"},
		{[]string{"migrate", "--store", "postgres://127.0.0.1:99999/db"}, nil, "idem migrate: bad postgres DSN"},
		// Not the file idem.db: files named for the whole strings.
		{[]string{"migrate", "--store", "sqlite:file:idem.db"}, nil, `idem migrate: sqlite DSN "sqlite:file:idem.db": want sqlite:PATH`},
		{[]string{"migrate", "--store", "sqlite:idem.db?_pragma=busy_timeout(5000)"}, nil, "not a SQLite URI or parameters"},
		{[]string{"migrate", "--store", "sqlite:idem.db?cache=shared&mode=ro"}, nil, "not a SQLite URI or parameters"},
		{[]string{"migrate", "--store", "sqlite:idem.db?_busy_timeout=5000&_journal_mode=WAL"}, nil, "not a SQLite URI or parameters"},
		{[]string{"migrate", "--store", "sqlite:idem.db?_fk=1"}, nil, "not a SQLite URI or parameters"},
		{[]string{"migrate", "--store", "sqlite:idem.db?busy_timeout=5000"}, nil, "not a SQLite URI or parameters"},
		{[]string{"purge", "--store", "sqlite:" + store, "--namespace", "a b"}, nil, "idem purge: --namespace: \"a b\" has ' ' at byte 1 (allowed: a-z 0-9 - _)\n"},
		{[]string{"inspect", "--store", "sqlite:" + store, "--key", "k", "--namespace", "a.b"}, nil, "idem inspect: --namespace: \"a.b\" has '.' at byte 1 (allowed: a-z 0-9 - _)\n"},
		{[]string{"purge", "--store", "memory"}, nil, "idem purge: --store memory"},
		{[]string{"inspect", "--store", "sqlite:" + store, "--key", "k", "--scope", "s", "--authorization", "Bearer t"}, nil, "idem inspect: give --scope or --authorization, not both"},
		{[]string{"inspect", "--store", "sqlite:" + store, "--key", strings.Repeat("k", 1000)}, nil, "idem inspect: --key: key is 1000 bytes, the limit is 255\n"},
		{[]string{"inspect", "--store", "sqlite:" + store, "--key", "a\tb"}, nil, "idem inspect: --key: key has control character U+0009 at byte 1\n"},
		{append([]string{"durable", "inspect", "--id", "1", "--key", "k"}, db...), nil, "idem durable inspect: give --id or --key, not both"},
		{append([]string{"durable", "cancel", "--id", "1", "--key", "k"}, db...), nil, "idem durable cancel: give --id or --key, not both"},
		{append([]string{"durable", "retry", "--id", "1", "--key", "k"}, db...), nil, "idem durable retry: give --id or --key, not both"},
		{append([]string{"durable", "signal", "--name", "go", "--id", "1", "--key", "k"}, db...), nil, "idem durable signal: give --id or --key, not both"},
		{append([]string{"durable", "cancel", "--id", "-1"}, db...), nil, "idem durable cancel: --id -1"},
		{append([]string{"durable", "cancel"}, db...), []string{"IDEM_DURABLE_CANCEL_ID=-1"}, "idem durable cancel: --id -1: want an instance id, 1 or more (--id from IDEM_DURABLE_CANCEL_ID)\n"},
		// Ids are 1 or more: --id 0 is a value refused, not --id left out.
		{append([]string{"durable", "inspect", "--id", "0"}, db...), nil, "idem durable inspect: --id 0: want an instance id, 1 or more\n"},
		{append([]string{"durable", "inspect", "--id", "0", "--key", "k"}, db...), nil, "idem durable inspect: --id 0: want an instance id, 1 or more\n"},
		{append([]string{"durable", "signal", "--name", "go", "--id", "0"}, db...), nil, "idem durable signal: --id 0: want an instance id, 1 or more\n"},
		{append([]string{"durable", "retry", "--id", "0"}, db...), nil, "idem durable retry: --id 0: want an instance id, 1 or more\n"},
		{append([]string{"durable", "cancel"}, db...), []string{"IDEM_DURABLE_CANCEL_ID=0"}, "idem durable cancel: --id 0: want an instance id, 1 or more (--id from IDEM_DURABLE_CANCEL_ID)\n"},
		{append([]string{"durable", "list", "--after", "-3"}, db...), nil, "idem durable list: --after -3: want an instance id, 0 (from the first) or more\n"},
		{append([]string{"durable", "list"}, db...), []string{"IDEM_AFTER=-1"}, "idem durable list: --after -1: want an instance id, 0 (from the first) or more (--after from IDEM_AFTER)\n"},
		{append([]string{"durable", "signal", "--name", "go", "--id", "1", "--payload", "{"}, db...), nil, `idem durable signal: --payload "{": want a JSON value, such as '{"ok": true}' or null` + "\n"},
		{append([]string{"durable", "signal", "--name", "go", "--id", "1"}, db...), []string{"IDEM_PAYLOAD={"}, "(--payload from IDEM_PAYLOAD)\n"},
		{append([]string{"durable", "retry", "--id", "1", "--at", "tomorrow"}, db...), nil,
			`idem durable retry: --at "tomorrow": want an RFC 3339 time, such as 2026-11-27T10:00:00Z or 2026-11-27T11:00:00+01:00 (leave --at out for now)` + "\n"},
		{append([]string{"durable", "retry", "--id", "1"}, db...), []string{"IDEM_AT=2026-11-27"}, `idem durable retry: --at "2026-11-27": want an RFC 3339 time`},
		{append([]string{"durable", "retry", "--id", "1"}, db...), []string{"IDEM_AT=2026-11-27"}, "(leave --at out for now) (--at from IDEM_AT)\n"},
		{append([]string{"durable", "list", "--limit", "-1"}, db...), nil, "idem durable list: --limit -1: want 0 to 10000"},
		{append([]string{"durable", "list", "--limit", "10001"}, db...), nil, "idem durable list: --limit 10001"},
		{append([]string{"durable", "list"}, db...), []string{"IDEM_LIMIT=10001"}, "idem durable list: --limit 10001: want 0 to 10000 (--limit from IDEM_LIMIT)\n"},
		{append([]string{"durable", "list", "--status", "bogus"}, db...), nil, "idem durable list: --status \"bogus\": want one of runnable"},
		{append([]string{"durable", "list"}, db...), []string{"IDEM_STATUS=bogus"}, "cancelled (--status from IDEM_STATUS)\n"},
		{[]string{"durable", "stats", "--db", "postgres://127.0.0.1:99999/db"}, nil, "idem durable stats: bad postgres DSN"},
	} {
		r := runIdem(t, t.TempDir(), tc.env, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" || strings.Contains(r.stderr, "secret") {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 2 and %q on stderr only", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestVersion: idem version and idem --version print the version of the
// build and of Go on stdout.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		r := runIdem(t, t.TempDir(), nil, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "idem ") || !strings.Contains(r.stdout, " "+runtime.Version()+" ") || r.stderr != "" {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 0 and \"idem VERSION %s …\" on stdout", args, r.code, r.stdout, r.stderr, runtime.Version())
		}
	}
	for _, args := range [][]string{{"version", "-h"}, {"version", "--help"}, {"help", "version"}} {
		r := runIdem(t, t.TempDir(), nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Print the version of idem and of Go") || r.stderr != "" {
			t.Errorf("idem %q: exit %d, stdout %q, stderr %q; want 0 and what the command does on stdout", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runIdem(t, t.TempDir(), nil, "version", "extra"); r.code != 2 || !strings.Contains(r.stderr, "unexpected arguments") {
		t.Errorf("idem version extra: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
	if r := runIdem(t, t.TempDir(), nil, "--help"); !strings.Contains(r.stdout, "version") {
		t.Errorf("idem --help does not list version: %q", r.stdout)
	}
}

// TestRedisDownIsReportedOnce: with its Redis store down, the proxy logs
// the store errors through its own rate-limited lines only, not a line of
// the Redis client's per failed dial, and on its way out reports how many
// it left out; a command that cannot reach Redis prints its one error
// message.
func TestRedisDownIsReportedOnce(t *testing.T) {
	srv := redistest.Start(t)
	up := newCounting(t)
	p := startProxy(t, "--upstream", up.srv.URL, "--store", srv.URL())
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if r := send(t, p.base, fmt.Sprintf("down-%d", i), `{}`); r.status != 503 {
			t.Fatalf("store down: %+v, want 503", r)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.wait()
	// The two left out within the 10 s are reported, with the last, on
	// the way out: not lost with the process.
	if out := p.output.String(); strings.Count(out, "store_error") != 2 || !strings.Contains(out, "2 more errors since the last report, the last: POST /charges: store_error: ") || strings.Contains(out, "redis: ") {
		t.Errorf("proxy output:\n%s\nwant one store_error line, the next ones counted (reported at most every 10 s, and on exit), and none of the Redis client's own", out)
	}

	r := runIdem(t, t.TempDir(), nil, "purge", "--store", srv.URL())
	if r.code != 1 || !strings.HasPrefix(r.stderr, "idem purge: redis at ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("idem purge on a Redis that is down: exit %d, stderr %q; want 1 and one line", r.code, r.stderr)
	}
}

// TestSQLitePathProblems: a SQLite path in a directory that is not there,
// a path that is a directory, and a directory or database file this user
// may not write are each named as such, by every command that opens the
// store, instead of SQLite's "unable to open database file"; a proxy on a
// read-only database does not start to answer every request 503.
func TestSQLitePathProblems(t *testing.T) {
	// Root may write every file: then idem runs as nobody, from a copy of
	// the binary in a directory nobody may enter and write.
	work, err := os.MkdirTemp("", "idem-sqlite-paths-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, cred := idemBin, (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		exe, err := os.ReadFile(idemBin)
		if err != nil {
			t.Fatal(err)
		}
		bin, cred = filepath.Join(work, "idem"), &syscall.Credential{Uid: 65534, Gid: 65534} // nobody
		if err := os.WriteFile(bin, exe, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, path string, commands [][]string, want ...string) {
		t.Helper()
		for _, args := range commands {
			r := runIdemAs(t, bin, cred, work, nil, append(args, "--store", "sqlite:"+path)...)
			if r.code != 1 || strings.Contains(r.stderr, "unable to open") || strings.Contains(r.stderr, "readonly database") {
				t.Errorf("idem %s: exit %d, stderr %q; want 1 and no bare SQLite error", args[0], r.code, r.stderr)
			}
			for _, w := range want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("idem %s: stderr %q lacks %q", args[0], r.stderr, w)
				}
			}
		}
	}
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}
	check(t, filepath.Join(work, "no", "such", "idem.db"), [][]string{proxy, {"migrate"}},
		"there is no directory "+filepath.Join(work, "no", "such"), "mkdir -p")
	check(t, work, [][]string{proxy, {"migrate"}, {"purge"}},
		work+" is a directory", "sqlite:"+filepath.Join(work, "idem.db"))

	roDir := filepath.Join(work, "ro")
	if err := os.Mkdir(roDir, 0o555); err != nil {
		t.Fatal(err)
	}
	check(t, filepath.Join(roDir, "idem.db"), [][]string{proxy, {"migrate"}}, "may not create files in "+roDir)

	roFile := filepath.Join(work, "ro.db")
	if r := runIdem(t, work, nil, "migrate", "--store", "sqlite:"+roFile); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := os.Chmod(roFile, 0o444); err != nil {
		t.Fatal(err)
	}
	check(t, roFile, [][]string{proxy, {"migrate"}, {"purge"}}, roFile+": the file is read-only")
	// Reading needs no writing.
	if r := runIdemAs(t, bin, cred, work, nil, "inspect", "--key", "k", "--store", "sqlite:"+roFile); !strings.Contains(r.stderr, "no live record") {
		t.Errorf("idem inspect on a read-only database: exit %d, stderr %q; want it read", r.code, r.stderr)
	}
}

// TestProxyWithoutMigrateNeedsTheSchema: idem proxy --migrate=false on a
// store whose schema is not there (no SQLite database, no table) does not
// start, saying to run idem migrate, instead of answering every protected
// request 503 behind a healthy /healthz; on a migrated store it starts.
func TestProxyWithoutMigrateNeedsTheSchema(t *testing.T) {
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "missing.db"), filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil { // an empty file is an empty database
		t.Fatal(err)
	}
	pg := pgtest.URL(t)
	for _, store := range []string{"sqlite:" + missing, "sqlite:" + empty, pg} {
		r := runIdem(t, dir, nil, "proxy", "--migrate=false", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--store", store)
		if r.code != 1 || !strings.Contains(r.stderr, "--migrate=false") || !strings.Contains(r.stderr, "run idem migrate --store") {
			t.Errorf("--store %s: exit %d, stderr %q; want 1 and a message naming --migrate=false and idem migrate", store, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("idem proxy --migrate=false created %s (stat: %v)", missing, err)
	}

	if r := runIdem(t, dir, nil, "migrate", "--store", pg); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	up := newCounting(t)
	p := startProxy(t, "--migrate=false", "--upstream", up.srv.URL, "--store", pg)
	if r := send(t, p.base, "migrated-1", `{}`); r.status != 201 {
		t.Errorf("on a migrated store: %+v, want 201", r)
	}
}

// TestListenErrorsNameTheFlag: an address idem proxy cannot listen on is
// reported under the flag that gave it (--listen or --admin), saying what
// is wrong: in use (exit 1), or a URL, not host:port (usage mistakes, exit
// 2).
func TestListenErrorsNameTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	free := freeAddr(t)
	_, freePort, _ := net.SplitHostPort(free)
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{[]string{"--listen", busy}, nil, 1, "--listen " + busy + ": the address is already in use"},
		{[]string{"--listen", "127.0.0.1:0", "--admin", busy}, nil, 1, "--admin " + busy + ": the address is already in use"},
		// The proxy's own address, not another program's.
		{args: []string{"--listen", free, "--admin", free}, code: 2, want: "--admin " + free + " is the address the proxy listens on (--listen " + free + "): give --admin an address of its own"},
		{args: []string{"--listen", free, "--admin", ":" + freePort}, code: 2, want: "--admin :" + freePort + " is the address the proxy listens on"},
		{[]string{"--listen", "http://127.0.0.1:8080"}, nil, 2, `--listen "http://127.0.0.1:8080": want host:port`},
		{[]string{"--listen", "8080"}, nil, 2, `--listen "8080": missing port in address; want host:port`},
		// Empty, net.Listen would pick a port on every interface.
		{args: []string{"--listen", ""}, code: 2, want: "--listen is empty (on the command line or in IDEM_LISTEN): want host:port"},
		{env: []string{"IDEM_LISTEN="}, code: 2, want: "--listen is empty (on the command line or in IDEM_LISTEN): want host:port"},
	} {
		args := append([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory"}, tc.args...)
		if r := runIdem(t, t.TempDir(), tc.env, args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("idem %q %q: exit %d, stderr %q; want %d and %q", tc.env, args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// TestUpstreamMistakes: an --upstream without its scheme is refused with
// the URL meant; one naming the proxy's own address is refused at
// start-up, where each request would have been forwarded to the proxy
// again and again. Both are usage mistakes: exit code 2.
func TestUpstreamMistakes(t *testing.T) {
	self := freeAddr(t)
	_, port, _ := net.SplitHostPort(self)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream", "127.0.0.1:9000"}, "did you mean --upstream http://127.0.0.1:9000?"},
		{[]string{"--upstream", "localhost:9000"}, "did you mean --upstream http://localhost:9000?"},
		{[]string{"--upstream", "http://" + self, "--listen", self}, "is the address the proxy listens on"},
		{[]string{"--upstream", "http://localhost:" + port + "/api", "--listen", ":" + port}, "is the address the proxy listens on"},
		{[]string{"--upstream", "http://:" + port, "--listen", self}, "is the address the proxy listens on"},
		{[]string{"--upstream", "http://0.0.0.0:" + port, "--listen", self}, "is the address the proxy listens on"},
	} {
		args := append([]string{"proxy", "--store", "memory"}, tc.args...)
		if r := runIdem(t, t.TempDir(), nil, args...); r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("idem %q: exit %d, stderr %q; want 2 and %q", args, r.code, r.stderr, tc.want)
		}
	}
}

// TestRedisDSNOfAClusterNode: a redis:// DSN naming a node of a Redis
// Cluster is refused, by every command, with the redis-cluster:// DSN
// to give instead: used as a single server, the node would answer MOVED
// for the keys of the other nodes' slots, and the proxy 503 for most of
// its requests.
func TestRedisDSNOfAClusterNode(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	node := c.Addrs()[0]
	want := "redis at redis://" + node + " is a node of a Redis Cluster, which a redis:// DSN would use as a single server, the keys of the other nodes failing with MOVED: give the DSN redis-cluster://" + node
	for _, args := range [][]string{
		{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
		{"migrate"},
		{"purge"},
		{"inspect", "--key", "k"},
	} {
		args = append(args, "--store", "redis://"+node)
		if r := runIdem(t, t.TempDir(), nil, args...); r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("idem %q: exit %d, stderr %q; want 2 and %q", args, r.code, r.stderr, want)
		}
	}
	dsn := "redis-cluster://" + node
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", dsn); r.code != 0 {
		t.Errorf("idem migrate --store %s: exit %d, stderr %q; want 0", dsn, r.code, r.stderr)
	}
}

// TestRedisClusterNodeHintKeepsTheUser: the redis-cluster:// DSN suggested
// for a redis:// DSN naming a node of a Redis Cluster keeps the DSN's user,
// and its password hidden (xxxxx), saying so; with the password put back
// in, it opens the cluster.
func TestRedisClusterNodeHintKeepsTheUser(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	node := c.Addrs()[0]
	// The cluster's default user has no password, and takes any.
	r := runIdem(t, t.TempDir(), nil, "migrate", "--store", "redis://default:secret@"+node)
	hint := regexp.MustCompile(`give the DSN (redis-cluster://\S+) `)
	m := hint.FindStringSubmatch(r.stderr)
	if r.code != 2 || m == nil || m[1] != "redis-cluster://default:xxxxx@"+node || strings.Contains(r.stderr, "secret") ||
		!strings.Contains(r.stderr, "with the DSN's password in place of xxxxx (it is not shown here)") {
		t.Fatalf("idem migrate on a cluster node: exit %d, stderr %q; want 2 and the DSN redis-cluster://default:xxxxx@%s, saying the password is hidden", r.code, r.stderr, node)
	}
	dsn := strings.Replace(m[1], "xxxxx", "secret", 1)
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", dsn); r.code != 0 || !strings.Contains(r.stdout, "redis store") {
		t.Errorf("idem migrate --store %s: exit %d, stdout %q, stderr %q; want 0", dsn, r.code, r.stdout, r.stderr)
	}
}

// TestRedissCluster: a rediss-cluster:// DSN is a Redis Cluster over TLS:
// idem migrate and a proxy work through a TLS front to each node of a
// cluster that announces the fronts' addresses, with the certificate
// checked against the DSN's host name (the test's CA is made trusted by
// SSL_CERT_FILE); redis-cluster:// to the fronts, without TLS, does not.
func TestRedissCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	caFile, cfg := selfSignedTLS(t)
	var fronts []string
	for _, node := range c.Addrs() {
		front := tlsFront(t, cfg, node)
		fronts = append(fronts, front)
		_, port, _ := net.SplitHostPort(front)
		client := redis.NewClient(&redis.Options{Addr: node})
		err := client.ConfigSet(context.Background(), "cluster-announce-port", port).Err()
		_ = client.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each node learns the others' new ports by gossip.
	for _, node := range c.Addrs() {
		client := redis.NewClient(&redis.Options{Addr: node})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			nodes, err := client.ClusterNodes(context.Background()).Result()
			announced := err == nil
			for _, f := range fronts {
				announced = announced && strings.Contains(nodes, f+"@")
			}
			if announced {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not announce the fronts %v: %v\n%s", node, fronts, err, nodes)
			}
		}
		_ = client.Close()
	}
	env := []string{"SSL_CERT_FILE=" + caFile}
	dsn := "rediss-cluster://" + fronts[0] + "?addr=" + fronts[1]
	if r := runIdem(t, t.TempDir(), env, "migrate", "--store", dsn); r.code != 0 || !strings.Contains(r.stdout, "redis store") {
		t.Errorf("idem migrate --store %s: exit %d, stdout %q, stderr %q; want 0", dsn, r.code, r.stdout, r.stderr)
	}
	r := runIdem(t, t.TempDir(), env, "migrate", "--store", "redis-cluster://"+fronts[0]+"?dial_timeout=1s&max_retries=-1")
	if r.code != 1 || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("idem migrate --store redis-cluster:// to the TLS fronts: exit %d, stderr %q; want 1, unreachable", r.code, r.stderr)
	}
	up := newCounting(t)
	p := startProxyVia(t, []string{"env", "SSL_CERT_FILE=" + caFile}, "--upstream", up.srv.URL, "--store", dsn)
	for k := range 5 {
		key := fmt.Sprintf("tls-cluster-%d", k)
		r1, r2 := sendUntilDone(t, p.base, key, `{}`), sendUntilDone(t, p.base, key, `{}`)
		if r1.status != 201 || !r2.replayed || up.runs(key) != 1 {
			t.Fatalf("%s: %+v then %+v, %d runs; want one run, replayed", key, r1, r2, up.runs(key))
		}
	}
}

// selfSignedTLS makes a self-signed certificate for 127.0.0.1, its own
// CA, and returns the file of the CA in PEM and a server configuration
// presenting it.
func selfSignedTLS(t *testing.T) (caFile string, cfg *tls.Config) {
	t.Helper()
	der, key := selfSignedCert(t, 1)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// selfSignedCert makes a certificate for 127.0.0.1 with the serial
// number given, its own CA, and returns it (DER) and its key.
func selfSignedCert(t *testing.T, serial int64) (der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "idem test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key); err != nil {
		t.Fatal(err)
	}
	return der, key
}

// tlsFront serves TLS on an address of its own, which it returns, and
// relays each connection's bytes to and from target.
func tlsFront(t *testing.T, cfg *tls.Config, target string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
			wg.Go(func() { _, _ = io.Copy(in, out); _ = in.Close() })
		}
	})
	return ln.Addr().String()
}

// TestRedisPasswordHintKeepsTheScheme: a Redis server that wants a
// password the DSN does not give is reported with the form of DSN that
// gives one, in the DSN's own scheme.
func TestRedisPasswordHintKeepsTheScheme(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	err := client.ConfigSet(context.Background(), "requirepass", "secret").Err()
	_ = client.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"redis", "redis-cluster"} {
		r := runIdem(t, t.TempDir(), nil, "migrate", "--store", scheme+"://"+srv.Addr())
		want := "wants a password: give it in the DSN (" + scheme + "://:PASSWORD@host:port, or " + scheme + "://USER:PASSWORD@host:port for an ACL user)"
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("idem migrate --store %s://%s: exit %d, stderr %q; want 1 and %q", scheme, srv.Addr(), r.code, r.stderr, want)
		}
	}
}

// TestCommandLineWinsOverAnExcludedVariable: of two flags that exclude
// each other, one given on the command line wins over the other's
// variable, as it would over its own: the command runs (here to find no
// record, or no database) instead of refusing flags the user did not
// type together. Both on the command line are still refused.
func TestCommandLineWinsOverAnExcludedVariable(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "idem.db")
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", "sqlite:"+store); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	db := "postgres://127.0.0.1:1/db?connect_timeout=2"
	q := regexp.QuoteMeta
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string // a regular expression
	}{
		{[]string{"IDEM_AUTHORIZATION=Bearer t"}, []string{"inspect", "--store", "sqlite:" + store, "--key", "k", "--scope", "s"}, 1, q(`no live record for key "k" in namespace http (scope "s")`)},
		{[]string{"IDEM_SCOPE=s"}, []string{"inspect", "--store", "sqlite:" + store, "--key", "k", "--authorization", "Bearer t"}, 1, q(`no live record for key "k" in namespace http (scope "`) + `[0-9a-f]{32}"\)`},
		{[]string{"IDEM_DURABLE_CANCEL_KEY=k"}, []string{"durable", "cancel", "--id", "1", "--db", db}, 1, "unreachable"},
		{[]string{"IDEM_DURABLE_SIGNAL_ID=1"}, []string{"durable", "signal", "--name", "go", "--key", "k", "--db", db}, 1, "unreachable"},
		{[]string{"IDEM_DURABLE_SIGNAL_ID=0"}, []string{"durable", "signal", "--name", "go", "--key", "k", "--db", db}, 1, "unreachable"},
		{[]string{"IDEM_SCOPE=s", "IDEM_AUTHORIZATION=Bearer t"}, []string{"inspect", "--store", "sqlite:" + store, "--key", "k"}, 2, "give --scope or --authorization, not both"},
		{[]string{"IDEM_DURABLE_RETRY_KEY=k"}, []string{"durable", "retry", "--id", "1", "--key", "k2", "--db", db}, 2, "give --id or --key, not both"},
	} {
		r := runIdem(t, t.TempDir(), tc.env, tc.args...)
		if r.code != tc.code || !regexp.MustCompile(tc.want).MatchString(r.stderr) {
			t.Errorf("%q idem %q: exit %d, stderr %q; want %d and %s", tc.env, tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// TestReadOnlyPostgresIsRefused: a Postgres store whose transactions are
// read-only (a standby, a read replica; here default_transaction_read_only
// set by the DSN) is refused by the commands that write, the proxy
// first, which would otherwise answer 503 to every protected request
// behind a healthy /healthz; idem inspect, which only reads, uses it.
func TestReadOnlyPostgresIsRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	if r := runIdem(t, t.TempDir(), nil, "migrate", "--store", dsn); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	ro := dsn + "&default_transaction_read_only=on"
	if !strings.Contains(dsn, "?") {
		ro = dsn + "?default_transaction_read_only=on"
	}
	for _, args := range [][]string{
		{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
		{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--migrate=false"},
		{"migrate"},
		{"purge"},
	} {
		args = append(args, "--store", ro)
		if r := runIdem(t, t.TempDir(), nil, args...); r.code != 1 || !strings.Contains(r.stderr, "is read-only (a standby, a read replica, or default_transaction_read_only): the store writes a record for every request; give the DSN of the primary") {
			t.Errorf("idem %q: exit %d, stderr %q; want 1 and a message saying the server is read-only", args, r.code, r.stderr)
		}
	}
	if r := runIdem(t, t.TempDir(), nil, "inspect", "--key", "k", "--store", ro); r.code != 1 || !strings.Contains(r.stderr, `no live record for key "k"`) {
		t.Errorf("idem inspect on a read-only server: exit %d, stderr %q; want 1 and no live record", r.code, r.stderr)
	}
}

// TestRedisReplicaIsRefused: a redis:// DSN naming a replica is refused
// by the commands that write, the proxy first, which would otherwise
// answer 503 to every protected request (READONLY) behind a healthy
// /healthz; idem inspect, which only reads, uses it.
func TestRedisReplicaIsRefused(t *testing.T) {
	primary, replica := redistest.Start(t), redistest.Start(t)
	host, port, _ := net.SplitHostPort(primary.Addr())
	c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer c.Close()
	if err := c.ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.ReplicaOf(context.Background(), "NO", "ONE")
	for _, args := range [][]string{
		{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
		{"purge"},
	} {
		args = append(args, "--store", replica.URL())
		if r := runIdem(t, t.TempDir(), nil, args...); r.code != 1 || !strings.Contains(r.stderr, "redis at "+replica.URL()+" is a replica: the store writes a record for every request; give the DSN of its primary") {
			t.Errorf("idem %q: exit %d, stderr %q; want 1 and a message saying the server is a replica", args, r.code, r.stderr)
		}
	}
	if r := runIdem(t, t.TempDir(), nil, "inspect", "--key", "k", "--store", replica.URL()); r.code != 1 || !strings.Contains(r.stderr, `no live record for key "k"`) {
		t.Errorf("idem inspect on a replica: exit %d, stderr %q; want 1 and no live record", r.code, r.stderr)
	}
}

// TestReadCommandsRefuseTheMemoryStore: idem inspect and idem purge with
// --store memory say that the memory store lives inside its proxy,
// instead of reporting on a new, empty store ("no live record", "purged
// 0"), as a usage mistake (exit code 2). idem migrate --store memory
// succeeds, saying there is no schema, as for Redis: what it reports is
// true of every memory store, the proxy's too, so a deployment that runs
// idem migrate before idem proxy with one IDEM_STORE works unchanged.
func TestReadCommandsRefuseTheMemoryStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"inspect", "--key", "k"}, {"purge"}} {
		r := runIdem(t, t.TempDir(), nil, append(args, "--store", "memory")...)
		if r.code != 2 || !strings.Contains(r.stderr, "lives and ends inside the idem proxy") || r.stdout != "" {
			t.Errorf("idem %s --store memory: exit %d, stdout %q, stderr %q; want 2 and a message saying where the memory store lives", args[0], r.code, r.stdout, r.stderr)
		}
	}
	r := runIdem(t, t.TempDir(), []string{"IDEM_STORE=memory"}, "migrate")
	if r.code != 0 || r.stdout != "memory store: no schema to migrate\n" || r.stderr != "" {
		t.Errorf("IDEM_STORE=memory idem migrate: exit %d, stdout %q, stderr %q; want 0 and \"memory store: no schema to migrate\" on stdout only", r.code, r.stdout, r.stderr)
	}
}

// TestInterruptWhileConnecting: SIGINT or SIGTERM while a command waits
// for its store's server to answer ends it saying it was interrupted,
// not that the server is unreachable.
func TestInterruptWhileConnecting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args func(addr string) []string
		sig  syscall.Signal
		want string
	}{
		{func(a string) []string {
			return []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--store", "postgres://u@" + a + "/x"}
		}, syscall.SIGINT, "interrupted while connecting to postgres at "},
		{func(a string) []string { return []string{"migrate", "--store", "redis://" + a} }, syscall.SIGTERM, "interrupted while connecting to redis at redis://"},
		{func(a string) []string { return []string{"durable", "stats", "--db", "postgres://u@" + a + "/x"} }, syscall.SIGTERM, "interrupted while connecting to postgres at "},
	} {
		addr, accepted := hungServer(t)
		cmd := exec.Command(idemBin, tc.args(addr)...)
		cmd.Dir = t.TempDir()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-accepted:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("idem %q never connected", cmd.Args)
		}
		_ = cmd.Process.Signal(tc.sig)
		err := cmd.Wait()
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), tc.want+addr) || strings.Contains(stderr.String(), "unreachable") {
			t.Errorf("idem %q after %v: %v, stderr %q; want exit 1 and %q", cmd.Args, tc.sig, err, stderr.String(), tc.want+addr)
		}
	}
}

// hungServer is a TCP server that accepts connections and never answers
// them, as a hung database would; accepted is closed at its first
// connection.
func hungServer(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if conns = append(conns, c); len(conns) == 1 {
				close(first)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), first
}

// TestConnectErrorsAreOneLine: a store that cannot be connected to is
// reported in one line, with exit code 1: a Postgres server that cannot be
// reached at several addresses or with and without TLS (pgconn's error
// lists each attempt on a line of its own), and a Redis server that wants
// a password the DSN does not give, or gives wrong, which is said to
// refuse the password, not to be unreachable.
func TestConnectErrorsAreOneLine(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	if err := rc.ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	wrong, _ := url.Parse(srv.URL())
	wrong.User = url.UserPassword("", "secret")
	for _, tc := range []struct {
		name, store string
		want, not   string
	}{
		{"postgres unreachable", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=2", "unreachable", ""},
		{"redis without a password", srv.URL(), "password", "unreachable"},
		{"redis with a wrong password", wrong.String(), "password", "unreachable"},
	} {
		for _, args := range [][]string{{"purge"}, {"proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1"}} {
			r := runIdem(t, t.TempDir(), nil, append(args, "--store", tc.store)...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) || tc.not != "" && strings.Contains(r.stderr, tc.not) || strings.Contains(r.stderr, "secret") {
				t.Errorf("%s: idem %s: exit %d, stderr %q; want 1 and one line saying %q, without %q or the password", tc.name, args[0], r.code, r.stderr, tc.want, tc.not)
			}
		}
	}
}

// TestForeignTableOfTheSameName: on a database where another program has
// a table named as the store's (idempotency_record), idem migrate, purge,
// inspect and proxy fail with exit 1, in one line saying that the table is
// not the store's, instead of calling the store unavailable over a missing
// column; and they leave the table as it was.
func TestForeignTableOfTheSameName(t *testing.T) {
	sqlitePath := filepath.Join(t.TempDir(), "app.db")
	pgURL := pgtest.URL(t)
	for _, tc := range []struct {
		store string
		exec  func(q string) error
	}{
		{"sqlite:" + sqlitePath, func(q string) error {
			db, err := sql.Open("sqlite", sqlitePath)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(q)
			return err
		}},
		{pgURL, func(q string) error {
			conn, err := pgx.Connect(context.Background(), pgURL)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), q)
			return err
		}},
	} {
		if err := tc.exec(`CREATE TABLE idempotency_record (id integer PRIMARY KEY, name text)`); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"migrate"}, {"purge"}, {"inspect", "--key", "k"},
			{"proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1"},
			{"proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--migrate=false"},
		} {
			r := runIdem(t, t.TempDir(), nil, append(args, "--store", tc.store)...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "table idempotency_record is not the idem store's") || strings.Contains(r.stderr, "unavailable") {
				t.Errorf("idem %q: exit %d, stderr %q; want 1 and one line saying the table is not the store's", append(args, "--store", tc.store), r.code, r.stderr)
			}
		}
		if err := tc.exec(`INSERT INTO idempotency_record (id, name) VALUES (1, 'kept')`); err != nil {
			t.Errorf("%s: the table was changed: %v", tc.store, err)
		}
	}
}

// TestKeyAndIDVariablesArePerCommand: --key and --id are read from
// variables naming the command. An IDEM_KEY or IDEM_ID, or another
// command's variable, picks nothing for idem durable cancel (it is
// refused for want of a target, before any connection, with a warning
// naming its own variable) nor for idem inspect; the command's own
// variable does pick the target.
func TestKeyAndIDVariablesArePerCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "sqlite:" + filepath.Join(dir, "idem.db")
	if r := runIdem(t, dir, nil, "migrate", "--store", store); r.code != 0 {
		t.Fatalf("idem migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	cancel := []string{"durable", "cancel", "--db", "postgres://127.0.0.1:1/db"}
	inspect := []string{"inspect", "--store", store}
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want []string
	}{
		{cancel, []string{"IDEM_KEY=order:1"}, 2, []string{"idem durable cancel: --id or --key is required", "IDEM_KEY is ignored: idem durable cancel reads --key from IDEM_DURABLE_CANCEL_KEY"}},
		{cancel, []string{"IDEM_ID=1"}, 2, []string{"idem durable cancel: --id or --key is required", "IDEM_ID is ignored: idem durable cancel reads --id from IDEM_DURABLE_CANCEL_ID"}},
		{cancel, []string{"IDEM_INSPECT_KEY=order:1", "IDEM_DURABLE_INSPECT_ID=1", "IDEM_DURABLE_LIST_KEY=order:1"}, 2, []string{"idem durable cancel: --id or --key is required"}},
		{cancel, []string{"IDEM_DURABLE_CANCEL_KEY=order:1"}, 1, []string{"idem durable cancel: postgres at 127.0.0.1:1 is unreachable"}},
		{cancel, []string{"IDEM_DURABLE_CANCEL_ID=1"}, 1, []string{"unreachable"}},
		{inspect, []string{"IDEM_KEY=k"}, 2, []string{"idem inspect: --key is required", "IDEM_KEY is ignored: idem inspect reads --key from IDEM_INSPECT_KEY"}},
		{inspect, []string{"IDEM_DURABLE_LIST_KEY=k"}, 2, []string{"idem inspect: --key is required"}},
		{inspect, []string{"IDEM_INSPECT_KEY=k"}, 1, []string{`no live record for key "k"`}},
	} {
		r := runIdem(t, dir, tc.env, tc.args...)
		ok := r.code == tc.code
		for _, w := range tc.want {
			ok = ok && strings.Contains(r.stderr, w)
		}
		if warned := strings.Contains(r.stderr, "warning"); warned != (len(tc.want) > 1) {
			ok = false
		}
		if !ok {
			t.Errorf("idem %q with %q: exit %d, stderr %q; want %d and %q", tc.args, tc.env, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// TestUnreadVariablesAreWarnedAbout: an IDEM_* variable that no command
// reads is named, with the command, in a warning on stderr, and the
// command runs as without it; a variable of another command's flag is
// no mistake and is not warned about.
func TestUnreadVariablesAreWarnedAbout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "sqlite:" + filepath.Join(dir, "idem.db")
	r := runIdem(t, dir, []string{"IDEM_STROE=memory", "IDEM_UPSTREAM=http://127.0.0.1:1", "IDEM_DB=postgres://127.0.0.1:1/db"}, "migrate", "--store", store)
	want := "idem migrate: warning: IDEM_STROE is ignored: no idem command has a flag of that name\n"
	if r.code != 0 || r.stderr != want || !strings.Contains(r.stdout, "schema up to date") {
		t.Errorf("idem migrate with IDEM_STROE: exit %d, stdout %q, stderr %q; want 0, the migration, and stderr %q", r.code, r.stdout, r.stderr, want)
	}
	r = runIdem(t, dir, []string{"IDEM_UPSTRAEM=http://127.0.0.1:1"}, "proxy", "--store", "memory")
	if r.code != 2 || !strings.Contains(r.stderr, "idem proxy: warning: IDEM_UPSTRAEM is ignored") || !strings.Contains(r.stderr, "--upstream is required") {
		t.Errorf("idem proxy with IDEM_UPSTRAEM: exit %d, stderr %q; want 2, a warning naming IDEM_UPSTRAEM and --upstream is required", r.code, r.stderr)
	}
}

// TestStoreDSNMistakesSayWhatWasMeant: a --store left empty (IDEM_STORE=
// in a deployment's environment) is named as such, with the variable, and
// a --store that is a database file's path without "sqlite:" is refused
// with the DSN that was likely meant; both are usage mistakes (exit 2),
// for each command that opens a store.
func TestStoreDSNMistakesSayWhatWasMeant(t *testing.T) {
	proxy := []string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}
	for _, args := range [][]string{proxy, {"migrate"}, {"purge"}, {"inspect", "--key", "k"}} {
		r := runIdem(t, t.TempDir(), []string{"IDEM_STORE="}, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--store is empty (on the command line or in IDEM_STORE)") {
			t.Errorf("IDEM_STORE= idem %s: exit %d, stderr %q; want 2, saying --store is empty", args[0], r.code, r.stderr)
		}
		for _, path := range []string{"idem.db", "/var/lib/idem/idem.db", "./data/store.sqlite3"} {
			r := runIdem(t, t.TempDir(), nil, append(args, "--store", path)...)
			if want := "did you mean --store sqlite:" + path + "?"; r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("idem %s --store %s: exit %d, stderr %q; want 2 and %q", args[0], path, r.code, r.stderr, want)
			}
		}
	}
}
