package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
)

// ProxyConfig configures NewProxy.
type ProxyConfig struct {
	// Upstream is the API requests are forwarded to: scheme, host and an
	// optional base path (see NewProxy for how a request's target is
	// joined to it). Required. It has no user info (user:password@):
	// requests are forwarded with the client's own Authorization. A query,
	// if it has one, is put ahead of every forwarded request's own query,
	// as ReverseProxy's SetURL does; its fragment is ignored.
	Upstream *url.URL
	// Middleware configures the Idempotency-Key handling in front of the
	// upstream. Its Store is required.
	Middleware Config
	// Timeout bounds the upstream's answer to each request: from sending
	// the request to reading the response header and, for a response the
	// proxy records, its whole body. What streams through once the header
	// has come has no time limit, as through a plain reverse proxy: the
	// body of an unprotected request's response, an event stream, an
	// upgraded connection (WebSocket), a body larger than
	// [ProxyConfig].Middleware.MaxCapture. Defaults to 60 seconds.
	Timeout time.Duration
	// Transport makes the upstream calls. Defaults to a clone of
	// http.DefaultTransport that keeps up to 100 idle connections to the
	// upstream (http.DefaultTransport keeps 2 per host, so that a proxy
	// under concurrent load would dial a new connection for most requests)
	// for at most a second: a connection the upstream closed while idle is
	// not reused for a request the upstream may then have run, since the
	// default Transport never sends a request twice (see below). Keep the
	// upstream's keep-alive timeout above a second.
	//
	// net/http's Transport sends again, by itself, a request carrying an
	// Idempotency-Key header after a connection failure, though the
	// upstream may have run it. The proxy prevents that: the key goes to
	// the Transport under the lower-case map key "idempotency-key" (the
	// same header on the wire), which http.Header's methods do not find; a
	// Transport of your own that needs the key reads
	// r.Header["idempotency-key"]. It may also answer by itself, or send
	// a request of its own: a response without a Body is completed as
	// http.Client completes it, and its Request is the proxy's.
	Transport http.RoundTripper
	// UpstreamHost sends the upstream's host (Upstream.Host) as the Host
	// header of forwarded requests. By default the client's Host is passed
	// on, as most sidecar proxies do, for an API that builds absolute URLs
	// or serves several virtual hosts; set UpstreamHost for an upstream
	// that checks its own name, such as an HTTPS API on a domain of its
	// own. The client's Host is no part of a key's fingerprint or scope,
	// so that a client may retry through another of several proxies (at
	// another address, so another Host) and get its record: behind a proxy
	// for an upstream serving several virtual hosts, where one caller may
	// use one key on two of them for the same path and body, set
	// Middleware.KeyScope to a scope that includes r.Host.
	UpstreamHost bool
	// TrustForwarded keeps the X-Forwarded-For (with the address the
	// proxy sees appended), X-Forwarded-Host, X-Forwarded-Proto and
	// Forwarded headers a request comes with: for a proxy behind a load
	// balancer or TLS terminator that sets them, so that the upstream
	// learns the original client and scheme. By default, since any client
	// could forge them, they are dropped and the X-Forwarded-* headers say
	// what the proxy sees: the client's address and Host, and http or
	// https as the proxy was reached, and the other X-Forwarded-* headers
	// (X-Forwarded-Port, -Prefix, -Ssl…) and X-Real-Ip, which the proxy
	// does not set, are dropped too. Those a request's Connection header
	// lists are hop-by-hop, and dropped either way; so are, either way,
	// forwarding headers spelt with underscores (X_Forwarded_For), which
	// servers that read headers under CGI-style names
	// (HTTP_X_FORWARDED_FOR) cannot tell from the real ones. Other
	// headers naming a client (True-Client-IP, X-Client-IP) pass as any
	// other: an upstream should believe only those the proxy sets.
	TrustForwarded bool
	// ErrorLog receives upstream errors. Defaults to the log package's
	// standard logger.
	ErrorLog *log.Logger
}

