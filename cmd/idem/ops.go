package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// parseNamespace is the namespace of --namespace s. Its usage error says
// what is wrong with s after "--namespace: ", without the library's
// "idem: invalid namespace: ", which after "idem proxy: " would say idem
// twice.
func parseNamespace(s string) (idem.Namespace, error) {
	ns, err := idem.NewNamespace(s)
	if err != nil {
		return "", usagef("--namespace: %s", strings.TrimPrefix(err.Error(), idem.ErrInvalidNamespace.Error()+": "))
	}
	return ns, nil
}

// noTable explains err, from a store call, when it says that the store's
// table is not there (Postgres's undefined_table): idem migrate creates
// it (the DSN suggested with it is shown without its password, and says
// so: passwordNote); or that the table of that name lacks a column of the
// store's (Postgres's undefined_column, SQLite's "no such column"), which
// no version of the store's schema does: the table is another program's,
// which neither idem migrate nor any other command changes. Other errors
// are returned as they are.
func noTable(st *openedStore, err error) error {
	pe, isPg := errors.AsType[*pgconn.PgError](err)
	var column string
	switch {
	case isPg && pe.Code == "42P01": // undefined_table
		return notMigrated{fmt.Errorf("%s store %s: %s; run idem migrate --store %s to create the table%s", st.kind, st.name, pe.Message, shellWord(st.name), st.note)}
	case isPg && pe.Code == "42703": // undefined_column
		column = pe.Message
	case !isPg && st.kind == "sqlite" && err != nil && strings.Contains(err.Error(), "no such column: "):
		_, c, _ := strings.Cut(err.Error(), "no such column: ")
		column = "no column " + strings.TrimSuffix(c, " (1)")
	default:
		return err
	}
	where := "a database of its own"
	if st.kind == "postgres" {
		where += ", or a schema of its own (CREATE SCHEMA idem, then search_path=idem in the DSN)"
	}
	return fmt.Errorf("%s store %s: table %s is not the idem store's (%s): another program's table of the same name? give idem %s", st.kind, st.name, st.table, column, where)
}

// checkTable checks that the store's table is there, for a store that
// was not migrated: the record of a key no client sends is looked up and
// must be found missing, not fail. A missing table is explained as
// noTable explains it; a store without tables (memory, Redis) passes.
func checkTable(ctx context.Context, st *openedStore, ns idem.Namespace) error {
	k, err := idem.ParseKey(ns, "idem-table-check")
	if err != nil {
		return err
	}
	if _, err := st.Get(ctx, k); err != nil && !errors.Is(err, idem.ErrNotFound) {
		return noTable(st, err)
	}
	return nil
}

// openStoreWritten is openStore for the commands that work on records a
// proxy wrote (inspect, purge): the memory store, which lives and ends
// inside one proxy process, is refused, since a new one holds nothing.
func openStoreWritten(ctx context.Context, dsn string, o storeOpts) (*openedStore, error) {
	if dsn == "memory" {
		return nil, usagef("--store memory: the memory store lives and ends inside the idem proxy that uses it, so this command would see a new, empty one; give the --store of a SQLite, Postgres or Redis store")
	}
	return openStore(ctx, dsn, o)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN: memory (nothing to create), "+storeDSNs)
	describe(fs, "idem migrate [--store DSN]", summaryOf("migrate")+"; running it again changes nothing, and the memory and Redis stores have none")
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	st, err := openStore(ctx, *dsn, storeOpts{})
	if err != nil {
		return fromVariable(fs, getenv, "store", err)
	}
	defer st.close()
	if st.migrate == nil {
		fmt.Fprintf(stdout, "%s store: no schema to migrate\n", st.kind)
		return nil
	}
	if err := st.migrate(ctx); err != nil {
		return noTable(st, err)
	}
	fmt.Fprintf(stdout, "%s store: schema up to date (what was missing, if anything, created)\n", st.kind)
	return nil
}

func runPurge(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem purge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN: "+storeDSNs)
	nsFlag := fs.String("namespace", "http", "namespace to purge")
	describe(fs, "idem purge [--store DSN] [--namespace NS]", summaryOf("purge")+" of a namespace (idem proxy also does, every --purge-interval)")
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	ns, err := parseNamespace(*nsFlag)
	if err != nil {
		return fromVariable(fs, getenv, "namespace", err)
	}
	st, err := openStoreWritten(ctx, *dsn, storeOpts{existing: true})
	if err != nil {
		return fromVariable(fs, getenv, "store", err)
	}
	defer st.close()
	n, err := st.PurgeExpired(ctx, ns, time.Now())
	if err != nil {
		return purgeError(ctx, st, ns, n, err)
	}
	fmt.Fprintf(stdout, "purged %d expired records of namespace %s\n", n, ns)
	return nil
}

// purgeError explains err, which ended a purge of namespace ns after n
// records were deleted: the stores delete in batches, each committed on
// its own, so those n stay deleted, and the message counts them. A purge
// ended by SIGINT or SIGTERM (ctx done) says it was interrupted.
func purgeError(ctx context.Context, st *openedStore, ns idem.Namespace, n int, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted after purging %d expired records of namespace %s (they stay purged)", n, ns)
	case n > 0:
		return fmt.Errorf("purged %d expired records of namespace %s before failing (they stay purged): %w", n, ns, noTable(st, err))
	default:
		return noTable(st, err)
	}
}

