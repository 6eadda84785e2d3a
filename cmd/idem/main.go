// Command idem runs the idem toolkit from the command line.
//
//	idem proxy   --upstream URL [--listen ADDR] [--store DSN] …   Idempotency-Key reverse proxy
//	idem migrate [--store DSN]                                    create or upgrade the store's schema
//	idem purge   [--store DSN] [--namespace NS]                   delete expired records
//	idem inspect [--store DSN] --key K [--scope S | --credential C]  show a record as JSON
//	idem durable list|inspect|signal|cancel|retry|stats|buckets|migrate --db URL …  operate durable FSM instances
//	idem version                                                  print the version of idem and of Go
//
// A store DSN is "memory", "sqlite:PATH" (the default, sqlite:idem.db),
// "postgres://…" (or "postgresql://…"), "redis://…" / "rediss://…" (TLS),
// or "redis-cluster://host:port?addr=host2:port2…" for a Redis Cluster,
// "rediss-cluster://…" for one over TLS (every node's certificate is
// checked against the DSN's host name).
//
// idem proxy checks at start-up that its store answers, and stops if it
// does not; with --fail-open, which forwards requests unprotected while
// the store is down, a Postgres or Redis server that cannot be reached
// (refused, timing out, starting up) does not stop it: it starts, says so
// once, forwards requests unprotected (/healthz 200 saying so, /metrics
// counting store errors) and tries again in the background, with
// back-off, until it reaches the store, migrates it (--migrate) and
// protects requests from then on. A configuration mistake (a DSN that
// does not read, a wrong password, no such database, a replica, a cluster
// node given as redis://) stops it at once all the same.
//
// Every flag can also be set with an environment variable: IDEM_ and the
// flag name in upper case with '-' as '_' (IDEM_UPSTREAM, IDEM_REQUIRE_KEY…),
// except --key and --id, which pick what a command reads or changes and
// mean different things in different commands: their variables name the
// command too (IDEM_INSPECT_KEY, IDEM_DURABLE_LIST_KEY,
// IDEM_DURABLE_CANCEL_ID…). A flag on the command line wins over the
// environment, also over the variable of a flag it excludes (--scope over
// IDEM_AUTHORIZATION, --id over IDEM_DURABLE_CANCEL_KEY). An IDEM_* variable that no command reads (a typo such as
// IDEM_UPSTRAEM, or IDEM_KEY) is named in a warning on stderr and
// otherwise ignored; one of another command's flags is ignored silently,
// as one environment may serve several commands.
//
// SIGINT or SIGTERM stops a command gracefully (idem proxy lets in-flight
// requests finish, up to --shutdown-timeout, upgraded connections such as
// WebSockets included, and then closes those still open so that the keys
// they hold are released before it exits); a second one stops it at
// once, also when SIGINT was ignored at start, as in a background job of a
// non-interactive shell (the exit status is then 130). So does SIGHUP, sent
// when the terminal a command was started from closes, unless it was
// ignored at start (nohup): the keys of the requests in flight are settled
// rather than left reserved until their leases end.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// Asked before signal.Notify, which stops SIGINT being ignored.
	interruptIgnored := signal.Ignored(os.Interrupt)
	stopping := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) { // ignored under nohup, and kept so
		stopping = append(stopping, syscall.SIGHUP)
	}
	// The first signal cancels ctx: the command stops gracefully. The
	// channel is read from the start, so that a second signal, however
	// soon it comes, is never lost, and ends the process at once.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, stopping...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-signals
		cancel()
		second := (<-signals).(syscall.Signal)
		if second != syscall.SIGINT || !interruptIgnored {
			// The signal's default action: the process ends by it. (For
			// a SIGINT ignored at start, as in a background job of a
			// non-interactive shell, Reset would put back "ignored".)
			signal.Reset(second)
			raise(second)
		}
		os.Exit(128 + int(second)) // the status a shell gives one ended by it
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv, os.Environ()))
}

// env looks up an environment variable.
type env func(string) (string, bool)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error
}

func commands() []command {
	return []command{
		{"proxy", "run the Idempotency-Key reverse proxy", runProxy},
		{"migrate", "create or upgrade the store's schema", runMigrate},
		{"purge", "delete expired records", runPurge},
		{"inspect", "show the live record of a key as JSON", runInspect},
		{"durable", "list, inspect, signal, cancel, retry and count durable FSM instances; show rate-limit buckets", runDurable},
		{"version", versionSummary, runVersion},
	}
}

