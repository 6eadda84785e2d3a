package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // the cgo-free SQLite driver, registered as "sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/store/pgstore"
	"github.com/idemgo/idem/store/redisstore"
	"github.com/idemgo/idem/store/sqlitestore"
)

// DefaultDSN is the embedded default store.
const DefaultDSN = "sqlite:idem.db"

// storeDSNs are the forms of a store DSN but memory, for the --store
// flag's help: TLS is rediss:// for a Redis server, rediss-cluster:// for
// a Redis Cluster.
const storeDSNs = "sqlite:PATH, postgres://…, redis://… (rediss://… for TLS), or redis-cluster://HOST:PORT?addr=HOST:PORT… for a Redis Cluster (rediss-cluster://… for TLS)"

// storeOpts are the store settings the commands pass through.
type storeOpts struct {
	retention, lease time.Duration
	table            string // SQL stores; empty = default
	// batch sends the calls of concurrent requests together: pgstore's
	// Pipeline, redisstore's AutoPipeline, sqlitestore's Batch.
	batch bool
	// existing is for the commands that only read or delete (inspect,
	// purge): a SQLite database must already be there, with its table,
	// and is never created.
	existing bool
	// readOnly is for the commands that only read (inspect): a SQLite
	// database file this user may not write will do.
	readOnly bool
	// maxPayload is the store's Config.MaxPayload: 0 for its default.
	maxPayload int
}

// openedStore is a store with what the commands need around it.
type openedStore struct {
	idem.Store
	kind    string
	name    string                          // the store as messages show it: a redacted DSN, a SQLite file's absolute path
	note    string                          // passwordNote of the DSN, for a command a message suggests with name
	table   string                          // the SQL stores' table, as messages name it
	migrate func(ctx context.Context) error // nil when the backend has no schema
	ping    func(ctx context.Context) error
	failed  func() // told when a request meets a store error; nil when nothing listens
	close   func()
}

// openStore opens the store a DSN names. It checks that the backend answers
// (ping) but does not migrate.
func openStore(ctx context.Context, dsn string, o storeOpts) (*openedStore, error) {
	switch {
	case dsn == "memory":
		s, err := memstore.New(memstore.Config{Retention: o.retention, Lease: o.lease, MaxPayload: o.maxPayload})
		if err != nil {
			return nil, err
		}
		return &openedStore{Store: s, kind: "memory", name: "memory", ping: func(context.Context) error { return nil }, close: func() {}}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"), o)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn, o)
	case isRedisDSN(dsn):
		return openRedis(ctx, dsn, o)
	case dsn == "":
		return nil, usagef("--store is empty (on the command line or in IDEM_STORE): want memory, sqlite:PATH, postgres://…, redis://…, rediss://…, redis-cluster://… or rediss-cluster://… (neither set: %s)", DefaultDSN)
	case looksLikeFilePath(dsn):
		return nil, usagef("unknown store DSN %q: did you mean --store %s? (a SQLite database is sqlite:PATH)", dsn, shellWord("sqlite:"+dsn))
	default:
		return nil, usagef("unknown store DSN %q: want memory, sqlite:PATH, postgres://…, redis://…, rediss://…, redis-cluster://… or rediss-cluster://…", redact(dsn))
	}
}

// looksLikeFilePath reports whether dsn, which names no store, reads as
// the path of a database file given without "sqlite:": it has no ':' (as
// a URL or another scheme's DSN has), no spaces or '=' (as a libpq
// key=value string has), and has a directory in it or ends in a SQLite
// file's usual extension.
func looksLikeFilePath(dsn string) bool {
	if strings.ContainsAny(dsn, ": =") {
		return false
	}
	switch filepath.Ext(dsn) {
	case ".db", ".db3", ".sqlite", ".sqlite3":
		return true
	}
	return strings.Contains(dsn, "/")
}