// inspected is the JSON idem inspect prints (inspectHelp describes it).
type inspected struct {
	Namespace      string             `json:"namespace"`
	Scope          string             `json:"scope,omitempty"`
	Key            string             `json:"key"`
	Status         idem.Status        `json:"status"`
	Fingerprint    string             `json:"fingerprint"`
	Fence          int64              `json:"fence"`
	CreatedAt      time.Time          `json:"created_at"`
	ExpiresAt      time.Time          `json:"expires_at"`
	LeaseExpiresAt *time.Time         `json:"lease_expires_at,omitempty"`
	Request        json.RawMessage    `json:"request"`
	Result         json.RawMessage    `json:"result,omitempty"`
	Response       *inspectedResponse `json:"response,omitempty"`
	Error          *idem.StoredError  `json:"error,omitempty"`
}

// inspectedResponse is a response recorded by idem proxy or the idemhttp
// middleware, decoded from the record's result.
type inspectedResponse struct {
	Status     int         `json:"status"`
	Header     http.Header `json:"header"`
	Body       any         `json:"body"`        // json.RawMessage, string or []byte, as BodyFormat says
	BodyFormat string      `json:"body_format"` // "json", "text" or "base64"
}

// inspectHelp is what idem inspect -h says above the flags.
const inspectHelp = `usage: idem inspect [--store DSN] --key K [--namespace NS] [--scope S | [--scope-by HOW] --credential C]

Show the live record of a key as JSON: its namespace, scope and key; its
status (in_progress, committed, failed_permanent); the fingerprint of the
request that took the key, the fence, created_at, expires_at and, while a
request holds the key, lease_expires_at; request, what was recorded of
that request; result, the outcome as stored; and error, for a failure.

The proxy keeps the key of a request in its caller's scope (see idem
proxy --scope-by): give --credential, the value of the Authorization
header the request was sent with (or of the header or cookie --scope-by
names: the same --scope-by as the proxy's, which IDEM_SCOPE_BY sets for
both), or --scope as stored.

When the record is one of idem proxy or the idemhttp middleware, a
"response" member beside "result" shows the recorded HTTP response decoded
("result" keeps it as stored, its body in base64):

  "response": {
    "status": 201,
    "header": {"Content-Type": ["application/json"]},
    "body": {"id": 1},
    "body_format": "json"
  }

body_format says how "body" holds the response's body:
  json    the body itself, when Content-Type is JSON (application/json or
          a type ending in +json) and the body parses and is UTF-8
  text    a string, when the body is valid UTF-8
  base64  a string in base64, otherwise
A header value that is not valid UTF-8 shows U+FFFD in place of the bytes
that are not; "result" has them exact. Records written by idem.Do or
idem.Typed have no "response".

flags:
`