// summaryOf is what the command name does, as idem --help lists it.
func summaryOf(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return c.summary
		}
	}
	return ""
}

// describe gives fs a help, as -h prints it, that opens with synopsis, the
// command's usage line, and summary, what it does, before the flags, as
// idem inspect's does.
func describe(fs *flag.FlagSet, synopsis, summary string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s.\n\nflags:\n", synopsis, strings.ToUpper(summary[:1])+summary[1:])
		fs.PrintDefaults()
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// run runs the command args name, its flags also read from getenv; the
// IDEM_* variables of environ ("NAME=value") that no command reads are
// warned about first (warnUnread). Help asked for goes to stdout, with exit
// code 0; usage printed because of a mistake goes to stderr, with exit
// code 2. An error is printed after the command as the user typed it,
// with its subcommand: "idem durable list: …".
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env, environ []string) int {
	switch {
	case len(args) == 0:
		usage(stderr)
		return 2
	case isHelp(args[0]) && len(args) == 1:
		usage(stdout)
		return 0
	case isHelp(args[0]): // idem help proxy, idem -h durable list
		args = append(slices.Clone(args[1:]), "--help")
	case args[0] == "--version" || args[0] == "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			path := commandPath(args)
			warnUnread(stderr, path, environ)
			err := c.run(ctx, args[1:], stdout, stderr, getenv)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			case isUsage(err):
				fmt.Fprintf(stderr, "idem %s: %v\n", path, err)
				return 2
			default:
				fmt.Fprintf(stderr, "idem %s: %v\n", path, err)
				return 1
			}
		}
	}
	if strings.HasPrefix(args[0], "-") { // idem --store x migrate
		fmt.Fprintf(stderr, "idem: %q is a flag: flags go after the command (idem <command> [flags])\n\n", args[0])
	} else {
		fmt.Fprintf(stderr, "idem: unknown command %q\n\n", args[0])
	}
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: idem <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
Run 'idem <command> -h' for its flags. Flags may also come from IDEM_*
environment variables: IDEM_ and the flag's name (IDEM_UPSTREAM for
--upstream, IDEM_REQUIRE_KEY for --require-key), except --key and --id,
whose variables name the command too (IDEM_INSPECT_KEY,
IDEM_DURABLE_LIST_KEY, IDEM_DURABLE_CANCEL_ID). The command line wins. An
IDEM_* variable that no command reads is named in a warning on stderr.`)
}

// perCommand are the flags whose variables name the command: flags that
// several commands have and that pick what a command reads or changes,
// --key (idem inspect's Idempotency-Key, idem durable's correlation key)
// and --id (idem durable's instance id). With one IDEM_KEY for all, a key
// exported for idem inspect would filter idem durable list, or pick what
// idem durable cancel cancels. The other flags several commands have,
// --store, --namespace, --scope-by and --db, mean the same in each and
// keep one variable.
var perCommand = map[string]bool{"key": true, "id": true}

// envName is the variable of the flag name of command ("proxy", "durable
// list"): IDEM_UPSTREAM, or for a perCommand flag IDEM_DURABLE_LIST_KEY.
func envName(command, name string) string {
	if perCommand[name] {
		name = command + " " + name
	}
	return "IDEM_" + strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(name))
}

// commandOf is the command of fs, from its name: "durable list" for "idem
// durable list".
func commandOf(fs *flag.FlagSet) string { return strings.TrimPrefix(fs.Name(), "idem ") }

// commandFlags are the flags of each command and subcommand, from which
// the variables any command reads are known (TestCommandFlags checks
// them against the commands' flag sets).
var commandFlags = map[string][]string{
	"proxy": {"listen", "tls-cert", "tls-key", "upstream", "store", "admin", "namespace", "scope-by", "require-key", "fail-open", "migrate", "stripe", "upstream-host", "trust-forwarded", "batch-store-calls",
		"ttl", "lease", "timeout", "store-timeout", "body-timeout", "purge-interval", "shutdown-timeout", "max-body", "max-capture"},
	"migrate":         {"store"},
	"purge":           {"store", "namespace"},
	"inspect":         {"store", "namespace", "key", "scope", "scope-by", "credential", "authorization"},
	"version":         nil,
	"durable list":    {"db", "status", "queue", "fsm", "key", "after", "limit"},
	"durable inspect": {"db", "id", "key"},
	"durable signal":  {"db", "id", "key", "name", "payload", "dedup"},
	"durable cancel":  {"db", "id", "key", "reason"},
	"durable retry":   {"db", "id", "key", "at"},
	"durable stats":   {"db"},
	"durable buckets": {"db"},
	"durable migrate": {"db"},
}

// commandPath is the command args run: "proxy", or "durable list" for a
// subcommand of idem durable.
func commandPath(args []string) string {
	if len(args) > 1 {
		if _, ok := commandFlags[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1]
		}
	}
	return args[0]
}

// serviceLink matches the variables Kubernetes puts in every container
// for a Service named idem or idem-… (IDEM_SERVICE_HOST, IDEM_PORT,
// IDEM_PORT_8080_TCP_ADDR, IDEM_PROXY_SERVICE_PORT…): no command reads
// them, and they are no mistake to warn about.
var serviceLink = regexp.MustCompile(`^IDEM_(\w+_)?(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)$`)

// warnUnread writes to w a warning naming command for each IDEM_* variable
// of environ that no command reads: a typo (IDEM_UPSTRAEM), or IDEM_KEY
// or IDEM_ID, which are read per command (the warning names the variable
// command reads, or those of the commands that have the flag). It warns
// and does not fail: other programs may use the prefix too. A variable
// of a flag of another command is no mistake (IDEM_STORE, IDEM_UPSTREAM
// and IDEM_DB may be exported together for all the commands), nor are
// Kubernetes's service variables (serviceLink).
func warnUnread(w io.Writer, command string, environ []string) {
	read := map[string]bool{}
	for c, flags := range commandFlags {
		for _, f := range flags {
			read[envName(c, f)] = true
		}
	}
	var unread []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "IDEM_") && !read[name] && !serviceLink.MatchString(name) {
			unread = append(unread, name)
		}
	}
	slices.Sort(unread)
	for _, name := range slices.Compact(unread) {
		msg := "no idem command has a flag of that name"
		for f := range perCommand {
			if name != "IDEM_"+strings.ToUpper(f) { // IDEM_KEY, IDEM_ID
				continue
			}
			if slices.Contains(commandFlags[command], f) {
				msg = fmt.Sprintf("idem %s reads --%s from %s", command, f, envName(command, f))
				break
			}
			var names []string
			for c, flags := range commandFlags {
				if slices.Contains(flags, f) {
					names = append(names, envName(c, f))
				}
			}
			slices.Sort(names)
			msg = fmt.Sprintf("--%s is read from a variable naming the command: %s", f, strings.Join(names, ", "))
		}
		fmt.Fprintf(w, "idem %s: warning: %s is ignored: %s\n", command, name, msg)
	}
}

// versionSummary is what idem version does, for idem --help and idem
// version -h.
const versionSummary = "print the version of idem and of Go it was built with"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { // no flags to list
		fmt.Fprintf(fs.Output(), "usage: idem version (or idem --version)\n\n%s%s, e.g. idem v1.2.3 %s %s/%s;\na build without a module version says (devel) and the commit it was built from, if known.\n",
			strings.ToUpper(versionSummary[:1]), versionSummary[1:], runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	_, err := io.WriteString(stdout, versionLine(debug.ReadBuildInfo()))
	return err
}

// versionLine is what idem version prints, from the build information
// debug.ReadBuildInfo returns: "idem v1.2.3 go1.26.1 linux/amd64" for a
// build with a module version (a release, or the pseudo-version Go gives
// a build from a checkout, which names its commit and ends in +dirty for
// uncommitted changes). A build without one says "(devel)", followed by
// what Go recorded of the checkout it was built from, if anything: "idem
// (devel) rev 1a2b3c4d5e6f (2026-11-27T10:00:00Z, uncommitted changes)
// go1.26.1 linux/amd64", the revision cut to 12 characters when longer
// and hexadecimal, as pseudo-versions cut it. The Go version and the
// platform are always the last two words.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	version, goVersion := "", runtime.Version()
	if ok {
		version = bi.Main.Version
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	if version == "" || version == "(devel)" {
		version = "(devel)"
		if ok {
			version += checkoutOf(bi.Settings)
		}
	}
	return fmt.Sprintf("idem %s %s %s/%s\n", version, goVersion, runtime.GOOS, runtime.GOARCH)
}

// checkoutOf is what versionLine says of the checkout a build was made
// from, from the vcs.* build settings: " rev REVISION (TIME, uncommitted
// changes)", each part only when recorded; "" without a revision (a
// build with -buildvcs=false, by go run, or from a checkout with no
// commit yet).
func checkoutOf(settings []debug.BuildSetting) string {
	var revision, commitTime string
	modified := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			commitTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return ""
	}
	if len(revision) > 12 && strings.Trim(revision, "0123456789abcdef") == "" {
		revision = revision[:12]
	}
	var about []string
	if commitTime != "" {
		about = append(about, commitTime)
	}
	if modified {
		about = append(about, "uncommitted changes")
	}
	if len(about) == 0 {
		return " rev " + revision
	}
	return fmt.Sprintf(" rev %s (%s)", revision, strings.Join(about, ", "))
}

// errUsage is returned after a flag error was already printed.
var errUsage = errors.New("usage")

// usageError is a mistake in how a command is called that the flag
// package cannot see, such as a required flag left out, flags that
// exclude each other, or a value the flag's type takes but the command
// does not (a negative --ttl, an unknown store DSN): run prints it, and
// exits with code 2 as for the flag package's errors.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// missingFlag is the usage error of a required flag left out; msg names
// the flag.
func missingFlag(msg string) error { return usageError{errors.New(msg)} }

// usagef is a usageError formatted as fmt.Errorf formats.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// isUsage reports whether err is a usageError.
func isUsage(err error) bool {
	_, ok := errors.AsType[usageError](err)
	return ok
}

// parse parses args into fs after applying IDEM_* environment variables
// (envName names them; fs's name is "idem " and the command); the command
// line wins. A value a flag cannot take is reported with what
// the flag accepts. Help asked for with -h or --help is printed whole to
// fs.Output() (parseWithHelp prints it elsewhere); a flag mistake (a
// flag fs does not have, a value its type cannot take, a flag without
// its value, arguments left over) is printed there in one line naming
// the command, followed, for the flag package's mistakes, by the usage
// line and "Run 'idem … -h' for the flags." ("for its help." for a
// command without flags), not by the whole help, which would scroll the
// mistake away.
func parse(fs *flag.FlagSet, args []string, getenv env) error {
	return parseWithHelp(fs, args, getenv, nil)
}

// parseWithHelp is parse printing help asked for to help (unless nil),
// and errors to fs.Output().
func parseWithHelp(fs *flag.FlagSet, args []string, getenv env, help io.Writer) error {
	restore := explainValues(fs)
	defer restore()
	usage := fs.Usage
	fs.Usage = func() { restore(); usage() } // the flag package's help, from its own values
	defer func() { fs.Usage = usage }()

	// A variable's value the flag cannot take is an error only if the
	// command line, which wins, does not set the flag: the first such one,
	// in the flags' order, once the command line is parsed.
	envErrs := map[string]error{}
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(commandOf(fs), f.Name)
		if v, ok := getenv(name); ok {
			if err := f.Value.Set(v); err != nil {
				envErrs[f.Name] = usagef("invalid value %q in %s (for --%s): %v", v, name, f.Name, err)
			}
		}
	})
	// The flag package prints an error and help alike, to one writer:
	// catch them, and pass them on where each belongs.
	out := fs.Output()
	var printed bytes.Buffer
	fs.SetOutput(&printed)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if help == nil {
			help = out
		}
		_, _ = printed.WriteTo(help)
		return err
	case err != nil:
		// Not the help the flag package printed after its error: the
		// mistake would scroll away behind it.
		listed := "the flags"
		if !hasFlags(fs) { // idem version
			listed = "its help"
		}
		fmt.Fprintf(out, "%s: %v\n%s\nRun '%s -h' for %s.\n", fs.Name(), err, synopsisOf(fs), fs.Name(), listed)
		return errUsage
	case fs.NArg() > 0:
		if name, v, ok := boolGivenApart(fs, args); ok {
			fmt.Fprintf(out, "%s: --%s takes no separate value: write --%s=%s (--%s alone means true)\n", fs.Name(), name, name, v, name)
			return errUsage
		}
		fmt.Fprintf(out, "%s: unexpected arguments: %q: it takes only flags ('%s -h' lists them)\n", fs.Name(), fs.Args(), fs.Name())
		return errUsage
	}
	fs.Visit(func(f *flag.Flag) { delete(envErrs, f.Name) }) // set on the command line
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr == nil {
			envErr = envErrs[f.Name]
		}
	})
	return envErr
}

// synopsisOf is the first line of fs's help, the command's usage line
// ("usage: idem proxy --upstream URL …"), which every command's help
// opens with.
func synopsisOf(fs *flag.FlagSet) string {
	out := fs.Output()
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.Usage()
	fs.SetOutput(out)
	synopsis, _, _ := strings.Cut(help.String(), "\n")
	return synopsis
}

// hasFlags reports whether fs has any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// fromVariable is err, a usage error about the value of fs's flag name
// that the command found once its flags were parsed, saying which IDEM_*
// variable the value came from when the command line did not set the
// flag: the command as typed shows no such value. Other errors, and
// those that name the variable already, are returned as they are.
func fromVariable(fs *flag.FlagSet, getenv env, name string, err error) error {
	if !isUsage(err) {
		return err
	}
	variable := envName(commandOf(fs), name)
	if _, set := getenv(variable); setOnCommandLine(fs, name) || !set || strings.Contains(err.Error(), variable) {
		return err
	}
	return usagef("%w (--%s from %s)", err, name, variable)
}

// setOnCommandLine reports whether the command line, not an IDEM_*
// variable, set fs's flag name, once fs is parsed.
func setOnCommandLine(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// commandLineWins settles flags a and b of fs, which exclude each other,
// when the command line sets one and the other comes from its IDEM_*
// variable: the command line wins, as it does over the variable of the
// same flag, and the other flag is put back to its default. Both set on
// the command line, or both by variables, are left for the command to
// refuse. It returns the name of the flag it put back, if any.
func commandLineWins(fs *flag.FlagSet, a, b string) (putBack string) {
	fa, fb := fs.Lookup(a), fs.Lookup(b)
	if fa == nil || fb == nil {
		return ""
	}
	setA, setB := setOnCommandLine(fs, a), setOnCommandLine(fs, b)
	switch {
	case setA && !setB:
		_ = fb.Value.Set(fb.DefValue)
		return b
	case setB && !setA:
		_ = fa.Value.Set(fa.DefValue)
		return a
	}
	return ""
}

// boolGivenApart reports whether the first of args that fs did not parse
// as a flag is a boolean value given apart from the boolean flag before
// it, as in --migrate false: the flag package takes --migrate for
// --migrate=true and stops at "false", leaving it and every flag after it
// unparsed. It returns the flag's name and the value.
func boolGivenApart(fs *flag.FlagSet, args []string) (name, value string, ok bool) {
	i := len(args) - fs.NArg()
	if i < 1 || strings.Contains(args[i-1], "=") {
		return "", "", false
	}
	name = strings.TrimPrefix(strings.TrimPrefix(args[i-1], "-"), "-")
	f := fs.Lookup(name)
	if f == nil || !strings.HasPrefix(args[i-1], "-") {
		return "", "", false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	if _, err := strconv.ParseBool(args[i]); !isBool || !b.IsBoolFlag() || err != nil {
		return "", "", false
	}
	return name, args[i], true
}

// explained is a flag's value whose Set errors say what the flag
// accepts, where the flag package's say only "parse error".
type explained struct {
	flag.Value
	want string // e.g. "a duration such as 30s or 24h"
}

func (e explained) Set(s string) error {
	err := e.Value.Set(s)
	switch {
	case err == nil:
		return nil
	case err.Error() == "parse error": // the flag package's errParse
		return fmt.Errorf("want %s", e.want)
	default: // "value out of range"…
		return fmt.Errorf("%v: want %s", err, e.want)
	}
}

// IsBoolFlag keeps a boolean flag one that needs no value.
func (e explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// explainValues wraps the values of fs's flags of the flag package's
// types in explained; restore puts the flag package's own back, which
// its help needs to show each flag's type and default. restore may be
// called more than once.
func explainValues(fs *flag.FlagSet) (restore func()) {
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var want string
		switch g.Get().(type) {
		case bool:
			want = "true or false (or 1/0, t/f, T/F, TRUE/FALSE, True/False)"
		case time.Duration:
			want = "a duration such as 30s or 24h (a number and a unit: ns, us, ms, s, m or h; 1m30s combines them)"
		case int, int64:
			want = "a whole number such as 1048576, without a unit"
		case uint, uint64:
			want = "a whole number of 0 or more, without a unit"
		case float64:
			want = "a number such as 0.5"
		default:
			return
		}
		orig[f] = f.Value
		f.Value = explained{Value: f.Value, want: want}
	})
	return func() {
		for f, v := range orig {
			f.Value = v
		}
	}
}
