package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
)

// durableSub is one subcommand of idem durable.
type durableSub struct {
	name, summary string
	flags         string // its flags but --db, for its usage line
	run           func(ctx context.Context, d *durableCall) error
}

func durableSubs() []durableSub {
	return []durableSub{
		{"list", "list instances in id order, filtered by status, queue, FSM or key", " [--status S] [--queue Q] [--fsm F] [--key K] [--after ID] [--limit N]", durableList},
		{"inspect", "show one instance with its state and inbox", " (--id N | --key K)", durableInspect},
		{"signal", "send a signal to a live instance", " (--id N | --key K) --name NAME [--payload JSON] [--dedup D]", durableSignal},
		{"cancel", "cancel a live instance and its live children", " (--id N | --key K) [--reason R]", durableCancel},
		{"retry", "make a failed instance runnable again", " (--id N | --key K) [--at TIME]", durableRetry},
		{"stats", "count the instances by queue and status", "", durableStats},
		{"buckets", "show the rate-limit buckets and the instances waiting on each", "", durableBuckets},
		{"migrate", "create or update the engine's tables", "", durableMigrate},
	}
}

// runDurable is `idem durable <subcommand> --db URL …`: an operator's view
// of the durable engine's instances, in JSON.
func runDurable(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	if len(args) == 0 {
		durableUsage(stderr)
		return errUsage
	}
	if isHelp(args[0]) {
		durableUsage(stdout) // asked for: stdout, as idem --help
		return flag.ErrHelp
	}
	for _, sub := range durableSubs() {
		if sub.name != args[0] {
			continue
		}
		d := &durableCall{fs: flag.NewFlagSet("idem durable "+sub.name, flag.ContinueOnError), args: args[1:], getenv: getenv, stdout: stdout}
		d.fs.SetOutput(stderr)
		describe(d.fs, "idem durable "+sub.name+" --db URL"+sub.flags, sub.summary)
		d.fs.StringVar(&d.dsn, "db", "", "the engine's PostgreSQL database: a postgres:// URL or a libpq key=value string (required)")
		defer d.close()
		return d.explainSchema(sub.run(ctx, d))
	}
	if strings.HasPrefix(args[0], "-") { // idem durable --db x list
		fmt.Fprintf(stderr, "idem durable: %q is a flag: flags go after the subcommand (idem durable <subcommand> --db URL [flags])\n\n", args[0])
	} else {
		fmt.Fprintf(stderr, "idem durable: unknown subcommand %q\n\n", args[0])
	}
	durableUsage(stderr)
	return errUsage
}

func durableUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idem durable <subcommand> --db URL [flags]\n\nsubcommands:")
	for _, sub := range durableSubs() {
		fmt.Fprintf(w, "  %-8s %s\n", sub.name, sub.summary)
	}
	fmt.Fprintln(w, `
Run 'idem durable <subcommand> -h' for its flags. Flags may also come from
IDEM_* variables: --db from IDEM_DB, --key and --id from variables naming
the subcommand (IDEM_DURABLE_LIST_KEY, IDEM_DURABLE_CANCEL_ID…), the others
from IDEM_ and the flag's name (IDEM_STATUS).`)
}

// durableCall is one run of a subcommand: its flags, which hold --db, and
// the connection it opens once they are parsed.
type durableCall struct {
	fs     *flag.FlagSet
	args   []string
	getenv env
	stdout io.Writer
	dsn    string // --db
	pool   *pgxpool.Pool
	// idGiven says --id has a value from the command line or from its
	// IDEM_* variable, once parsed: an --id 0 given is refused, where
	// --id left out (0 too) is not.
	idGiven bool
}

// parse parses the subcommand's flags, IDEM_* variables first. Help asked
// for goes to stdout, errors to stderr, as the other commands'. Of --id
// and --key, one given on the command line wins over the other's
// variable (commandLineWins), which then counts as not given.
func (d *durableCall) parse() error {
	if err := parseWithHelp(d.fs, d.args, d.getenv, d.stdout); err != nil {
		return err
	}
	putBack := commandLineWins(d.fs, "id", "key")
	_, idInVariable := d.getenv(envName(commandOf(d.fs), "id"))
	d.idGiven = d.fs.Lookup("id") != nil && putBack != "id" && (idInVariable || setOnCommandLine(d.fs, "id"))
	return nil
}

// client connects to --db, which must be set.
func (d *durableCall) client(ctx context.Context) (*durable.Client, error) {
	if d.dsn == "" {
		return nil, missingFlag("--db URL (or IDEM_DB) is required: the PostgreSQL database of the engine")
	}
	pool, err := connectPostgres(ctx, d.dsn, nil)
	if err != nil {
		return nil, err
	}
	d.pool = pool
	return durable.NewClient(pool, nil)
}