// decodeResponse is the response of a record that idem proxy or the
// idemhttp middleware wrote, or nil for any other record: its request
// must be what idemhttp records of a request (method, target, content
// type, body size, nothing else) and its result a recorded response.
func decodeResponse(rec idem.Record) *inspectedResponse {
	var req struct {
		Method      *string `json:"method"`
		Target      *string `json:"target"`
		ContentType string  `json:"content_type"`
		BodyBytes   *int64  `json:"body_bytes"`
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Request))
	dec.DisallowUnknownFields()
	if len(rec.Result) == 0 || dec.Decode(&req) != nil || req.Method == nil || req.Target == nil || req.BodyBytes == nil {
		return nil
	}
	status, header, body, err := idemhttp.DecodeRecordedResponse(rec.Result)
	if err != nil {
		return nil
	}
	r := &inspectedResponse{Status: status, Header: header, Body: body, BodyFormat: "base64"}
	mt, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	switch {
	case (mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid(body) && utf8.Valid(body):
		// json.Valid takes strings that are not UTF-8, which would make
		// the output no JSON (RFC 8259) for a strict parser.
		r.Body, r.BodyFormat = json.RawMessage(body), "json"
	case utf8.Valid(body):
		r.Body, r.BodyFormat = string(body), "text"
	}
	return r
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", DefaultDSN, "store DSN: "+storeDSNs)
	nsFlag := fs.String("namespace", "http", "namespace of the record")
	keyFlag := fs.String("key", "", "the Idempotency-Key value (required; variable "+envName(commandOf(fs), "key")+")")
	scope := fs.String("scope", "", "the key's scope as stored")
	scopeBy := fs.String("scope-by", "authorization", "what the proxy kept callers' keys apart by (its --scope-by): authorization, header:NAME, cookie:NAME or none; --credential is the value of that header or cookie")
	credential := fs.String("credential", "", "compute the scope from the caller's credential, as the proxy does: the value of the Authorization header, or of the header or cookie --scope-by names (spaces and tabs around it are dropped, as HTTP drops them)")
	auth := fs.String("authorization", "", "the same as --credential, with --scope-by authorization")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), inspectHelp)
		fs.PrintDefaults()
	}
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	commandLineWins(fs, "scope", "authorization")
	commandLineWins(fs, "scope", "credential")
	commandLineWins(fs, "credential", "authorization")
	ns, err := parseNamespace(*nsFlag)
	if err != nil {
		return fromVariable(fs, getenv, "namespace", err)
	}
	if *keyFlag == "" {
		return missingFlag("--key is required")
	}
	k, err := idem.ParseKey(ns, *keyFlag)
	if err != nil {
		if ke, ok := errors.AsType[*idem.KeyError](err); ok { // its Detail, without "idem: invalid idempotency key: "
			return fromVariable(fs, getenv, "key", usagef("--key: %s", ke.Detail))
		}
		return fromVariable(fs, getenv, "key", usagef("--key: %w", err))
	}
	keyScope, err := parseScopeBy(*scopeBy)
	if err != nil {
		return fromVariable(fs, getenv, "scope-by", err)
	}
	// scopeFlag is the flag the scope came from.
	scopeFlag := "scope"
	for _, f := range []struct {
		name  string
		value string
	}{{"credential", *credential}, {"authorization", *auth}} {
		switch {
		case f.value == "":
		case scopeFlag != "scope" || *scope != "":
			return usagef("give --%s or --%s, not both", scopeFlag, f.name)
		default:
			scopeFlag = f.name
		}
	}
	if scopeFlag != "scope" {
		given := *credential
		if scopeFlag == "authorization" {
			given = *auth
		}
		if *scope, err = scopeOfCredential(*scopeBy, keyScope, scopeFlag, given); err != nil {
			return fromVariable(fs, getenv, scopeFlag, err)
		}
	}
	if k, err = k.WithScope(*scope); err != nil {
		return fromVariable(fs, getenv, scopeFlag, usagef("--scope: %w", err))
	}
	st, err := openStoreWritten(ctx, *dsn, storeOpts{existing: true, readOnly: true})
	if err != nil {
		return fromVariable(fs, getenv, "store", err)
	}
	defer st.close()
	rec, err := st.Get(ctx, k)
	if errors.Is(err, idem.ErrNotFound) {
		hint := ""
		if what := credentialOf(*scopeBy); k.Scope() == "" && what != "" { // the proxy keeps the key of a request with a credential in a scope of its own
			hint = "; the record of a request sent with " + what + " is in a scope of its own: give --credential with its value"
		}
		return fmt.Errorf("no live record for key %q in namespace %s (scope %q): never recorded, expired (a record lives --ttl after its request) or purged%s", k.Value(), ns, k.Scope(), hint)
	}
	if err != nil {
		return noTable(st, err)
	}
	out := inspected{
		Namespace: string(ns), Scope: k.Scope(), Key: k.Value(), Status: rec.Status, Fingerprint: rec.Fingerprint.String(),
		Fence: rec.Fence, CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, Request: rec.Request, Result: rec.Result, Error: rec.Error,
		Response: decodeResponse(rec),
	}
	if !rec.LeaseExpiresAt.IsZero() {
		out.LeaseExpiresAt = &rec.LeaseExpiresAt
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	// A decoded body is shown as it is, its '<', '>' and '&' unescaped;
	// other records are printed as they always were.
	enc.SetEscapeHTML(out.Response == nil)
	return enc.Encode(out)
}

// scopeOfCredential is the scope the proxy, keeping callers apart by
// scopeBy (parsed into keyScope), computes for a request sent with
// credential: the value of the Authorization header, or of the header or
// cookie scopeBy names. flag is the flag credential came from:
// "authorization" names the Authorization header, and so goes only with
// --scope-by authorization.
func scopeOfCredential(scopeBy string, keyScope func(*http.Request) string, flag, credential string) (string, error) {
	kind, name, _ := strings.Cut(scopeBy, ":")
	switch {
	case kind == "none":
		return "", usagef("--%s: --scope-by none keeps every key in one scope, computed from no credential", flag)
	case flag == "authorization" && kind != "authorization":
		return "", usagef("--authorization is the Authorization header's value, which --scope-by %s does not read: give the value of %s as --credential", scopeBy, credentialOf(scopeBy))
	}
	// The proxy computes the scope from the value it received, which HTTP
	// delivers without the spaces and tabs around it: the value as the
	// client sent it must give the same scope.
	credential = strings.Trim(credential, " \t")
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	switch kind {
	case "authorization":
		r.Header.Set("Authorization", credential)
	case "header":
		r.Header.Set(name, credential)
	case "cookie":
		r.Header.Set("Cookie", name+"="+credential)
	}
	return keyScope(r), nil
}

// credentialOf names what the proxy keeping callers apart by scopeBy (a
// valid --scope-by) reads the scope from, or "" for none.
func credentialOf(scopeBy string) string {
	kind, name, _ := strings.Cut(scopeBy, ":")
	switch kind {
	case "authorization":
		return "the Authorization header"
	case "header":
		return "the " + http.CanonicalHeaderKey(name) + " header"
	case "cookie":
		return "the cookie " + name
	}
	return ""
}
