package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testFlags is a flag set with one flag of each kind the commands use.
func testFlags(out *bytes.Buffer) (*flag.FlagSet, *bool, *time.Duration) {
	fs := flag.NewFlagSet("idem test", flag.ContinueOnError)
	fs.SetOutput(out)
	b := fs.Bool("require-key", false, "a boolean")
	d := fs.Duration("ttl", time.Hour, "a duration")
	fs.Int64("max-body", 10, "an integer")
	fs.String("store", "memory", "a string")
	return fs, b, d
}

func noEnv(string) (string, bool) { return "", false }

// TestParseErrorsSayWhatIsAccepted: a value a flag or its IDEM_*
// variable cannot take is reported with what the flag accepts, not the
// flag package's bare "parse error". A flag's mistake is followed by the
// usage line and where the flags are listed, not by the whole help, which
// would scroll the mistake away; the whole help, asked for with -h, is
// the flag package's own, from its own values.
func TestParseErrorsSayWhatIsAccepted(t *testing.T) {
	var plain bytes.Buffer
	ref, _, _ := testFlags(&plain)
	ref.Usage()
	usageLine, _, _ := strings.Cut(plain.String(), "\n")

	var help bytes.Buffer
	fs, _, _ := testFlags(&help)
	if err := parse(fs, []string{"-h"}, noEnv); !errors.Is(err, flag.ErrHelp) || help.String() != plain.String() {
		t.Errorf("-h: %v, help:\n%s\nwant flag.ErrHelp and the flag package's:\n%s", err, help.String(), plain.String())
	}

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"bool flag", []string{"--require-key=yes"}, nil, []string{`"yes"`, "-require-key", "true or false", "1/0"}},
		{"bool variable", nil, map[string]string{"IDEM_REQUIRE_KEY": "yes"}, []string{`"yes"`, "IDEM_REQUIRE_KEY", "--require-key", "true or false", "1/0"}},
		{"duration flag", []string{"--ttl", "soon"}, nil, []string{`"soon"`, "-ttl", "a duration such as 30s or 24h"}},
		{"duration variable", nil, map[string]string{"IDEM_TTL": "10"}, []string{`"10"`, "IDEM_TTL", "a duration such as 30s or 24h"}},
		{"integer flag", []string{"--max-body", "1MB"}, nil, []string{`"1MB"`, "-max-body", "a whole number"}},
		{"integer out of range", []string{"--max-body", "99999999999999999999"}, nil, []string{"-max-body", "out of range", "a whole number"}},
		{"integer variable", nil, map[string]string{"IDEM_MAX_BODY": "ten"}, []string{`"ten"`, "IDEM_MAX_BODY", "a whole number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			fs, _, _ := testFlags(&out)
			err := parse(fs, tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err == nil {
				t.Fatal("no error")
			}
			msg := out.String()
			if err != errUsage {
				msg = err.Error()
			} else if lines := strings.Split(msg, "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "idem test: ") ||
				lines[1] != usageLine || lines[2] != "Run 'idem test -h' for the flags." || lines[3] != "" {
				t.Errorf("after the error:\n%s\nwant one line naming it, %q and \"Run 'idem test -h' for the flags.\"", msg, usageLine)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "parse error") {
				t.Errorf("message %q still says only parse error", msg)
			}
		})
	}
}

// TestCommandLineOverridesABadVariable: the command line wins over the
// environment, also over a variable whose value the flag cannot take:
// an IDEM_TTL=10 left in the environment does not stop --ttl 90s.
func TestCommandLineOverridesABadVariable(t *testing.T) {
	var out bytes.Buffer
	fs, _, d := testFlags(&out)
	env := func(k string) (string, bool) {
		if k == "IDEM_TTL" {
			return "10", true
		}
		return "", false
	}
	if err := parse(fs, []string{"--ttl", "90s"}, env); err != nil || *d != 90*time.Second {
		t.Fatalf("--ttl 90s with IDEM_TTL=10: %v, ttl %v; want nil, 1m30s", err, *d)
	}
}