// NewProxy returns a reverse proxy to cfg.Upstream with Idempotency-Key
// semantics in front of it (see package doc). Upstream failures are problem
// responses and are never recorded: 502 when the upstream cannot be reached,
// 504 when it does not answer within Timeout, 503 (store unavailable) when
// the key's reservation is lost while the upstream runs the request (the
// key taken over, or the store unreachable for the whole lease; the call
// is cancelled, and the request may have run); a retry runs again.
//
// The upstream call of a protected request is not cancelled when the client
// disconnects, and the whole response (up to [ProxyConfig].Middleware.MaxCapture) is read
// from the upstream before it is written to the client, so its result is
// recorded either way. Server-sent events (text/event-stream), protocol
// upgrades (101) and responses larger than MaxCapture are streamed through
// and not recorded; an event stream or a large response, having nothing
// to record, ends when its client goes away, as through a plain reverse
// proxy, however long the upstream keeps it open (for an upgrade, see
// below). Response trailers are passed on to the client, and recorded
// with the response they end. A request's trailers are passed on to the
// upstream, after a body the proxy holds (sent chunked then) as after
// one streamed through; they are not part of the fingerprint. Other
// requests (unprotected methods, no key) pass through as ReverseProxy
// forwards them, streamed responses included.
//
// A protocol upgrade passed on for a protected request lasts until both
// sides have ended it, or either connection is closed: the client's
// closed by the server (a shutdown closing the connections handlers took
// over, say) closes the upstream's, within a fraction of a second even
// after the client half-closed its side, so that the handler returns and
// releases its key however the upstream behaves.
//
// A request reaches the upstream at its target joined to the upstream's
// base path with a single slash, as ReverseProxy's SetURL joins them
// (/x under http://h/api, or http://h/api/, goes to /api/x; / to /api/),
// its escaping kept, and its query after the upstream's, if any; an
// absolute-form target (http://host/x) goes by its path and query. A
// target of "*" (asterisk form) names the server as a whole, for OPTIONS
// only: an OPTIONS * is forwarded as OPTIONS *, whatever the base path,
// and a request of another method with "*" is answered 400
// (ProblemTargetInvalid), reaching neither the store nor the upstream. So
// is, when the upstream has a base path, a request whose path has a ".."
// segment (/../admin, /%2e%2e/admin, /..;x/admin, /..%5Cadmin), which an
// upstream that resolves dot segments would serve from outside the base
// path; and so is a CONNECT, which asks a forward proxy for a tunnel.
// Key and fingerprint are the client's request's, never the rewritten
// one's.
//
// A body the upstream frames (Content-Length, chunked) and cuts short is an
// upstream failure (502), never recorded. A body it ends by closing the
// connection, with neither framing (HTTP/1.0 style), cannot be told from
// one cut short: it is recorded as received.
//
// Facing the internet: records are scoped by Middleware.KeyScope, by
// default the Authorization header's hash (ScopeByAuthorization). Callers
// without one, and those of an API that authenticates by cookie or an
// API-key header, share one scope: one who learns another's key gets, for
// the same request (method, target and body), the other's recorded
// response replayed, and for another request a 422 or 409 that says the
// key is in use. Set KeyScope to what identifies the caller in such an
// API. A request is read by net/http's server, which refuses ambiguous
// framing (two different Content-Lengths, a transfer coding other than
// chunked) but reads one with both Content-Length and chunked as chunked
// and keeps its connection open: behind a front proxy that frames by
// Content-Length and shares its connections among clients, have the
// front refuse such requests. The proxy sends each request upstream
// framed by itself, with the headers net/http found valid (a folded line
// unfolded), and passes on no response header with a malformed name, nor
// a CR or LF inside a value. The body of a request passed through (no
// key, unprotected method) streams to the upstream as it comes, with no
// time limit of the proxy's, as through a plain reverse proxy: bound it
// in the server (http.Server.ReadTimeout) or the upstream.
func NewProxy(cfg ProxyConfig) (http.Handler, error) {
	if cfg.Upstream == nil || cfg.Upstream.Host == "" || (cfg.Upstream.Scheme != "http" && cfg.Upstream.Scheme != "https") {
		return nil, fmt.Errorf("idemhttp: ProxyConfig.Upstream must be an absolute http or https URL, got %s", redacted(cfg.Upstream))
	}
	if cfg.Upstream.User != nil {
		return nil, fmt.Errorf("idemhttp: ProxyConfig.Upstream %s has user info, which a proxied request does not carry: set the upstream's credentials in a header (Middleware outside, or Transport)", cfg.Upstream.Redacted())
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("idemhttp: ProxyConfig.Timeout must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = t.MaxIdleConns
		t.IdleConnTimeout = time.Second
		cfg.Transport = t
	} else {
		cfg.Transport = ownTransport{cfg.Transport}
	}
	mwcfg := cfg.Middleware
	if mwcfg.BeginTx != nil {
		// The upstream writes in no transaction of the proxy's, and a
		// held response would stop streams and upgrades.
		return nil, errors.New("idemhttp: ProxyConfig.Middleware.BeginTx: transaction mode is for handlers in this process, not for a proxy")
	}
	if err := mwcfg.validate(); err != nil {
		return nil, err
	}
	mw, err := New(mwcfg)
	if err != nil {
		return nil, err
	}
	upstream := cfg.Upstream
	writeProblem := mwcfg.ErrorWriter
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			if pr.In.URL.Path == "*" { // asterisk form: the server as a whole
				pr.Out.URL.Path, pr.Out.URL.RawPath, pr.Out.URL.RawQuery = "", "", ""
				pr.Out.URL.Opaque = "*"
			}
			dropForgedForwarding(pr.Out.Header, cfg.TrustForwarded)
			if cfg.TrustForwarded {
				forwarded(pr)
			} else {
				pr.SetXForwarded()
			}
			if v := pr.Out.Header["X-Forwarded-Host"]; len(v) == 1 && v[0] == "" {
				// An HTTP/1.0 request without Host: no host to forward,
				// rather than an empty one.
				delete(pr.Out.Header, "X-Forwarded-Host")
			}
			if !cfg.UpstreamHost {
				pr.Out.Host = pr.In.Host
			}
			// net/http's Transport takes a request carrying (canonical)
			// Idempotency-Key as safe to send again by itself after a
			// connection failure, though the upstream may have run it: the
			// proxy sends each request at most once, and retrying is the
			// client's. Under a lower-case map key the header still goes
			// upstream, but the Transport does not see it.
			for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
				if v, ok := pr.Out.Header[name]; ok {
					delete(pr.Out.Header, name)
					pr.Out.Header[strings.ToLower(name)] = v
				}
			}
			// The middleware has read the body of a request with a key
			// (recorded, or passed through by FailOpen), and the client
			// has had its 100 Continue: an upstream asked to send one
			// would only hold up the body the proxy has.
			_, held := pr.In.Body.(*bodyReader)
			if held {
				delete(pr.Out.Header, "Expect")
			}
			if len(pr.In.Trailer) > 0 {
				forwardTrailers(pr, held)
			}
		},
		Transport:  cfg.Transport,
		ErrorLog:   cfg.ErrorLog,
		BufferPool: copyBuffers{},
		ModifyResponse: func(res *http.Response) error {
			call := callOf(res.Request.Context())
			if res.StatusCode == http.StatusSwitchingProtocols && call.capture != nil {
				call.capture.upgrade = true // written on the hijacked connection
				call.capture.conn = call.upgraded
			}
			if call.recording != nil {
				if err := bufferResponse(res, call.recording); err != nil {
					return err
				}
				if !call.recording.whole && res.StatusCode != http.StatusSwitchingProtocols {
					call.follow(res.Request.Context()) // streamed through, not recorded
				}
			}
			// The upstream has answered: what is left of the body
			// streams through without a time limit.
			call.timer.Stop()
			return nil
		},
		// r is the request sent upstream; the problem is written for the
		// client's, as the middleware's own answers are.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			Unrecorded(w) // whatever the profile records: a retry runs again
			call := callOf(r.Context())
			client := call.client
			cause := context.Cause(r.Context())
			if errors.Is(cause, errUpstreamTimeout) && !errors.Is(err, errUpstreamTimeout) {
				err = fmt.Errorf("%w: %w", cause, err) // not only "context canceled"
			}
			if cfg.ErrorLog != nil {
				cfg.ErrorLog.Printf("upstream %s %s: %v", r.Method, r.URL.EscapedPath(), err)
			} else {
				log.Printf("idemhttp: upstream %s %s: %v", r.Method, r.URL.EscapedPath(), err)
			}
			if errors.Is(cause, idem.ErrLeaseLost) {
				// The upstream was reached, and may have run the request:
				// the reservation was lost under it (taken over, or the
				// store unreachable for the whole lease).
				writeProblem(w, client, &Problem{Type: ProblemStoreUnavailable, Title: "Idempotency-Key reservation lost", Status: http.StatusServiceUnavailable,
					Detail: "The reservation of this key was lost while the upstream ran the request, which may have run. Retry later with the same key.", RetryAfter: time.Second})
				return
			}
			if call.body != nil && call.body.failed.Load() {
				writeProblem(w, client, &Problem{Type: ProblemBodyUnreadable, Title: "Request body unreadable", Status: http.StatusBadRequest,
					Detail: "The request body could not be read to its end; the request was not recorded."})
				return
			}
			var ne net.Error
			if errors.Is(err, errUpstreamTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
				writeProblem(w, client, &Problem{Type: ProblemUpstreamTimeout, Title: "Upstream timed out", Status: http.StatusGatewayTimeout,
					Detail: "The upstream did not answer in time; the request was not recorded."})
				return
			}
			writeProblem(w, client, &Problem{Type: ProblemUpstream, Title: "Upstream unavailable", Status: http.StatusBadGateway,
				Detail: "The upstream could not be reached; the request was not recorded."})
		},
	}
	timed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		call := &upstreamCall{ctx: ctx, cancel: cancel, client: r, timeout: cfg.Timeout}
		if c, ok := w.(*capture); ok {
			call.capture = c
			if c.recording {
				call.recording = c
			}
		}
		call.timer = time.AfterFunc(cfg.Timeout, call.expire)
		defer call.end()
		r = r.WithContext(context.WithValue(ctx, upstreamCallKey{}, call))
		if _, held := r.Body.(*bodyReader); !held && r.Body != nil && r.Body != http.NoBody {
			call.body = &streamedBody{ReadCloser: r.Body}
			r.Body = call.body
		}
		rp.ServeHTTP(w, r)
	})
	proxied := mw(timed)
	underBase := strings.Trim(upstream.Path, "/") != ""
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if detail := refusedTarget(r, underBase); detail != "" {
			writeProblem(w, r, &Problem{Type: ProblemTargetInvalid, Title: "Request target invalid", Status: http.StatusBadRequest, Detail: detail})
			return
		}
		proxied.ServeHTTP(w, r)
	}), nil
}

