package main_test

// End-to-end tests of idem durable: they run the binary TestMain builds.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/pgtest"
)

// durableRun is the outcome of one idem durable command.
type durableRun struct {
	stdout, stderr string
	code           int // the exit code; -1 when killed
	took           time.Duration
}

// runDurable runs idem durable args with no IDEM_* variable from the
// test's environment, and kills it after limit.
func runDurable(t *testing.T, limit time.Duration, args ...string) durableRun {
	t.Helper()
	return runDurableEnv(t, limit, nil, args...)
}

// runDurableEnv is runDurable with env added to the environment.
func runDurableEnv(t *testing.T, limit time.Duration, env []string, args ...string) durableRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, idemBin, append([]string{"durable"}, args...)...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := durableRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("idem durable %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("idem durable %q still ran after %v; stderr: %s", args, limit, r.stderr)
	}
	return r
}

// silentServer is a TCP server that accepts connections and never answers
// them, as a hung database would (hungServer).
func silentServer(t *testing.T) string {
	t.Helper()
	addr, _ := hungServer(t)
	return addr
}

// TestDurableConnectTimeout: a database that accepts the connection but
// never answers is given up on, as idem migrate gives up on it, rather
// than waited for for ever.
func TestDurableConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	r := runDurable(t, 40*time.Second, "list", "--db", "postgres://u:secret@"+addr+"/x")
	if r.code != 1 || !strings.Contains(r.stderr, "unreachable") {
		t.Fatalf("exit %d after %v, stderr %q; want exit 1 saying the database is unreachable", r.code, r.took, r.stderr)
	}
	if r.took > 20*time.Second {
		t.Errorf("gave up after %v; want about 10 s, as idem migrate", r.took)
	}
	if strings.Contains(r.stderr, "secret") {
		t.Errorf("stderr leaks the password: %s", r.stderr)
	}
}

// durableFlags are the subcommands of idem durable, each with a flag of
// its own that its help must show.
var durableFlags = map[string]string{
	"list":    "-status",
	"inspect": "-key",
	"signal":  "-name",
	"cancel":  "-reason",
	"retry":   "-at",
	"stats":   "-db",
	"buckets": "-db",
	"migrate": "-db",
}

// TestDurableRefusedConnection: a server that answers but refuses the
// connection is reported as the store commands report it, not as
// unreachable.
func TestDurableRefusedConnection(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/idem_no_such_database"
	r := runDurable(t, 30*time.Second, "list", "--db", u.String())
	if r.code != 1 || !strings.Contains(r.stderr, `idem durable list: postgres at `) || !strings.Contains(r.stderr, `has no database "idem_no_such_database"`) {
		t.Fatalf("exit %d, stderr %q; want 1, naming the subcommand and the missing database", r.code, r.stderr)
	}
}

// TestDurableHelp: -h and --help print a subcommand's flags to stdout and
// exit 0, without --db, as idem proxy -h does; idem durable -h lists the
// subcommands. Usage printed because of a mistake goes to stderr, exit 2.
func TestDurableHelp(t *testing.T) {
	t.Parallel()
	for sub, own := range durableFlags {
		for _, h := range []string{"-h", "--help"} {
			r := runDurable(t, 30*time.Second, sub, h)
			if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "idem durable "+sub) || !strings.Contains(r.stdout, "-db") || !strings.Contains(r.stdout, own) {
				t.Errorf("idem durable %s %s: exit %d, stdout %q, stderr %q; want 0 and its flags on stdout, %s among them", sub, h, r.code, r.stdout, r.stderr, own)
			}
		}
		// idem help durable <sub> is idem durable <sub> --help.
		r := runIdem(t, t.TempDir(), nil, "help", "durable", sub)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "idem durable "+sub) || !strings.Contains(r.stdout, own) {
			t.Errorf("idem help durable %s: exit %d, stdout %q, stderr %q; want 0 and its flags on stdout, %s among them", sub, r.code, r.stdout, r.stderr, own)
		}
	}
	for _, h := range []string{"-h", "--help", "help"} {
		r := runDurable(t, 30*time.Second, h)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("idem durable %s: exit %d, stderr %q; want 0 and nothing on stderr", h, r.code, r.stderr)
		}
		for sub := range durableFlags {
			if !strings.Contains(r.stdout, sub) {
				t.Errorf("idem durable %s does not list %s on stdout: %q", h, sub, r.stdout)
			}
		}
	}
	if r := runDurable(t, 30*time.Second); r.code != 2 || !strings.Contains(r.stderr, "list") {
		t.Errorf("idem durable alone: exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
	}
	if r := runDurable(t, 30*time.Second, "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, `unknown subcommand "frobnicate"`) {
		t.Errorf("idem durable frobnicate: exit %d, stderr %q; want 2 naming the unknown subcommand", r.code, r.stderr)
	}
	if r := runDurable(t, 30*time.Second, "list", "--limit", "many"); r.code != 2 || !strings.Contains(r.stderr, "-limit") || r.stdout != "" {
		t.Errorf("idem durable list --limit many: exit %d, stdout %q, stderr %q; want 2 and the error on stderr", r.code, r.stdout, r.stderr)
	}
}