// TestParseKeepsFlags: the explaining wrappers change no value: a bare
// boolean flag is still true, valid values are set, and the flags hold
// the flag package's own values again afterwards.
func TestParseKeepsFlags(t *testing.T) {
	var out bytes.Buffer
	fs, b, d := testFlags(&out)
	env := func(k string) (string, bool) {
		if k == "IDEM_TTL" {
			return "90s", true
		}
		return "", false
	}
	if err := parse(fs, []string{"--require-key"}, env); err != nil {
		t.Fatalf("parse: %v\n%s", err, out.String())
	}
	if !*b || *d != 90*time.Second {
		t.Errorf("require-key %v, ttl %v; want true, 1m30s", *b, *d)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(explained); ok {
			t.Errorf("flag %s keeps its wrapper after parse", f.Name)
		}
	})
	if err := parse(fs, []string{"--require-key=false"}, noEnv); err != nil || *b {
		t.Errorf("--require-key=false: %v, value %v", err, *b)
	}
}

// TestPostgresConnectErrors: a failed first connection to Postgres is
// told apart by its SQLSTATE (no database, authentication failed, other
// refusal) from a server that cannot be reached, and no message shows the
// password.
func TestPostgresConnectErrors(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://alice:secret@db.example:5433/shop")
	if err != nil {
		t.Fatal(err)
	}
	pg := func(code, msg string) error {
		return fmt.Errorf("failed to connect to `user=alice database=shop`: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: msg})
	}
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"no database", pg("3D000", `database "shop" does not exist`), []string{"db.example:5433", `no database "shop"`, "createdb"}},
		{"wrong password", pg("28P01", `password authentication failed for user "alice"`), []string{"db.example:5433", `authentication failed for user "alice"`, "password"}},
		{"no such role", pg("28000", `role "alice" does not exist`), []string{"db.example:5433", `authentication failed for user "alice"`, `role "alice" does not exist`}},
		{"too many connections", pg("53300", "sorry, too many clients already"), []string{"db.example:5433", "refused the connection", "too many clients"}},
		{"unreachable", fmt.Errorf("failed to connect: %w", syscall.ECONNREFUSED), []string{"db.example:5433", "unreachable"}},
		// A server that takes the connection and says nothing (stopped, a
		// port that is not Postgres's): how long it was given is said.
		{"unreachable, silent", context.DeadlineExceeded, []string{"db.example:5433", "unreachable", "did not answer within 10s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pgConnectError(&cfg.ConnConfig.Config, tc.err)
			msg := got.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if !strings.HasPrefix(tc.name, "unreachable") && strings.Contains(msg, "unreachable") {
				t.Errorf("%q calls a server that answered unreachable", msg)
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("%q shows the password", msg)
			}
			if !errors.Is(got, tc.err) && !errors.Is(got, errors.Unwrap(tc.err)) {
				t.Errorf("%v does not wrap the cause", got)
			}
		})
	}
}

// TestCreatedbHintIsQuoted: the createdb command suggested for a
// database that is not there quotes a name the shell would take apart.
func TestCreatedbHintIsQuoted(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("host=db.example dbname='my shop'")
	if err != nil {
		t.Fatal(err)
	}
	msg := pgConnectError(&cfg.ConnConfig.Config, &pgconn.PgError{Severity: "FATAL", Code: "3D000", Message: `database "my shop" does not exist`}).Error()
	if !strings.Contains(msg, "(createdb 'my shop')") {
		t.Errorf("%q lacks (createdb 'my shop')", msg)
	}
}