// refusedTarget says why the proxy does not forward r's target, or is ""
// when it does: a CONNECT's (a tunnel is a forward proxy's business), "*"
// but for OPTIONS, and, when the upstream has a base path (underBase), a
// path with a ".." segment (see hasDotDot), sent as such or
// percent-encoded, which would lead the upstream outside the base path.
func refusedTarget(r *http.Request, underBase bool) string {
	switch {
	case r.Method == http.MethodConnect:
		return "CONNECT asks a forward proxy for a tunnel; this is a reverse proxy."
	case r.URL.Path == "*" && r.Method != http.MethodOptions:
		return "A request target of * is for OPTIONS only."
	case underBase && hasDotDot(r.URL.Path):
		return `The request path has a ".." segment, which would lead outside the upstream's base path.`
	}
	return ""
}

// hasDotDot reports whether the decoded path p has a ".." segment, as
// upstreams read segments: also one ended by a backslash, which some
// servers take for a slash, or by path parameters (..;x), which servlet
// containers strip before resolving dot segments.
func hasDotDot(p string) bool {
	for seg := range strings.FieldsFuncSeq(p, func(c rune) bool { return c == '/' || c == '\\' }) {
		if name, _, _ := strings.Cut(seg, ";"); name == ".." {
			return true
		}
	}
	return false
}