// redact returns a DSN as messages may show it: without the password of
// a URL's user part, of a password query parameter or of a libpq
// "key=value" string. A URL too malformed to read is shown by its scheme
// alone, since its password cannot be told apart from the rest.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	scheme, _, isURL := strings.Cut(dsn, "://")
	isURL = isURL && urlScheme.MatchString(scheme)
	if err == nil && isURL && u.User == nil {
		// A user part with a character that ends the authority (a '#', a
		// '/' or a '?' in the user name: "postgres://us#er:secret@h")
		// leaves the password in the path, query or fragment, where
		// u.Redacted does not look.
		rest := dsn[len(scheme)+len("://"):]
		if masked := hideUserPassword(rest); masked != rest {
			return scheme + "://" + queryPassword.ReplaceAllString(masked, "${1}xxxxx")
		}
	}
	switch {
	case err != nil && isURL:
		return scheme + "://(unreadable URL)"
	case err == nil && strings.Contains(u.Opaque, "@"): // user:password@host, no "//"
		return u.Scheme + ":xxxxx@" + u.Opaque[strings.LastIndexByte(u.Opaque, '@')+1:]
	case err == nil && u.Opaque != "" && strings.Contains(dsn, "@"):
		// The same with a '?' or '#' in the password, which ends the
		// opaque part before the '@': the host is after the last '@'.
		host := dsn[strings.LastIndexByte(dsn, '@')+1:]
		if i := strings.IndexAny(host, "?#"); i >= 0 {
			host = host[:i]
		}
		return u.Scheme + ":xxxxx@" + host
	case err != nil || u.Scheme == "" && u.User == nil || u.Opaque != "" && u.RawQuery == "":
		// A key=value string, a path, a user:password@host that is no URL
		// (my_user:secret@host)…
		return passwordField.ReplaceAllString(hideUserPassword(dsn), "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	// Also a password the query does not name as such: sslpassword, or
	// one after a stray '?' (?sslmode=off?password=…).
	return queryPassword.ReplaceAllString(u.Redacted(), "${1}xxxxx")
}

// passwordNote is what a message that suggests a command with dsn, shown
// redacted, adds after it when redact hid a password of dsn: pasted as it
// is, the command would fail to authenticate, and the password is never
// shown. Empty when there is no password to hide.
func passwordNote(dsn string) string {
	if strings.Count(redact(dsn), "xxxxx") <= strings.Count(dsn, "xxxxx") {
		return ""
	}
	return ", with the DSN's password in place of xxxxx (it is not shown here)"
}

// urlError is err without the URL a *url.Error quotes, password and all.
func urlError(err error) error {
	if _, ok := errors.AsType[*url.Error](err); ok {
		return errors.New("not a valid URL")
	}
	return err
}

// passwordField is the password of a libpq "key=value" connection string,
// quoted or not.
var passwordField = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// userPassword is a user:password@ starting a DSN that is not a URL, or a
// word of it: from the word's first colon to the last '@', spaces and line
// breaks and all, so that whatever comes before the colon (//user, a
// scheme no URL could have, user@server) the password is hidden.
var userPassword = regexp.MustCompile(`(?s)(^|\s)([^\s:]*):.*@`)

// hideUserPassword replaces the password of a user:password@ in s (see
// userPassword) with xxxxx.
func hideUserPassword(s string) string {
	return userPassword.ReplaceAllString(s, "${1}${2}:xxxxx@")
}

// queryPassword is a password parameter in a URL's text.
var queryPassword = regexp.MustCompile(`(?i)(\b(?:ssl)?password=)[^&#]*`)

// urlScheme is what a URL's scheme may be (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// sqliteQuery matches a path that ends in what reads as the query of a
// SQLite URI or of a driver's DSN (idem.db?mode=ro,
// idem.db?_pragma=busy_timeout(5000), or another driver's
// idem.db?_busy_timeout=5000) rather than a file name: a '?' and, after it
// or after a '&', a parameter name and its '='.
var sqliteQuery = regexp.MustCompile(`\?(?:.*&)?[A-Za-z_][A-Za-z0-9_]*=`)

// sqliteParams configure every SQLite connection: WAL so readers never
// block the writer, a busy timeout so writers queue instead of failing,
// synchronous=FULL so a committed record survives a power cut, a -wal
// file cut back to 16 MiB after a checkpoint however large a burst grew
// it, and immediate write transactions.
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=journal_size_limit(16777216)&_txlock=immediate"

func openSQLite(ctx context.Context, path string, o storeOpts) (*openedStore, error) {
	switch {
	case path == "":
		return nil, usagef("sqlite DSN has no path: want sqlite:PATH, e.g. sqlite:idem.db")
	case path == ":memory:":
		return nil, usagef(`sqlite::memory: would be a file named ":memory:"; for a store in memory use the DSN memory`)
	case strings.HasPrefix(path, "//"):
		return nil, usagef("sqlite DSN %q: want sqlite:PATH (sqlite:idem.db, sqlite:/var/lib/idem.db), not a URL", "sqlite:"+path)
	case strings.HasPrefix(path, "file:"), sqliteQuery.MatchString(path):
		// Taken as a path, it would be a database of its own, in a file
		// named for the whole string.
		return nil, usagef("sqlite DSN %q: want sqlite:PATH (sqlite:idem.db, sqlite:/var/lib/idem.db), not a SQLite URI or parameters: idem sets the connection's (WAL, busy_timeout, synchronous) itself", "sqlite:"+path)
	}
	if err := unexpandedTilde(path); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	params := sqliteParams
	if o.existing {
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			return nil, notMigrated{fmt.Errorf("no SQLite database at %s; run idem migrate --store %s to create it, or check the path", abs, shellWord("sqlite:"+abs))}
		}
		params += "&mode=rw" // open, never create
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().IsRegular() && !o.readOnly && !canWrite(abs) {
		return nil, sqliteReadOnly(abs)
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: params} // escapes '?', '#' and '%' in the path
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	// One connection: SQLite has one writer, and in lease mode a single
	// connection beats a pool (no lock hand-offs between connections).
	db.SetMaxOpenConns(1)
	if err := pingSQLite(ctx, db); err != nil {
		_ = db.Close()
		return nil, sqliteOpenError(abs, err)
	}
	s, err := sqlitestore.New(db, sqlitestore.Config{Table: o.table, Retention: o.retention, Lease: o.lease, Batch: o.batch, MaxPayload: o.maxPayload})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if o.existing {
		if err := sqliteHasTable(ctx, db, abs, o.table); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return &openedStore{Store: s, kind: "sqlite", name: "sqlite:" + abs, table: tableName(o.table, sqlitestore.DefaultTable), migrate: s.Migrate, ping: db.PingContext, close: func() { _ = db.Close() }}, nil
}

// unexpandedTilde is the usage error of a sqlite:PATH whose first element
// is "~" or "~user", which a shell expands only at the start of a word,
// not after "sqlite:", and no directory of that name is there: the
// database would go in a directory named "~" under the working directory,
// which is not what was meant (nor is creating one, which a later rm -r ~
// would turn into removing the home directory). A directory named so that
// exists is taken, as the path is written. It is nil otherwise.
func unexpandedTilde(path string) error {
	first, rest, _ := strings.Cut(path, "/")
	if !strings.HasPrefix(first, "~") {
		return nil
	}
	if _, err := os.Stat(first); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if first != "~" {
		return usagef("sqlite DSN %q: %s is not expanded here (a shell expands it only at the start of a word, not after sqlite:): write the home directory of %s out", "sqlite:"+path, first, first[1:])
	}
	here := ""
	if home, err := os.UserHomeDir(); err == nil {
		here = fmt.Sprintf(" (here %s)", shellWord("sqlite:"+filepath.Join(home, rest)))
	}
	return usagef("sqlite DSN %q: ~ is not expanded here (a shell expands it only at the start of a word, not after sqlite:): write the home directory out, as in sqlite:$HOME/%s%s", "sqlite:"+path, rest, here)
}

// tableName is table, or def when table is empty.
func tableName(table, def string) string {
	if table == "" {
		return def
	}
	return table
}

// sqliteHasTable checks that the database at path has the store's table
// (table, or sqlitestore.DefaultTable when empty).
func sqliteHasTable(ctx context.Context, db *sql.DB, path, table string) error {
	if table == "" {
		table = sqlitestore.DefaultTable
	}
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE`, table).Scan(&n)
	switch {
	case err != nil:
		return fmt.Errorf("read sqlite database %s: %w", path, err)
	case n == 0:
		return notMigrated{fmt.Errorf("SQLite database %s has no table %s; run idem migrate --store %s to create it", path, table, shellWord("sqlite:"+path))}
	}
	return nil
}

func openPostgres(ctx context.Context, dsn string, o storeOpts) (*openedStore, error) {
	stale := newStaleCheck()
	pool, err := connectPostgres(ctx, dsn, stale.configure)
	if err != nil {
		return nil, err
	}
	if !o.readOnly {
		if err := notReadOnly(ctx, pool, redact(dsn)); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s, err := pgstore.New(pool, pgstore.Config{Table: o.table, Retention: o.retention, Lease: o.lease, Pipeline: o.batch, MaxPayload: o.maxPayload})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &openedStore{Store: s, kind: "postgres", name: redact(dsn), note: passwordNote(dsn), table: tableName(o.table, pgstore.DefaultTable), migrate: s.Migrate, ping: pool.Ping, failed: stale.failed, close: func() { closeDraining(s, pool.Close, storeCloseWait) }}, nil
}

// notReadOnly refuses a Postgres server at (a redacted DSN) whose
// transactions are read-only: a standby, a read replica's endpoint, or a
// database or role with default_transaction_read_only. The store writes
// for every request: the proxy would start, /healthz would say ok, and
// every protected request would get 503. A failure to ask is no refusal:
// the store's own calls report it.
func notReadOnly(ctx context.Context, pool *pgxpool.Pool, at string) error {
	var ro string
	if err := pool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro); err != nil || ro != "on" {
		return nil
	}
	return fmt.Errorf("postgres at %s is read-only (a standby, a read replica, or default_transaction_read_only): the store writes a record for every request; give the DSN of the primary", at)
}

// pgConnectError explains err, the failure of a first connection to the
// server cfg names: a server that answered is told apart, by the SQLSTATE
// of its refusal, from one that could not be reached. cfg's password is
// never shown (pgconn's errors name only the user and the database).
func pgConnectError(cfg *pgconn.Config, err error) error {
	at := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") { // a Unix socket's directory
		at = filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	pe, ok := errors.AsType[*pgconn.PgError](err)
	switch {
	case errors.Is(err, context.Canceled): // SIGINT or SIGTERM, not the server
		return fmt.Errorf("interrupted while connecting to postgres at %s", at)
	case !ok && errors.Is(err, context.DeadlineExceeded): // connected, or not, and no answer
		return unreachable{fmt.Errorf("postgres at %s is unreachable: it did not answer within %s: %w", at, pgConnectTimeout, oneLine{err})}
	case !ok:
		return unreachable{fmt.Errorf("postgres at %s is unreachable: %w", at, oneLine{err})}
	case pe.Code == "57P03": // cannot_connect_now: starting up, shutting down, in recovery
		return unreachable{fmt.Errorf("postgres at %s refused the connection: %w", at, pe)}
	case pe.Code == "3D000": // invalid_catalog_name
		return fmt.Errorf("postgres at %s has no database %q: create it (createdb %s) or fix the database name in the DSN: %w", at, cfg.Database, shellWord(cfg.Database), pe)
	case pe.Code == "28P01": // invalid_password
		return fmt.Errorf("postgres at %s: authentication failed for user %q: check the password in the DSN: %w", at, cfg.User, pe)
	case strings.HasPrefix(pe.Code, "28"): // invalid_authorization_specification: no such role, no pg_hba.conf entry…
		return fmt.Errorf("postgres at %s: authentication failed for user %q: %w", at, cfg.User, pe)
	default: // too many connections, starting up, no CONNECT privilege…
		return fmt.Errorf("postgres at %s refused the connection: %w", at, pe)
	}
}

func openRedis(ctx context.Context, dsn string, o storeOpts) (*openedStore, error) {
	redis.SetLogger(quietRedis{})
	client, err := redisClient(dsn)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		_ = client.Close()
		if errors.Is(err, context.Canceled) { // SIGINT or SIGTERM, not the server
			return nil, fmt.Errorf("interrupted while connecting to redis at %s", redact(dsn))
		}
		scheme, _, _ := strings.Cut(dsn, "://")
		return nil, redisConnectError(redact(dsn), scheme, err)
	}
	if c, ok := client.(*redis.Client); ok { // not a redis-cluster:// DSN's, which finds its nodes itself
		info := serverInfo(pctx, c)
		err := notAClusterNode(info, dsn, c.Options().Addr)
		if err == nil && !o.readOnly {
			err = notAReplica(info, redact(dsn))
		}
		if err != nil {
			_ = client.Close()
			return nil, err
		}
	}
	s, err := redisstore.New(client, redisstore.Config{Retention: o.retention, Lease: o.lease, AutoPipeline: o.batch, MaxPayload: o.maxPayload})
	if err == nil {
		err = s.Check(pctx) // every server new enough: a cluster's nodes too
		if err != nil && !errors.As(err, new(*redisstore.VersionError)) {
			err = unreachable{fmt.Errorf("redis at %s: %w", redact(dsn), err)}
		}
	}
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return &openedStore{Store: s, kind: "redis", name: redact(dsn), ping: func(ctx context.Context) error { return client.Ping(ctx).Err() }, close: func() { closeDraining(s, func() { _ = client.Close() }, storeCloseWait) }}, nil
}

// storeCloseWait bounds how long closing a Redis or Postgres store may
// take: a server that hangs would otherwise hold the exit for as long as
// its client waits for the batches under way (30 s per node for Redis's
// auto-pipelining; for ever for a Postgres pool's connections).
const storeCloseWait = 5 * time.Second

// drainer is a store that answers, in the background, the commands of
// callers that left: pgstore's and redisstore's Store.
type drainer interface {
	Drain(ctx context.Context) error
}

// closeDraining closes the client of s (with closeClient) within wait:
// first it lets the commands of callers that left be answered (s.Drain),
// so that a Begin of theirs that reserved its key is also released, then
// closes the client. A server that does not answer within wait is given
// up on: the keys such commands reserve stay reserved until their leases
// end.
func closeDraining(s drainer, closeClient func(), wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_ = s.Drain(ctx)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		closeClient()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// redisClient makes the client of a redis:// or rediss:// DSN, or of a
// redis-cluster:// or rediss-cluster:// DSN, read as redis.ParseClusterURL
// reads a redis:// or rediss:// URL: rediss-cluster:// connects to every
// node with TLS, each node's certificate checked against the host name of
// the DSN (go-redis's TLS configuration of a cluster, shared by its
// nodes). Its calls end at their context's deadline (--store-timeout),
// not only at the client's read and write timeouts.
func redisClient(dsn string) (redis.UniversalClient, error) {
	for _, scheme := range []string{"redis", "rediss"} {
		rest, ok := strings.CutPrefix(dsn, scheme+"-cluster://")
		if !ok {
			continue
		}
		opts, err := redis.ParseClusterURL(scheme + "://" + rest)
		if err != nil {
			return nil, usagef("bad %s-cluster DSN %q: %w", scheme, redact(dsn), urlError(err))
		}
		opts.ContextTimeoutEnabled = true
		opts.DialerRetries = redisDialAttempts
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(dsn)
	if err != nil {
		return nil, usagef("bad redis DSN %q: %w", redact(dsn), urlError(err))
	}
	opts.ContextTimeoutEnabled = true
	opts.DialerRetries = redisDialAttempts
	return redis.NewClient(opts), nil
}

// redisDialAttempts is how many times go-redis dials for a connection
// before the command that wanted it fails (and is retried, up to the
// client's MaxRetries, with back-off). go-redis's default, 5 attempts 100
// ms apart for each of a command's 4 tries, held every request 2 to 3 s
// while the server refused connections, and with --fail-open delayed every
// request it forwarded as much; the command's own retries still ride out
// a blip of tens of milliseconds.
const redisDialAttempts = 1

// serverInfo is the INFO of c's server (its default sections, cluster and
// replication among them), or "" when it does not answer INFO (a command
// renamed or disabled): such a server is not checked.
func serverInfo(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx).Result()
	if err != nil {
		return ""
	}
	return info
}

// notAClusterNode refuses a redis:// or rediss:// DSN that names a node
// of a Redis Cluster, the one at addr, as its INFO says: the client would
// use it as a single server, and every key of another node's slots would
// fail with MOVED (a 503 for most of the proxy's requests, behind a
// /healthz that says ok). The error gives the cluster's DSN to use instead
// (clusterDSN: TLS and user kept, the password hidden, saying so).
func notAClusterNode(info, dsn, addr string) error {
	if !strings.Contains(info, "cluster_enabled:1") {
		return nil
	}
	return usagef("redis at %s is a node of a Redis Cluster, which a redis:// DSN would use as a single server, the keys of the other nodes failing with MOVED: give the DSN %s (?addr=HOST:PORT… adds nodes to start from)%s", redact(dsn), clusterDSN(dsn, addr), passwordNote(dsn))
}

// clusterDSN is the DSN of the Redis Cluster whose node at addr the
// redis:// or rediss:// DSN dsn names, as a message may suggest it:
// rediss-cluster:// for rediss://, so that TLS is kept, with dsn's user
// and, hidden as redact hides it, its password. The rest of dsn (a
// database, options) is left out: a cluster has one database, and takes
// other options.
func clusterDSN(dsn, addr string) string {
	scheme := "redis-cluster://"
	if strings.HasPrefix(dsn, "rediss://") {
		scheme = "rediss-cluster://"
	}
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return scheme + addr
	}
	user := url.User(u.User.Username())
	if _, ok := u.User.Password(); ok {
		user = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return scheme + user.String() + "@" + addr
}

// notAReplica refuses a redis:// or rediss:// DSN that names a replica,
// at (the DSN redacted), as its INFO says: the store writes a record for
// every request, and a replica refuses writes (READONLY) or, made
// writable, keeps them from its primary; the proxy would start, /healthz
// would say ok, and every protected request would get 503.
func notAReplica(info, at string) error {
	if !strings.Contains(info, "role:slave") {
		return nil
	}
	return fmt.Errorf("redis at %s is a replica: the store writes a record for every request; give the DSN of its primary", at)
}

// redisConnectError explains err, the failure of a first command to the
// Redis server at (a redacted DSN of scheme, "redis", "rediss-cluster"…):
// a server that answered with an error (NOAUTH: it wants a password the
// DSN does not give, which the message shows how to give in a DSN of the
// same scheme; WRONGPASS, or "invalid password" from a Redis before 6: the
// DSN's is wrong) is told apart from one that could not be reached.
func redisConnectError(at, scheme string, err error) error {
	re, ok := errors.AsType[redis.Error](err)
	switch {
	case !ok:
		return unreachable{fmt.Errorf("redis at %s is unreachable: %w", at, err)}
	case strings.HasPrefix(re.Error(), "LOADING"): // started, still reading its data from disk
		return unreachable{fmt.Errorf("redis at %s refused the connection: %w", at, err)}
	case strings.HasPrefix(re.Error(), "NOAUTH"):
		return fmt.Errorf("redis at %s wants a password: give it in the DSN (%s://:PASSWORD@host:port, or %s://USER:PASSWORD@host:port for an ACL user): %w", at, scheme, scheme, err)
	case strings.HasPrefix(re.Error(), "WRONGPASS"), strings.Contains(re.Error(), "invalid password"):
		return fmt.Errorf("redis at %s: authentication failed: check the user and password in the DSN: %w", at, err)
	default:
		return fmt.Errorf("redis at %s refused the connection: %w", at, err)
	}
}

// unreachable is the error of a first connection to a store server that
// could not be reached, or not yet (refused, timed out, starting up), as
// opposed to one that answered with a refusal a configuration mistake
// causes (a wrong password, no such database): trying again later may
// succeed, which idem proxy --fail-open does in the background.
type unreachable struct{ error }

func (e unreachable) Unwrap() error { return e.error }

// oneLine is an error shown on one line: pgconn's error for a connection
// that failed at several addresses, or with and without TLS, puts each
// attempt on a line of its own, and repeats the same one for each TLS
// mode. Its lines are joined with "; ", each distinct line once.
type oneLine struct{ error }

func (e oneLine) Unwrap() error { return e.error }

func (e oneLine) Error() string {
	var lines []string
	for line := range strings.SplitSeq(e.error.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	if len(lines) > 1 && strings.HasSuffix(lines[0], ":") { // pgconn's "failed to connect to …:"
		return lines[0] + " " + strings.Join(lines[1:], "; ")
	}
	return strings.Join(lines, "; ")
}

// isRedisDSN reports whether dsn names a Redis store.
func isRedisDSN(dsn string) bool {
	for _, scheme := range []string{"redis://", "rediss://", "redis-cluster://", "rediss-cluster://"} {
		if strings.HasPrefix(dsn, scheme) {
			return true
		}
	}
	return false
}