// vcs is the build settings of key-value pairs kv, as Go records the
// version control information of a build from a checkout.
func vcs(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

// TestVersionLine: idem version prints the module version, or (devel)
// when the build has none, followed then by the commit it was built from
// (its first 12 hex digits), the commit's time and whether the checkout
// had uncommitted changes, when Go recorded them; and the Go version.
func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem", Version: "v1.2.3"}}, true, "idem v1.2.3 go1.26.8 "},
		{"no version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem"}}, true, "idem (devel) go1.26.8 "},
		{"no build info", nil, false, "idem (devel) " + runtime.Version() + " "},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem", Version: "(devel)"}, Settings: vcs(
			"vcs.revision", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "vcs.time", "2026-11-27T10:00:00Z", "vcs.modified", "false")},
			true, "idem (devel) rev 1a2b3c4d5e6f (2026-11-27T10:00:00Z) go1.26.8 "},
		{"checkout modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem", Version: "(devel)"}, Settings: vcs(
			"vcs.revision", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "vcs.time", "2026-11-27T10:00:00Z", "vcs.modified", "true")},
			true, "idem (devel) rev 1a2b3c4d5e6f (2026-11-27T10:00:00Z, uncommitted changes) go1.26.8 "},
		{"checkout without time", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem"}, Settings: vcs(
			"vcs.revision", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "vcs.modified", "true")},
			true, "idem (devel) rev 1a2b3c4d5e6f (uncommitted changes) go1.26.8 "},
		{"short revision", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem"}, Settings: vcs(
			"vcs.revision", "r42", "vcs.modified", "false")},
			true, "idem (devel) rev r42 go1.26.8 "},
		// A module version says which commit already (a pseudo-version
		// names it, +dirty for uncommitted changes): nothing is added.
		{"pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem", Version: "v0.0.0-20261127100000-1a2b3c4d5e6f+dirty"}, Settings: vcs(
			"vcs.revision", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "vcs.time", "2026-11-27T10:00:00Z", "vcs.modified", "true")},
			true, "idem v0.0.0-20261127100000-1a2b3c4d5e6f+dirty go1.26.8 "},
		{"no commit yet", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/idemgo/idem", Version: "(devel)"}, Settings: vcs(
			"vcs", "git", "vcs.modified", "true")},
			true, "idem (devel) go1.26.8 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := versionLine(tc.bi, tc.ok)
			if want := tc.want + runtime.GOOS + "/" + runtime.GOARCH + "\n"; got != want {
				t.Errorf("versionLine = %q, want %q", got, want)
			}
		})
	}
}

// TestCommandFlags: commandFlags, from which the variables any command
// reads are known, lists every command and subcommand with the variables
// it reads; and a flag several commands have is either one that means the
// same in each (one variable) or a perCommand one (a variable naming the
// command), so that no variable is taken up by a command it was not meant
// for.
func TestCommandFlags(t *testing.T) {
	paths := map[string]bool{}
	for _, c := range commands() {
		if c.name != "durable" {
			paths[c.name] = true
		}
	}
	for _, sub := range durableSubs() {
		paths["durable "+sub.name] = true
	}
	for p := range commandFlags {
		if !paths[p] {
			t.Errorf("commandFlags has %q, which is no command", p)
		}
	}
	commandsOf := map[string][]string{} // flag name → the commands that have it
	for p := range paths {
		flags, ok := commandFlags[p]
		if !ok {
			t.Errorf("commandFlags lacks %q", p)
			continue
		}
		var read []string
		getenv := func(name string) (string, bool) { read = append(read, name); return "", false }
		if code := run(context.Background(), append(strings.Fields(p), "-h"), io.Discard, io.Discard, getenv, nil); code != 0 {
			t.Errorf("idem %s -h: exit %d", p, code)
		}
		var want []string
		for _, f := range flags {
			want = append(want, envName(p, f))
			commandsOf[f] = append(commandsOf[f], p)
		}
		slices.Sort(read)
		slices.Sort(want)
		if !slices.Equal(read, want) {
			t.Errorf("idem %s reads %q; commandFlags gives %q", p, read, want)
		}
	}
	same := map[string]bool{"store": true, "namespace": true, "scope-by": true, "db": true} // the same thing in every command
	for f, cs := range commandsOf {
		if len(cs) > 1 && !same[f] && !perCommand[f] {
			t.Errorf("--%s, a flag of %q, is neither one variable for all nor per command", f, cs)
		}
	}
	for name, want := range map[[2]string]string{
		{"proxy", "upstream"}: "IDEM_UPSTREAM", {"proxy", "require-key"}: "IDEM_REQUIRE_KEY", {"inspect", "store"}: "IDEM_STORE",
		{"durable list", "db"}: "IDEM_DB", {"inspect", "key"}: "IDEM_INSPECT_KEY", {"durable list", "key"}: "IDEM_DURABLE_LIST_KEY",
		{"durable cancel", "id"}: "IDEM_DURABLE_CANCEL_ID",
	} {
		if got := envName(name[0], name[1]); got != want {
			t.Errorf("envName(%q, %q) = %s, want %s", name[0], name[1], got, want)
		}
	}
}