// upstreamCall is the state of one request's call to the upstream, in its
// context under upstreamCallKey{}.
type upstreamCall struct {
	// client is the request as the proxy got it, before it is rewritten
	// for the upstream.
	client *http.Request
	// capture is the middleware's writer: set for a request with a
	// protected method.
	capture *capture
	// recording is capture when the middleware records the response: for
	// a protected request with a key.
	recording *capture
	// timer cancels the call when the upstream has not answered within
	// timeout (ProxyConfig.Timeout); stopped once it has.
	timer   *time.Timer
	timeout time.Duration
	// ctx is the call's context, which cancel cancels.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unfollow stops follow's watch, once set.
	unfollow func() bool
	// body is the client's body as it streams through, for a request
	// whose body the middleware did not read first; nil otherwise.
	body *streamedBody
}

// streamedBody is a client's body that streams through to the upstream,
// remembering whether reading it failed: then the call failed on the
// client's side, not the upstream's. The Transport reads it in a
// goroutine of its own.
type streamedBody struct {
	io.ReadCloser
	failed atomic.Bool
}

func (b *streamedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed.Store(true)
	}
	return n, err
}

// follow cancels the call when the client goes away: for a protected
// request's response that streams through, not recorded, whose upstream
// may keep it open and silent for as long as it likes. ctx is the call's,
// which gives the client's (see clientKey).
func (c *upstreamCall) follow(ctx context.Context) {
	if client, ok := ctx.Value(clientKey{}).(context.Context); ok {
		c.unfollow = context.AfterFunc(client, func() { c.cancel(errClientGone) })
	}
}

