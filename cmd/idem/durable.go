package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem/durable"
)

// runDurable is `idem durable <list|inspect|signal|cancel|retry|stats|buckets>
// --db URL …`: an operator's view of the durable engine's instances, in JSON.
func runDurable(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	subs := map[string]func(context.Context, *durable.Client, []string, io.Writer, io.Writer, env) error{
		"list":    durableList,
		"inspect": durableInspect,
		"signal":  durableSignal,
		"cancel":  durableCancel,
		"retry":   durableRetry,
		"stats":   durableStats,
		"buckets": durableBuckets,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		fmt.Fprintln(stderr, "usage: idem durable <list|inspect|signal|cancel|retry|stats|buckets> --db URL [flags]")
		return errUsage
	}
	name := args[0]
	// The subcommand parses its own flags; --db is taken here, wherever it
	// stands.
	dbURL, rest, err := takeDB(args[1:], getenv)
	if err != nil {
		return err
	}
	if dbURL == "" {
		return errors.New("--db URL (or IDEM_DB) is required: the PostgreSQL database of the engine")
	}
	pool, err := connectPostgres(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := durable.NewClient(pool, nil)
	if err != nil {
		return err
	}
	return subs[name](ctx, c, rest, stdout, stderr, getenv)
}

// takeDB removes --db URL (or --db=URL) from args; IDEM_DB is the default.
func takeDB(args []string, getenv env) (string, []string, error) {
	url, _ := getenv("IDEM_DB")
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--db" || a == "-db":
			if i+1 == len(args) {
				return "", nil, errors.New("--db needs a value")
			}
			url = args[i+1]
			i++
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			_, url, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
		}
	}
	return url, rest, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func durableList(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o durable.ListOpts
	status := fs.String("status", "", "only instances in this status")
	fs.StringVar(&o.Queue, "queue", "", "only instances of this queue")
	fs.StringVar(&o.FSM, "fsm", "", "only instances of this FSM")
	fs.StringVar(&o.CorrelationKey, "key", "", "only instances carrying this correlation key")
	fs.Int64Var(&o.AfterID, "after", 0, "only instances with a larger id (paging)")
	fs.IntVar(&o.Limit, "limit", durable.DefaultListLimit, "most instances listed")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	o.Status = durable.Status(*status)
	list, err := c.List(ctx, &o)
	if err != nil {
		return err
	}
	if list == nil {
		list = []durable.Summary{}
	}
	return printJSON(stdout, list)
}

// target reads --id or --key.
func target(fs *flag.FlagSet) (id *int64, key *string) {
	return fs.Int64("id", 0, "the instance id"), fs.String("key", "", "the correlation key of a live instance")
}

func durableInspect(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id, key := target(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	n, err := resolve(ctx, c, *id, *key)
	if err != nil {
		return err
	}
	in, err := c.Get(ctx, n)
	if err != nil {
		return err
	}
	return printJSON(stdout, in)
}

func resolve(ctx context.Context, c *durable.Client, id int64, key string) (int64, error) {
	switch {
	case id > 0 && key != "":
		return 0, errors.New("give --id or --key, not both")
	case id > 0:
		return id, nil
	case key != "":
		return c.Lookup(ctx, key)
	default:
		return 0, errors.New("--id or --key is required")
	}
}

func durableSignal(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable signal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id, key := target(fs)
	name := fs.String("name", "", "the signal's name (required)")
	payload := fs.String("payload", "null", "the signal's payload, JSON")
	dedup := fs.String("dedup", "", "dedup key: a second signal with it is dropped")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name is required")
	}
	if !json.Valid([]byte(*payload)) {
		return fmt.Errorf("--payload is not JSON: %q", *payload)
	}
	t, err := targetOf(*id, *key)
	if err != nil {
		return err
	}
	if err := c.Signal(ctx, t, *name, json.RawMessage(*payload), *dedup); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"signalled": true, "target": targetString(*id, *key), "name": *name})
}

// targetOf is the durable.Target of --id or --key.
func targetOf(id int64, key string) (durable.Target, error) {
	switch {
	case id > 0 && key != "":
		return durable.Target{}, errors.New("give --id or --key, not both")
	case id > 0:
		return durable.ByID(id), nil
	case key != "":
		return durable.ByKey(key), nil
	default:
		return durable.Target{}, errors.New("--id or --key is required")
	}
}

// durableCancel is `idem durable cancel (--id N | --key K) [--reason R]`:
// it cancels a live instance (durable.Client.Cancel).
func durableCancel(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable cancel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id, key := target(fs)
	reason := fs.String("reason", "", "why, stored as the instance's error")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	t, err := targetOf(*id, *key)
	if err != nil {
		return err
	}
	if err := c.Cancel(ctx, t, *reason); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"cancelled": true, "target": targetString(*id, *key)})
}

// durableRetry is `idem durable retry (--id N | --key K) [--at RFC3339]`:
// it makes a failed instance runnable again (durable.Client.Retry). --key
// names the one failed instance carrying the key, which under the default
// scope no longer occupies it; several such instances need --id.
func durableRetry(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable retry", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.Int64("id", 0, "the instance id")
	key := fs.String("key", "", "the correlation key of the one failed instance carrying it")
	at := fs.String("at", "", "when to run the step again, RFC 3339 (default: now)")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	t, err := targetOf(*id, *key)
	if err != nil {
		return err
	}
	var opts durable.RetryOpts
	if *at != "" {
		if opts.At, err = time.Parse(time.RFC3339, *at); err != nil {
			return fmt.Errorf("--at is not an RFC 3339 time: %w", err)
		}
	}
	n, err := c.Retry(ctx, t, &opts)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"retried": true, "id": n})
}

func targetString(id int64, key string) string {
	if key != "" {
		return "key:" + key
	}
	return "id:" + strconv.FormatInt(id, 10)
}

func durableStats(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if stats == nil {
		stats = []durable.QueueStats{}
	}
	return printJSON(stdout, stats)
}

// durableBuckets prints the rate-limit buckets with the runnable instances
// waiting on each. This command knows no Config.RateLimits, so it shows
// each bucket's tokens as the pickers last stored them ("known": false),
// with the time they did.
func durableBuckets(ctx context.Context, c *durable.Client, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem durable buckets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	buckets, err := c.RateLimitStats(ctx)
	if err != nil {
		return err
	}
	return printJSON(stdout, buckets)
}