func (d *durableCall) close() {
	if d.pool != nil {
		d.pool.Close()
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func durableList(ctx context.Context, d *durableCall) error {
	var o durable.ListOpts
	status := d.fs.String("status", "", "only instances in this status: "+statusNames())
	d.fs.StringVar(&o.Queue, "queue", "", "only instances of this queue")
	d.fs.StringVar(&o.FSM, "fsm", "", "only instances of this FSM")
	d.fs.StringVar(&o.CorrelationKey, "key", "", "only instances carrying this correlation key (variable "+envName(commandOf(d.fs), "key")+")")
	d.fs.Int64Var(&o.AfterID, "after", 0, "only instances with a larger id, for paging (0: from the first)")
	d.fs.IntVar(&o.Limit, "limit", durable.DefaultListLimit, fmt.Sprintf("most instances listed, at most %d (0: %d)", durable.MaxListLimit, durable.DefaultListLimit))
	if err := d.parse(); err != nil {
		return err
	}
	o.Status = durable.Status(*status)
	if o.Status != "" && !slices.Contains(statuses(), o.Status) {
		return d.fromVariable("status", usagef("--status %q: want one of %s", *status, statusNames()))
	}
	if o.AfterID < 0 {
		return d.fromVariable("after", usagef("--after %d: want an instance id, 0 (from the first) or more", o.AfterID))
	}
	if o.Limit < 0 || o.Limit > durable.MaxListLimit {
		return d.fromVariable("limit", usagef("--limit %d: want 0 to %d", o.Limit, durable.MaxListLimit))
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	list, err := c.List(ctx, &o)
	if err != nil {
		return err
	}
	if list == nil {
		list = []durable.Summary{}
	}
	return printJSON(d.stdout, list)
}

// statuses are the durable package's statuses, in life order.
func statuses() []durable.Status {
	return append(durable.LiveStatuses(), durable.StatusDone, durable.StatusFailed, durable.StatusCancelled)
}

// statusNames lists statuses() for a message: "runnable, executing, …".
func statusNames() string {
	names := make([]string, 0, 7)
	for _, s := range statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// target reads --id or --key.
func target(fs *flag.FlagSet) (id *int64, key *string) {
	return fs.Int64("id", 0, "the instance id (variable "+envName(commandOf(fs), "id")+")"),
		fs.String("key", "", "the correlation key of a live instance (variable "+envName(commandOf(fs), "key")+")")
}

func durableInspect(ctx context.Context, d *durableCall) error {
	id, key := target(d.fs)
	if err := d.parse(); err != nil {
		return err
	}
	if _, err := d.targetOf(*id, *key); err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	n := *id
	if *key != "" {
		if n, err = c.Lookup(ctx, *key); err != nil {
			return notFound("inspect", *id, *key, err)
		}
	}
	in, err := c.Get(ctx, n)
	if err != nil {
		return notFound("inspect", *id, *key, err)
	}
	return printJSON(d.stdout, inspectInstance(in))
}

func durableSignal(ctx context.Context, d *durableCall) error {
	id, key := target(d.fs)
	name := d.fs.String("name", "", "the signal's name (required)")
	payload := d.fs.String("payload", "null", "the signal's payload, JSON")
	dedup := d.fs.String("dedup", "", "dedup key: a second signal with it is dropped")
	if err := d.parse(); err != nil {
		return err
	}
	if *name == "" {
		return missingFlag("--name is required")
	}
	if !json.Valid([]byte(*payload)) {
		return d.fromVariable("payload", usagef(`--payload %q: want a JSON value, such as '{"ok": true}' or null`, *payload))
	}
	t, err := d.targetOf(*id, *key)
	if err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	if err := c.Signal(ctx, t, *name, json.RawMessage(*payload), *dedup); err != nil {
		return notFound("signal", *id, *key, err)
	}
	return printJSON(d.stdout, map[string]any{"signalled": true, "target": targetString(*id, *key), "name": *name})
}

// fromVariable is the package's fromVariable for the subcommand's flag
// name: err naming the IDEM_* variable the flag's value came from.
func (d *durableCall) fromVariable(name string, err error) error {
	return fromVariable(d.fs, d.getenv, name, err)
}

// targetOf is the durable.Target of --id or --key. An --id given is 1
// or more: --id 0 is refused as a value, not taken for --id left out.
func (d *durableCall) targetOf(id int64, key string) (durable.Target, error) {
	switch {
	case id < 0 || id == 0 && d.idGiven:
		return durable.Target{}, d.fromVariable("id", usagef("--id %d: want an instance id, 1 or more", id))
	case id > 0 && key != "":
		return durable.Target{}, usagef("give --id or --key, not both")
	case id > 0:
		return durable.ByID(id), nil
	case key != "":
		return durable.ByKey(key), nil
	default:
		return durable.Target{}, missingFlag("--id or --key is required")
	}
}

// durableCancel is `idem durable cancel (--id N | --key K) [--reason R]`:
// it cancels a live instance (durable.Client.Cancel).
func durableCancel(ctx context.Context, d *durableCall) error {
	id, key := target(d.fs)
	reason := d.fs.String("reason", "", "why, stored as the instance's error")
	if err := d.parse(); err != nil {
		return err
	}
	t, err := d.targetOf(*id, *key)
	if err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	if err := c.Cancel(ctx, t, *reason); err != nil {
		return notFound("cancel", *id, *key, err)
	}
	return printJSON(d.stdout, map[string]any{"cancelled": true, "target": targetString(*id, *key)})
}

// durableRetry is `idem durable retry (--id N | --key K) [--at RFC3339]`:
// it makes a failed instance runnable again (durable.Client.Retry). --key
// names the one failed instance carrying the key, which under the default
// scope no longer occupies it; several such instances need --id.
func durableRetry(ctx context.Context, d *durableCall) error {
	id := d.fs.Int64("id", 0, "the instance id (variable "+envName(commandOf(d.fs), "id")+")")
	key := d.fs.String("key", "", "the correlation key of the one failed instance carrying it (variable "+envName(commandOf(d.fs), "key")+")")
	at := d.fs.String("at", "", "when to run the step again, RFC 3339 (default: now)")
	if err := d.parse(); err != nil {
		return err
	}
	t, err := d.targetOf(*id, *key)
	if err != nil {
		return err
	}
	var opts durable.RetryOpts
	if *at != "" {
		if opts.At, err = time.Parse(time.RFC3339, *at); err != nil {
			return d.fromVariable("at", usagef("--at %q: want an RFC 3339 time, such as 2026-11-27T10:00:00Z or 2026-11-27T11:00:00+01:00 (leave --at out for now)", *at))
		}
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	n, err := c.Retry(ctx, t, &opts)
	if err != nil {
		return notFound("retry", *id, *key, err)
	}
	return printJSON(d.stdout, map[string]any{"retried": true, "id": n})
}

// notFound words the durable package's errors for a target that is not
// there, which speak of signals whatever the call, as what subcommand verb
// looked for: a live instance, or for retry a failed one, by --key; by
// --id, any instance, except that signal wants a live one there too.
// The idem durable list command suggested quotes the key for a shell
// (shellWord), so that it can be pasted as it is. Other errors are
// returned as they are.
func notFound(verb string, id int64, key string, err error) error {
	kind := "live"
	if verb == "retry" {
		kind = "failed"
	}
	switch {
	case errors.Is(err, durable.ErrAmbiguousTarget):
		return fmt.Errorf("several %s instances carry key %q: give --id (idem durable list --key %s lists them)", kind, key, shellWord(key))
	case !errors.Is(err, durable.ErrNoTarget) && !errors.Is(err, durable.ErrNotFound):
		return err
	case key != "" && verb == "inspect":
		return fmt.Errorf("no live instance to inspect: key %q; an ended one is inspected by --id (idem durable list --key %s shows it)", key, shellWord(key))
	case key != "":
		return fmt.Errorf("no %s instance to %s: key %q", kind, verb, key)
	case verb == "signal":
		return fmt.Errorf("no live instance to signal: id %d", id)
	default:
		return fmt.Errorf("no instance to %s: id %d", verb, id)
	}
}

func targetString(id int64, key string) string {
	if key != "" {
		return "key:" + key
	}
	return "id:" + strconv.FormatInt(id, 10)
}

func durableStats(ctx context.Context, d *durableCall) error {
	if err := d.parse(); err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if stats == nil {
		stats = []durable.QueueStats{}
	}
	return printJSON(d.stdout, stats)
}

// durableBuckets prints the rate-limit buckets with the runnable instances
// waiting on each. This command knows no Config.RateLimits, so it shows
// each bucket's tokens as the pickers last stored them ("known": false),
// with the time they did.
func durableBuckets(ctx context.Context, d *durableCall) error {
	if err := d.parse(); err != nil {
		return err
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	buckets, err := c.RateLimitStats(ctx)
	if err != nil {
		return err
	}
	return printJSON(d.stdout, buckets)
}