// end stops what watches the call once the handler returns.
func (c *upstreamCall) end() {
	c.timer.Stop()
	if c.unfollow != nil {
		c.unfollow()
	}
}

// errClientGone is the cause of a call cancelled because its client went
// away while its response streamed.
var errClientGone = errors.New("idemhttp: the client went away during a streamed response")

// upgraded wraps conn, the client's connection of an upgrade passed on
// for a protected request (see upgradedConn).
func (c *upstreamCall) upgraded(conn net.Conn) net.Conn {
	return &upgradedConn{Conn: conn, call: c}
}

// upgradedConn is the client's connection of an upgrade the proxy passes
// on for a protected request, which ReverseProxy copies to and from the
// upstream's until both ends are done. Once the client has half-closed it
// (ReverseProxy passes the half-close on, and then waits for the upstream
// to end its side), it watches for the connection to be closed, as a
// server's shutdown closes the connections handlers took over, and then
// cancels the call, which closes the upstream's side: else an upstream
// that keeps its side open and silent would keep the handler, and the
// key it holds, from ever returning, since its context is detached from
// the client's.
type upgradedConn struct {
	net.Conn
	call     *upstreamCall
	watching bool // only ReverseProxy's copy to the upstream reads
}

func (c *upgradedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err == io.EOF && !c.watching {
		c.watching = true
		go c.watch()
	}
	return n, err
}