// engineDB is a fresh database for the durable engine, with a client on
// it and an FSM whose instances wait for a signal for ever.
type engineDB struct {
	url  string
	pool *pgxpool.Pool
	c    *durable.Client
	fsm  *durable.FSM[struct{ N int }]
}

func newEngineDB(t *testing.T) *engineDB {
	t.Helper()
	e := &engineDB{url: pgtest.URL(t)}
	var err error
	if e.pool, err = pgxpool.New(context.Background(), e.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	if e.c, err = durable.NewClient(e.pool, nil); err != nil {
		t.Fatal(err)
	}
	e.fsm, err = durable.NewFSM(durable.FSMConfig[struct{ N int }]{
		Name: "order", Initial: "wait",
		Steps: map[string]durable.StepFunc[struct{ N int }]{
			"wait": func(context.Context, *durable.Step[struct{ N int }]) (durable.Outcome, error) {
				return durable.Await("wait", "paid"), nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// insert inserts an instance with key and ends it with status, as its step
// would, unless status is runnable.
func (e *engineDB) insert(t *testing.T, key string, status durable.Status, scope []durable.Status) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := e.c.Insert(ctx, e.fsm.With(struct{ N int }{N: 1}), &durable.InsertOpts{CorrelationKey: key, CorrelationScope: scope})
	if err != nil {
		t.Fatal(err)
	}
	if status != durable.StatusRunnable {
		if _, err := e.pool.Exec(ctx, `UPDATE durable_instance SET status = $2, finished_at = now() WHERE id = $1`, id, string(status)); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestDurableNotFoundMessages: a target that is not there is reported in
// the words of the subcommand that looked for it, not of Signal's.
func TestDurableNotFoundMessages(t *testing.T) {
	t.Parallel()
	e := newEngineDB(t)
	if err := e.c.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.insert(t, "order:42", durable.StatusDone, nil)
	e.insert(t, "order:43", durable.StatusRunnable, nil)
	e.insert(t, "shared", durable.StatusRunnable, []durable.Status{})
	e.insert(t, "shared", durable.StatusRunnable, []durable.Status{})
	missing := fmt.Sprint(1 << 40)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "--key", "order:42"}, `no live instance to inspect: key "order:42"`},
		{[]string{"inspect", "--key", "order:42"}, `idem durable list --key order:42 shows it`},
		{[]string{"inspect", "--id", missing}, "no instance to inspect: id " + missing},
		{[]string{"inspect", "--key", "shared"}, `several live instances carry key "shared": give --id`},
		{[]string{"signal", "--key", "order:42", "--name", "paid"}, `no live instance to signal: key "order:42"`},
		{[]string{"signal", "--id", missing, "--name", "paid"}, "no live instance to signal: id " + missing},
		{[]string{"cancel", "--key", "order:42"}, `no live instance to cancel: key "order:42"`},
		{[]string{"cancel", "--id", missing}, "no instance to cancel: id " + missing},
		{[]string{"retry", "--key", "order:43"}, `no failed instance to retry: key "order:43"`},
		{[]string{"retry", "--id", missing}, "no instance to retry: id " + missing},
	} {
		r := runDurable(t, 30*time.Second, append(tc.args, "--db", e.url)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("idem durable %q: exit %d, stderr %q; want 1 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if verb := tc.args[0]; verb != "signal" && strings.Contains(r.stderr, "signal") {
			t.Errorf("idem durable %q speaks of signals: %q", tc.args, r.stderr)
		}
	}
}

// TestDurableMigrate: on a database without the engine's tables, the
// subcommands say to run idem durable migrate, which creates them, and
// runs again as a no-op.
func TestDurableMigrate(t *testing.T) {
	t.Parallel()
	e := newEngineDB(t)
	for _, args := range [][]string{{"list"}, {"stats"}, {"buckets"}, {"inspect", "--id", "1"}, {"cancel", "--id", "1"}} {
		r := runDurable(t, 30*time.Second, append(args, "--db", e.url)...)
		if r.code != 1 || !strings.Contains(r.stderr, "idem durable migrate") || strings.Contains(r.stderr, "SQLSTATE") {
			t.Errorf("idem durable %q on a fresh database: exit %d, stderr %q; want 1, saying to run idem durable migrate", args, r.code, r.stderr)
		}
	}
	for range 2 {
		r := runDurableEnv(t, 30*time.Second, []string{"IDEM_DB=" + e.url}, "migrate")
		if r.code != 0 || !strings.Contains(r.stdout, `"migrated": true`) {
			t.Fatalf("idem durable migrate: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	}
	if r := runDurable(t, 30*time.Second, "list", "--db", e.url); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("idem durable list after migrate: exit %d, stdout %q, stderr %q; want []", r.code, r.stdout, r.stderr)
	}
	// A table of an older schema lacks a column the command reads.
	id := e.insert(t, "order:1", durable.StatusRunnable, nil)
	if _, err := e.pool.Exec(context.Background(), "ALTER TABLE durable_instance DROP COLUMN reaps"); err != nil {
		t.Fatal(err)
	}
	r := runDurable(t, 30*time.Second, "inspect", "--db", e.url, "--id", fmt.Sprint(id))
	if r.code != 1 || !strings.Contains(r.stderr, "out of date") || !strings.Contains(r.stderr, "idem durable migrate") {
		t.Errorf("idem durable inspect on an old schema: exit %d, stderr %q; want 1, saying to run idem durable migrate", r.code, r.stderr)
	}
}

// TestDurableInspectJSON: inspect names an instance's fields as list does,
// in snake_case, and leaves out the times and fields it does not have.
func TestDurableInspectJSON(t *testing.T) {
	t.Parallel()
	e := newEngineDB(t)
	ctx := context.Background()
	if err := e.c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e.insert(t, "order:7", durable.StatusRunnable, nil)
	if err := e.c.Signal(ctx, durable.ByKey("order:7"), "paid", map[string]int{"amount": 5}, "evt-1"); err != nil {
		t.Fatal(err)
	}
	r := runDurable(t, 30*time.Second, "list", "--db", e.url, "--key", "order:7")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 {
		t.Fatalf("list: exit %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	r = runDurable(t, 30*time.Second, "inspect", "--db", e.url, "--key", "order:7")
	var in map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect: exit %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	for k, v := range list[0] {
		if !reflect.DeepEqual(in[k], v) {
			t.Errorf("inspect's %q is %v; list's is %v", k, in[k], v)
		}
	}
	for k := range in {
		if k != strings.ToLower(k) {
			t.Errorf("inspect has the field %q; want snake_case names, as list's", k)
		}
	}
	for _, k := range []string{"lease_expires_at", "finished_at", "await_deadline", "lease_owner", "result", "error", "concurrency_key", "rate_limit"} {
		if v, ok := in[k]; ok {
			t.Errorf("inspect shows %q: %v; want it left out while the instance has none", k, v)
		}
	}
	if strings.Contains(r.stdout, "0001-01-01") {
		t.Errorf("inspect shows a zero time:\n%s", r.stdout)
	}
	inbox, _ := in["inbox"].([]any)
	if len(inbox) != 1 || !reflect.DeepEqual(inbox[0].(map[string]any)["payload"], map[string]any{"amount": 5.0}) ||
		inbox[0].(map[string]any)["dedup_key"] != "evt-1" || in["state"] == nil {
		t.Errorf("inspect's state and inbox: %v, %v", in["state"], in["inbox"])
	}
	if in["inbox_len"] != 1.0 { // all the signals, where inbox shows the oldest at most
		t.Errorf("inspect's inbox_len: %v, want 1", in["inbox_len"])
	}
}

// TestDurableListHintsPasteIntoAShell: the idem durable list --key command
// a not-found or ambiguous-key message suggests lists the key's instances
// when pasted into a shell, whatever the key holds: $, a backtick, !,
// quotes and spaces are not expanded or split by the shell.
func TestDurableListHintsPasteIntoAShell(t *testing.T) {
	t.Parallel()
	e := newEngineDB(t)
	if err := e.c.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended := "order $HOME `echo x` !1 \"it's\""
	shared := "shared $(echo y) !! \\n"
	endedID := e.insert(t, ended, durable.StatusDone, nil)
	sharedIDs := []int64{e.insert(t, shared, durable.StatusRunnable, []durable.Status{}), e.insert(t, shared, durable.StatusRunnable, []durable.Status{})}
	hint := regexp.MustCompile(`\((idem durable list --key .*) (?:shows it|lists them)\)`)
	for _, tc := range []struct {
		args []string
		want []int64
	}{
		{[]string{"inspect", "--key", ended}, []int64{endedID}},
		{[]string{"cancel", "--key", shared}, sharedIDs},
	} {
		r := runDurable(t, 30*time.Second, append(tc.args, "--db", e.url)...)
		m := hint.FindStringSubmatch(r.stderr)
		if r.code != 1 || m == nil {
			t.Fatalf("idem durable %q: exit %d, stderr %q; want 1 and a hint to run idem durable list", tc.args, r.code, r.stderr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sh := exec.CommandContext(ctx, "bash", "-O", "failglob", "-c", m[1]+` --db "$DB"`)
		sh.Dir = t.TempDir()
		sh.Env = append(os.Environ(), "DB="+e.url, "PATH="+filepath.Dir(idemBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := sh.Output()
		var list []durable.Summary
		if err != nil || json.Unmarshal(out, &list) != nil {
			t.Fatalf("the hint pasted into a shell, %s: %v, output %q", m[1], err, out)
		}
		var got []int64
		for _, s := range list {
			got = append(got, s.ID)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("the hint pasted into a shell, %s, listed %v; want %v", m[1], got, tc.want)
		}
	}
}