// TestWarnUnread: each IDEM_* variable that no command reads is named in
// one warning line with the command; a variable of another command's
// flag, a variable of no IDEM_ prefix and Kubernetes's service variables
// are not. IDEM_KEY and IDEM_ID are told apart from typos: the warning
// names the variable the command reads instead, or those of the commands
// that have the flag.
func TestWarnUnread(t *testing.T) {
	for _, tc := range []struct {
		command string
		environ []string
		want    []string // one a line
	}{
		{"proxy", []string{"IDEM_UPSTRAEM=http://x", "IDEM_UPSTREAM=http://y", "HOME=/root"},
			[]string{"idem proxy: warning: IDEM_UPSTRAEM is ignored: no idem command has a flag of that name"}},
		{"migrate", []string{"IDEM_UPSTREAM=http://y", "IDEM_DB=postgres://x", "IDEM_INSPECT_KEY=k", "IDEM_TTL=1h", "IDEM_STORE=memory"}, nil},
		{"proxy", []string{"IDEM_SERVICE_HOST=10.0.0.1", "IDEM_SERVICE_PORT=80", "IDEM_SERVICE_PORT_HTTP=80", "IDEM_PORT=tcp://10.0.0.1:80",
			"IDEM_PORT_80_TCP=tcp://10.0.0.1:80", "IDEM_PORT_80_TCP_ADDR=10.0.0.1", "IDEM_PROXY_SERVICE_HOST=10.0.0.2"}, nil},
		{"inspect", []string{"IDEM_KEY=k"}, []string{"idem inspect: warning: IDEM_KEY is ignored: idem inspect reads --key from IDEM_INSPECT_KEY"}},
		{"durable cancel", []string{"IDEM_ID=7"}, []string{"idem durable cancel: warning: IDEM_ID is ignored: idem durable cancel reads --id from IDEM_DURABLE_CANCEL_ID"}},
		{"durable list", []string{"IDEM_ID=7"},
			[]string{"idem durable list: warning: IDEM_ID is ignored: --id is read from a variable naming the command: IDEM_DURABLE_CANCEL_ID, IDEM_DURABLE_INSPECT_ID, IDEM_DURABLE_RETRY_ID, IDEM_DURABLE_SIGNAL_ID"}},
		{"purge", []string{"IDEM_Z=1", "IDEM_A=1", "IDEM_A=2"},
			[]string{"idem purge: warning: IDEM_A is ignored: no idem command has a flag of that name", "idem purge: warning: IDEM_Z is ignored: no idem command has a flag of that name"}},
	} {
		var out bytes.Buffer
		warnUnread(&out, tc.command, tc.environ)
		var got []string
		if out.Len() > 0 {
			got = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("idem %s with %q warns:\n%s\nwant:\n%s", tc.command, tc.environ, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