// CloseWrite half-closes the connection, as ReverseProxy does when the
// upstream has ended its side; a connection that cannot be half-closed
// reports it, and ReverseProxy then ends the exchange.
func (c *upgradedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// watch cancels the call once the connection is closed, by polling it
// every closedPoll (a connection that has read its EOF has nothing left to
// block on that its closing would wake), until the call ends.
func (c *upgradedConn) watch() {
	t := time.NewTicker(closedPoll)
	defer t.Stop()
	for {
		select {
		case <-c.call.ctx.Done():
			return
		case <-t.C:
		}
		// A closed connection takes no deadline; one that takes none for
		// another reason is left alone.
		if err := c.Conn.SetReadDeadline(time.Time{}); errors.Is(err, net.ErrClosed) {
			c.call.cancel(errClientClosed)
			return
		}
	}
}

// closedPoll is how often a half-closed upgraded connection is checked
// for having been closed.
const closedPoll = 200 * time.Millisecond

// errClientClosed is the cause of a call cancelled when the client's
// connection of an upgrade was closed.
var errClientClosed = errors.New("idemhttp: the client's upgraded connection was closed")

// expire cancels the call, the upstream having taken too long.
func (c *upstreamCall) expire() {
	c.cancel(fmt.Errorf("%w within %s", errUpstreamTimeout, c.timeout))
}

// errUpstreamTimeout is (wrapped, with the timeout) the cause of a call
// cancelled by its timer.
var errUpstreamTimeout = errors.New("idemhttp: upstream did not answer")

// callOf returns the upstreamCall in ctx.
func callOf(ctx context.Context) *upstreamCall {
	return ctx.Value(upstreamCallKey{}).(*upstreamCall)
}

// upstreamCallKey is the context key of the upstreamCall.
type upstreamCallKey struct{}

// bufferResponse reads up to c.max bytes of the upstream body ahead, so that
// a complete response is written to the client in one go and recorded by c
// (ReverseProxy would otherwise flush responses of unknown length as they
// arrive, which the middleware treats as streaming). Upgrades, responses
// without a body, event streams and longer bodies are left as they are.
func bufferResponse(res *http.Response, c *capture) error {
	limit := c.max
	switch {
	case res.StatusCode == http.StatusSwitchingProtocols: // the body is the connection
		return nil
	case res.Body == http.NoBody || res.Request.Method == http.MethodHead:
		c.whole = true // nothing to read: the (empty) body is whole
		return nil
	case isEventStream(res.Header.Get("Content-Type")):
		return nil
	case res.ContentLength > int64(limit):
		return nil
	}
	var head []byte
	var err error
	if res.ContentLength >= 0 {
		// One allocation, and one more byte to see whether the body is
		// longer than announced.
		head, err = readAll(res.Body, res.ContentLength, int64(limit))
	} else {
		head, err = io.ReadAll(io.LimitReader(res.Body, int64(limit)+1))
	}
	if err != nil {
		return err
	}
	if len(head) > limit {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), res.Body), res.Body}
		return nil
	}
	_ = res.Body.Close() // which also fills in res.Trailer
	res.Body = io.NopCloser(bytes.NewReader(head))
	res.ContentLength = int64(len(head))
	res.TransferEncoding = nil
	c.whole = true
	return nil
}

// forwarded sets the X-Forwarded-* headers of pr.Out as SetXForwarded
// does, from those pr.In came with where it has them: its X-Forwarded-For
// with the client's address appended, and its X-Forwarded-Host,
// X-Forwarded-Proto and Forwarded as they are (see
// ProxyConfig.TrustForwarded). Those its Connection header lists are
// hop-by-hop, meant for the proxy only, and not kept.
func forwarded(pr *httputil.ProxyRequest) {
	in, out := pr.In.Header, pr.Out.Header
	kept := func(name string) []string {
		for _, line := range in["Connection"] {
			for listed := range strings.SplitSeq(line, ",") {
				if http.CanonicalHeaderKey(strings.TrimSpace(listed)) == name {
					return nil
				}
			}
		}
		return in[name]
	}
	if v := kept("X-Forwarded-For"); len(v) > 0 {
		out["X-Forwarded-For"] = slices.Clone(v) // SetXForwarded appends to it
	}
	pr.SetXForwarded()
	for _, name := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
		if v := kept(name); len(v) > 0 {
			out[name] = slices.Clone(v)
		}
	}
}

