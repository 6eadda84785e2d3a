package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
	"github.com/idemgo/idem/store/redisstore"
	"github.com/idemgo/idem/store/sqlitestore"
)

type proxyFlags struct {
	listen, upstream, store, admin, namespace string
	scopeBy, tlsCert, tlsKey                  string
	requireKey, failOpen, migrate, stripe     bool
	batch, upstreamHost, trustForwarded       bool
	ttl, lease, timeout, purgeEvery, drain    time.Duration
	storeTimeout, bodyTimeout                 time.Duration
	maxBody, maxCapture                       int64
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) error {
	fs := flag.NewFlagSet("idem proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f proxyFlags
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve on")
	fs.StringVar(&f.upstream, "upstream", "", "URL of the API to protect (required): http or https, a path prefix allowed, no query string")
	fs.StringVar(&f.store, "store", DefaultDSN, "store DSN: memory, "+storeDSNs)
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS (and HTTP/2) with this certificate file, PEM, the chain after the leaf; read again when it changes (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the private key file of --tls-cert, PEM")
	fs.StringVar(&f.admin, "admin", "", "address for /healthz and /metrics, plain HTTP (off when empty)")
	fs.StringVar(&f.namespace, "namespace", "http", "namespace of the proxy's records")
	fs.StringVar(&f.scopeBy, "scope-by", "authorization", "what keeps callers' keys apart: authorization (a hash of the Authorization header), header:NAME (of that header, such as header:X-Api-Key), cookie:NAME (of that cookie alone, such as cookie:session), or none (one key space: for callers whose keys cannot meet); callers without it share one scope")
	fs.BoolVar(&f.requireKey, "require-key", false, "answer 400 to POST/PATCH without an Idempotency-Key")
	fs.BoolVar(&f.failOpen, "fail-open", false, "forward requests unprotected when the store is down (off: answer 503), also from start-up while a store server cannot be reached, which is tried again in the background")
	fs.BoolVar(&f.migrate, "migrate", true, "create or upgrade the store's schema at start-up")
	fs.BoolVar(&f.stripe, "stripe", false, "Stripe-compatible profile (5xx stored, mismatch 400)")
	fs.BoolVar(&f.upstreamHost, "upstream-host", false, "send the upstream's host as the Host header (off: the client's Host is passed on); for an upstream that checks its own name, such as an HTTPS API on its own domain")
	fs.BoolVar(&f.trustForwarded, "trust-forwarded", false, "keep the X-Forwarded-* (For, Host, Proto, Port, Prefix…), X-Real-Ip and Forwarded headers requests come with (off: X-Forwarded-For/-Host/-Proto replaced by what the proxy sees, the others dropped, as a client could forge them; spellings with underscores, X_Forwarded_For, are dropped either way); for a proxy behind a load balancer or TLS terminator")
	fs.BoolVar(&f.batch, "batch-store-calls", true, "send the store calls of concurrent requests together (SQLite shared transactions, Postgres pipeline mode, Redis auto-pipelining)")
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "how long responses are kept and replayed; at least --lease (a record outlives its lease, so a shorter --ttl is refused)")
	fs.DurationVar(&f.lease, "lease", 30*time.Second, "how long a request owns its key before a retry may take over")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "how long the upstream may take to answer: its response header, and the body of a response recorded (streams and upgrades passing through are not cut)")
	fs.DurationVar(&f.storeTimeout, "store-timeout", 10*time.Second, "bound on each store call; a response's recording is tried again through a store outage for this long (keep --lease longer)")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", time.Minute, "how long the body of a protected request with a key may take to arrive, read whole before it is forwarded: 408 beyond, the request not forwarded (0: no bound; requests without a key are passed on as they come)")
	fs.DurationVar(&f.purgeEvery, "purge-interval", 10*time.Minute, "how often expired records are deleted (0: never)")
	fs.DurationVar(&f.drain, "shutdown-timeout", 30*time.Second, "how long in-flight requests, upgraded connections (WebSocket) included, may finish after SIGTERM, SIGINT or SIGHUP, or after the --listen listener fails; upgraded connections still open then are closed, and their keys released (a second signal stops at once)")
	fs.Int64Var(&f.maxBody, "max-body", idemhttp.DefaultMaxBody, "largest body of a protected request with a key, bytes: read whole to fingerprint and record it, 413 beyond (requests without a key are passed on as they come)")
	fs.Int64Var(&f.maxCapture, "max-capture", idemhttp.DefaultMaxCapture, "largest response body recorded, bytes")
	describe(fs, "idem proxy --upstream URL [--listen ADDR] [--store DSN] [flags]", summaryOf("proxy"))
	if err := parseWithHelp(fs, args, getenv, stdout); err != nil {
		return err
	}
	if f.upstream == "" {
		return missingFlag("--upstream is required (e.g. --upstream http://127.0.0.1:9000)")
	}
	up, err := parseUpstream(f.upstream)
	if err != nil {
		return fromVariable(fs, getenv, "upstream", err)
	}
	ns, err := parseNamespace(f.namespace)
	if err != nil {
		return fromVariable(fs, getenv, "namespace", err)
	}
	keyScope, err := parseScopeBy(f.scopeBy)
	if err != nil {
		return fromVariable(fs, getenv, "scope-by", err)
	}
	// A value out of range is named with the value, what the flag takes,
	// and the variable it came from when the command line did not set it.
	for _, c := range []struct {
		name, value, want string
		ok                bool
	}{
		{"ttl", f.ttl.String(), "more than 0, such as 24h", f.ttl > 0},
		{"lease", f.lease.String(), "more than 0, such as 30s", f.lease > 0},
		{"timeout", f.timeout.String(), "more than 0, such as 1m", f.timeout > 0},
		{"store-timeout", f.storeTimeout.String(), "more than 0, such as 10s", f.storeTimeout > 0},
		{"max-body", fmt.Sprint(f.maxBody), "a number of bytes more than 0, such as 1048576", f.maxBody > 0},
		{"max-capture", fmt.Sprint(f.maxCapture), "a number of bytes more than 0, such as 1048576", f.maxCapture > 0},
		{"purge-interval", f.purgeEvery.String(), "0 (never) or more, such as 10m", f.purgeEvery >= 0},
		{"body-timeout", f.bodyTimeout.String(), "0 (no bound) or more, such as 1m", f.bodyTimeout >= 0},
		{"shutdown-timeout", f.drain.String(), "more than 0, such as 30s", f.drain > 0},
	} {
		if !c.ok {
			return fromVariable(fs, getenv, c.name, usagef("--%s %s: want %s", c.name, c.value, c.want))
		}
	}
	if kind, most := recordLimit(f.store); most > 0 && recordRoom(f.maxCapture) > most {
		return fromVariable(fs, getenv, "max-capture", usagef("--max-capture %d is more than a %s store records: at most %d", f.maxCapture, kind, captureFor(most)))
	}
	// A record lives at least as long as its lease (see idem.Store): a
	// shorter --ttl would not be the time responses are kept.
	if f.ttl < f.lease {
		err := usagef("--ttl %s is shorter than --lease %s: a record lives at least as long as its lease, so responses would be kept for %s; give --ttl %s or more, or a shorter --lease", f.ttl, f.lease, f.lease, f.lease)
		return fromVariable(fs, getenv, "lease", fromVariable(fs, getenv, "ttl", err))
	}

	if (f.tlsCert == "") != (f.tlsKey == "") {
		missing, given := "tls-key", "tls-cert"
		if f.tlsCert == "" {
			missing, given = given, missing
		}
		return fromVariable(fs, getenv, given, usagef("--%s needs --%s: give both to serve HTTPS, or neither", given, missing))
	}

	logger := log.New(stderr, "idem proxy: ", log.LstdFlags|log.Lmsgprefix)
	if f.lease <= f.storeTimeout {
		// A response's Commit is made again through a store outage for up
		// to --store-timeout, with no heartbeat: a lease that lapses
		// first lets a retry take the key over and run again.
		logger.Printf("warning: --lease %s is not longer than --store-timeout %s: a response whose recording waits out a store outage may lose its key to a retry, which then runs again; give --lease more than --store-timeout", f.lease, f.storeTimeout)
	}
	var cert *servedCert
	if f.tlsCert != "" {
		if cert, err = loadServedCert(f.tlsCert, f.tlsKey, logger); err != nil {
			return err
		}
	}
	// Without --migrate the schema must be there already: a SQLite
	// database is not created, and a missing table stops the start-up
	// instead of failing every request with 503.
	open := func(ctx context.Context) (*openedStore, error) {
		st, err := openStore(ctx, f.store, storeOpts{retention: f.ttl, lease: f.lease, batch: f.batch, existing: !f.migrate, maxPayload: recordRoom(f.maxCapture)})
		if err != nil {
			return nil, withoutMigrate(f.migrate, err)
		}
		switch {
		case f.migrate && st.migrate != nil:
			if err := st.migrate(ctx); err != nil {
				st.close()
				return nil, fmt.Errorf("migrate %s store: %w", st.kind, noTable(st, err))
			}
		case !f.migrate:
			if err := checkTable(ctx, st, ns); err != nil {
				st.close()
				return nil, withoutMigrate(false, err)
			}
		}
		return st, nil
	}
	st, err := open(ctx)
	if _, ok := errors.AsType[unreachable](err); ok && f.failOpen && ctx.Err() == nil {
		// Availability over protection: a proxy restarted while its
		// store is down serves unprotected until the store is reached.
		logger.Printf("%v; --fail-open: starting anyway, requests are forwarded unprotected until the store is reached (trying again in the background)", err)
		st, err = reachLater(redact(f.store), err, open, logger), nil
	}
	if err != nil {
		return fromVariable(fs, getenv, "store", err)
	}
	defer st.close()

	m, errs, upErrs := newMetrics(), newErrorReporter(logger), newErrorReporter(logger)
	profile := idemhttp.ProfileIETF
	if f.stripe {
		profile = idemhttp.ProfileStripe
	}
	h, err := idemhttp.NewProxy(idemhttp.ProxyConfig{
		Upstream:       up,
		Timeout:        f.timeout,
		UpstreamHost:   f.upstreamHost,
		TrustForwarded: f.trustForwarded,
		ErrorLog:       log.New(upErrs, "", 0),
		Middleware: idemhttp.Config{
			Store: st, Namespace: ns, KeyScope: keyScope, RequireKey: f.requireKey, Profile: profile, FailOpen: f.failOpen,
			MaxBody: f.maxBody, MaxCapture: int(f.maxCapture), Retention: f.ttl, Lease: f.lease, StoreTimeout: f.storeTimeout,
			BodyTimeout: f.bodyTimeout,
			OnEvent: func(e idemhttp.Event) {
				m.observe(e)
				errs.report(e)
				if e.Err != nil && st.failed != nil {
					st.failed()
				}
			},
		},
	})
	if err != nil {
		return err
	}

	ln, err := listen("--listen", f.listen)
	if err != nil {
		return fromVariable(fs, getenv, "listen", err)
	}
	if upstreamIsSelf(up, ln.Addr()) {
		_ = ln.Close()
		return usagef("--upstream %s is the address the proxy listens on (--listen %s): it would forward each request to itself; give --upstream the API's address", up.Redacted(), f.listen)
	}
	// OPTIONS * goes to the upstream, as any other request does, rather
	// than being answered by the proxy's own server.
	srv := &http.Server{ReadHeaderTimeout: clientHeaderTimeout, IdleTimeout: clientIdleTimeout, ErrorLog: logger, DisableGeneralOptionsHandler: true}
	served := track(srv, h)
	var ready atomic.Bool
	var adminSrv *http.Server
	if f.admin != "" {
		// The same address would fail as one in use, with advice to
		// stop whatever listens there: the proxy itself.
		if upstreamIsSelf(&url.URL{Scheme: "http", Host: f.admin}, ln.Addr()) {
			_ = ln.Close()
			return usagef("--admin %s is the address the proxy listens on (--listen %s): give --admin an address of its own, such as 127.0.0.1:9090", f.admin, f.listen)
		}
		aln, err := listen("--admin", f.admin)
		if err != nil {
			_ = ln.Close()
			return fromVariable(fs, getenv, "admin", err)
		}
		adminSrv = &http.Server{Handler: adminHandler(st, m, &ready, f.failOpen), ReadHeaderTimeout: clientHeaderTimeout, IdleTimeout: clientIdleTimeout, ErrorLog: logger}
		go func() {
			// Requests are still served: said, not stopped for.
			if err := adminSrv.Serve(serveListener("--admin", aln)); !errors.Is(err, http.ErrServerClosed) {
				logger.Printf("--admin %s: accepting connections failed: %v; /healthz and /metrics are no longer served (requests still are)", aln.Addr(), err)
			}
		}()
		fmt.Fprintf(stdout, "idem proxy: admin on http://%s (/healthz, /metrics)\n", aln.Addr())
	}

	purgeCtx, stopPurge := context.WithCancel(context.WithoutCancel(ctx))
	purgeDone := make(chan struct{})
	go func() {
		defer close(purgeDone)
		purgeLoop(purgeCtx, st, ns, f.purgeEvery, m, logger)
	}()

	serveErr := make(chan error, 1)
	scheme := "http"
	if cert != nil {
		scheme, srv.TLSConfig = "https", cert.config()
		go func() { serveErr <- srv.ServeTLS(serveListener("--listen", ln), "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(serveListener("--listen", ln)) }()
	}
	ready.Store(true)
	fmt.Fprintf(stdout, "idem proxy: listening on %s://%s, forwarding to %s, store %s\n", scheme, ln.Addr(), up.Redacted(), st.name)

	// stop waits for the requests being served, and returns what it left
	// reserved; why opens the line it logs.
	stop := func(why string) error {
		// Only requests being served are waited for: without any, the
		// proxy stops at once, and must not say it waits.
		switch n := served.inFlight(); n {
		case 0:
			logger.Printf("%s", why)
		case 1:
			logger.Printf("%s: waiting up to %s (--shutdown-timeout) for 1 in-flight request to finish", why, f.drain)
		default:
			logger.Printf("%s: waiting up to %s (--shutdown-timeout) for %d in-flight requests to finish", why, f.drain, n)
		}
		ready.Store(false)
		d := shutdown(srv, served, f.drain, f.storeTimeout)
		switch d.closed {
		case 0:
		case 1:
			logger.Printf("closed 1 upgraded connection still open after --shutdown-timeout %s", f.drain)
		default:
			logger.Printf("closed %d upgraded connections still open after --shutdown-timeout %s", d.closed, f.drain)
		}
		if d.cutOff {
			return fmt.Errorf("requests still running after --shutdown-timeout %s were cut off: their keys stay reserved until their leases end (--lease %s), and a retry meanwhile gets 409", f.drain, f.lease)
		}
		return nil
	}
	select {
	case err = <-serveErr:
		// The listener failed: the requests being served are let finish
		// as on a signal, so that their keys are settled before the store
		// is closed.
		err = fmt.Errorf("--listen %s: accepting connections failed: %w", ln.Addr(), err)
		if cut := stop(fmt.Sprintf("stopping: %v", err)); cut != nil {
			err = fmt.Errorf("%w; %w", err, cut)
		}
	case <-ctx.Done():
		err = stop("shutting down")
	}
	stopPurge()
	<-purgeDone
	errs.flush() // the errors of the requests' last seconds, left out, not lost
	upErrs.flush()
	if adminSrv != nil {
		_ = adminSrv.Close()
	}
	return err
}

// clientIdleTimeout is how long idem proxy keeps a client's keep-alive
// connection open with no request on it (net/http's default is for ever:
// each idle connection a file descriptor and a goroutine). A variable for
// tests.
var clientIdleTimeout = 2 * time.Minute

// clientHeaderTimeout is how long idem proxy waits for a request's
// header, whole, from the moment its first byte is awaited: a client
// sending it slowly, or never ending it, holds a connection no longer.
// (A header larger than net/http's 1 MiB, http.DefaultMaxHeaderBytes, is
// answered 431.) A variable for tests.
var clientHeaderTimeout = 10 * time.Second

// serveListener is what idem proxy serves on, made of the listener it
// opened for the flag name (--listen, --admin): that listener. Tests
// replace it, to make Serve fail.
var serveListener = func(name string, ln net.Listener) net.Listener { return ln }

// withoutMigrate adds to err, from opening or checking the store, that
// --migrate=false was given, when err says that the schema is not there.
func withoutMigrate(migrate bool, err error) error {
	if _, ok := errors.AsType[notMigrated](err); ok && !migrate {
		return fmt.Errorf("--migrate=false: %w", err)
	}
	return err
}

// purgeLoop deletes expired records every interval until ctx ends.
func purgeLoop(ctx context.Context, st *openedStore, ns idem.Namespace, every time.Duration, m *metrics, logger *log.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := st.PurgeExpired(ctx, ns, time.Now())
			if err != nil {
				if ctx.Err() == nil {
					logger.Printf("purge: %v", err)
				}
				continue
			}
			m.purged.Add(int64(n))
		}
	}
}