// dropForgedForwarding deletes from h, the headers of a request going
// upstream, the forwarding headers a client could have forged beyond
// those ReverseProxy replaces (X-Forwarded-For, -Host, -Proto and
// Forwarded): any spelt with underscores for hyphens (X_Forwarded_For,
// X-Real_Ip), which servers that map headers to CGI-style names
// (HTTP_X_FORWARDED_FOR) read as the real ones, whatever the proxy set;
// and, unless trusted (ProxyConfig.TrustForwarded), every other
// X-Forwarded-* header (X-Forwarded-Port, -Prefix, -Ssl…) and X-Real-Ip,
// which the proxy does not set and an upstream may believe.
func dropForgedForwarding(h http.Header, trusted bool) {
	for name := range h {
		if trusted && !strings.ContainsRune(name, '_') {
			continue
		}
		if len(name) > len("x-forwarded-") && sameHeaderName(name[:len("x-forwarded-")], "x-forwarded-") ||
			sameHeaderName(name, "forwarded") || sameHeaderName(name, "x-real-ip") {
			delete(h, name)
		}
	}
}

// sameHeaderName reports whether the header name reads as lower, a
// lower-case name, once its letters are lowered and its underscores made
// hyphens, as CGI-style servers read names.
func sameHeaderName(name, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case c == '_':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// forwardTrailers has pr.Out send, after its body, the trailers pr.In
// declared. The server fills them in pr.In's own Trailer map as the last
// of the body is read, after ReverseProxy cloned it for pr.Out: pr.Out
// shares that map, so that a body streamed through carries them. A body
// the middleware holds (held) was read whole, trailers included, and
// would go with a Content-Length, which leaves no place for trailers: it
// is sent chunked, empty or not.
func forwardTrailers(pr *httputil.ProxyRequest, held bool) {
	pr.Out.Trailer = pr.In.Trailer
	if held {
		pr.Out.Body = pr.In.Body // ReverseProxy sends none for an empty one
		pr.Out.ContentLength = -1
		pr.Out.TransferEncoding = []string{"chunked"}
	}
}

// ownTransport is a Transport of the user's own, whose responses it
// completes as http.Client does those of any RoundTripper: net/http's
// Transport gives a response a Body even when empty, and sets its Request
// to the one the proxy sent, whose context the proxy finds the call in;
// a RoundTripper that answers by itself, or sends a request of its own,
// need not.
type ownTransport struct{ rt http.RoundTripper }

func (t ownTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.rt.RoundTrip(r)
	switch {
	case err != nil:
		return nil, err
	case res == nil:
		return nil, fmt.Errorf("idemhttp: ProxyConfig.Transport (%T) returned a nil *Response with a nil error", t.rt)
	case res.Body == nil && res.ContentLength > 0:
		return nil, fmt.Errorf("idemhttp: ProxyConfig.Transport (%T) returned a *Response with content length %d but a nil Body", t.rt, res.ContentLength)
	case res.Body == nil:
		res.Body = http.NoBody
	}
	res.Request = r
	return res, nil
}

// isEventStream reports whether a Content-Type is text/event-stream,
// ignoring parameters, case and spaces.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// copyBuffers recycles the buffers ReverseProxy copies response bodies
// with (it allocates 32 KiB per response otherwise).
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyBufferPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put(&b) }

// redacted is u as a string with its password hidden; "<nil>" for nil.
func redacted(u *url.URL) string {
	if u == nil {
		return "<nil>"
	}
	return u.Redacted()
}