// adminHandler serves /healthz and /metrics. /healthz answers 503 while
// the proxy starts or shuts down, and while the store does not answer
// unless failOpen (--fail-open): the proxy then forwards requests
// unprotected, and is as healthy as its upstream; taken out of service or
// restarted for the store, it would stop the traffic --fail-open is
// there to let through.
func adminHandler(st *openedStore, m *metrics, ready *atomic.Bool, failOpen bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		switch err := st.ping(ctx); {
		case err != nil && failOpen:
			_, _ = io.WriteString(w, "ok: store unavailable, requests forwarded unprotected (--fail-open)\n")
			return
		case err != nil:
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		m.write(w)
	})
	return mux
}

// recordRoom is the largest record the store must accept for responses of
// up to maxCapture body bytes: the body in base64, and room for the status
// and the headers recorded. It is never below the stores' default, so that
// a --max-capture raised past it records what it says instead of failing
// every Commit of a large response (which a retry would then run again).
func recordRoom(maxCapture int64) int {
	maxCapture = min(maxCapture, 1<<50) // no overflow below
	return int(max(idem.DefaultMaxPayload, (maxCapture+2)/3*4+recordHeaders))
}

// recordHeaders is the room recordRoom keeps for the status and headers.
const recordHeaders = 1 << 20

// captureFor is the largest --max-capture whose records fit in most bytes:
// the inverse of recordRoom.
func captureFor(most int) int { return (most - recordHeaders) / 4 * 3 }

// recordLimit is the kind of store dsn names and the largest record it
// holds (its MaxMaxPayload), or 0 when it has no such limit.
func recordLimit(dsn string) (kind string, most int) {
	switch {
	case isRedisDSN(dsn):
		return "Redis", redisstore.MaxMaxPayload
	case strings.HasPrefix(dsn, "sqlite:"):
		return "SQLite", sqlitestore.MaxMaxPayload
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "PostgreSQL", pgstore.MaxMaxPayload
	}
	return "", 0
}

// parseScopeBy reads --scope-by: authorization, header:NAME, cookie:NAME or
// none, into the middleware's KeyScope.
func parseScopeBy(s string) (func(*http.Request) string, error) {
	kind, name, named := strings.Cut(s, ":")
	switch {
	case s == "authorization":
		return idemhttp.ScopeByAuthorization, nil
	case s == "none":
		return idemhttp.NoScope, nil
	case named && kind == "header" && isToken(name):
		return idemhttp.ScopeByHeader(name), nil
	case named && kind == "cookie" && isToken(name):
		return idemhttp.ScopeByCookie(name), nil
	}
	return nil, usagef("--scope-by %q: want authorization, header:NAME (such as header:X-Api-Key), cookie:NAME (such as cookie:session) or none", s)
}

// isToken reports whether s is an HTTP token (RFC 9110), as header and
// cookie names are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
