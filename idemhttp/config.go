package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// Defaults of Config.
const (
	DefaultMaxBody    = 1 << 20
	DefaultMaxCapture = 1 << 20
)

// DefaultNamespace is the namespace of the middleware's records unless
// Config.Namespace says otherwise.
var DefaultNamespace = idem.MustNamespace("http")

// DefaultReplayHeaders are the response headers recorded and replayed by
// default. It must not be modified: copy it to extend it
// (append(slices.Clone(DefaultReplayHeaders), "X-Mine")).
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Content-Location", "Content-Range", "Location", "ETag", "Last-Modified", "Link",
	"Cache-Control", "Vary", "X-Request-Id", "Allow",
}

// neverReplayed headers are never recorded, and ReplayHeaders may not name
// them: cookies, credentials, hop-by-hop headers and framing.
var neverReplayed = map[string]bool{
	"Set-Cookie": true, "Set-Cookie2": true, "Authorization": true, "Proxy-Authorization": true,
	"Www-Authenticate": true, "Proxy-Authenticate": true, "Connection": true, "Keep-Alive": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Proxy-Connection": true,
	"Content-Length": true, "Idempotent-Replayed": true,
}

// Event describes one request the middleware handled, for metrics and logs.
type Event struct {
	Request *http.Request
	// Outcome says what happened; see the Outcome constants.
	Outcome Outcome
	// Status is the status code of the response sent to the client:
	//
	//   - the status of the middleware's own answer: a problem, or a
	//     replayed response;
	//   - the status the handler wrote, 200 when it wrote none, even when
	//     it panicked after writing it: the client then got that status,
	//     its response cut off or finished by a recovering middleware
	//     outside this one (net/http ignores the 500 it tries to write), or
	//     no response at all when nothing recovers the panic before
	//     net/http sent the header;
	//   - 500 when the handler panicked before writing a status: what a
	//     recovering middleware outside this one answers (net/http itself
	//     closes the connection without answering);
	//   - for a connection the handler took over (Hijack), the status it
	//     wrote before, if any; else 101 for a protocol upgrade NewProxy
	//     passes on, or 0, meaning no HTTP response went through the
	//     middleware (the handler answered, if at all, on the connection).
	Status int
	// StoreTime is the time spent in store calls.
	StoreTime time.Duration
	// HandlerTime is the time spent in the wrapped handler (zero unless it
	// ran).
	HandlerTime time.Duration
	// Err is the store error, for OutcomeStoreError and for failures to
	// record or release (OutcomeReleased with Err set: a response that
	// could not be recorded is released, or left to its lease if even that
	// failed), or the failure (an error, or a panic, which goes on) of
	// Config.KeyScope or Config.Fingerprint, for OutcomeInternal. In
	// transaction mode it is also the error of Config.BeginTx, Tx.Commit
	// or Tx.Rollback, or why a response of status 100-399 was answered
	// 500 (OutcomeReleased: it could not be recorded).
	Err error
}

// Outcome classifies a request in an Event.
type Outcome string

// Outcomes of Event.
const (
	OutcomePassThrough    Outcome = "pass_through" // not protected, or no key and none required
	OutcomeExecuted       Outcome = "executed"     // the handler ran and its response was recorded
	OutcomeReleased       Outcome = "released"     // the handler ran; its response was not stored
	OutcomeReplayed       Outcome = "replayed"     // answered from the record
	OutcomeInProgress     Outcome = "in_progress"  // 409: the original is still running
	OutcomeMismatch       Outcome = "mismatch"     // 422/400: key reused with another request
	OutcomeKeyMissing     Outcome = "key_missing"
	OutcomeKeyInvalid     Outcome = "key_invalid"
	OutcomeTooLarge       Outcome = "body_too_large"
	OutcomeBodyUnreadable Outcome = "body_unreadable" // 400: the request body could not be read (client gone, bad chunk)
	OutcomeBodyTimeout    Outcome = "body_timeout"    // 408: the request body was not received within Config.BodyTimeout
	OutcomeStoreError     Outcome = "store_error"     // 503, or passed through with FailOpen
	OutcomeInternal       Outcome = "internal_error"  // 500: Config.KeyScope or Config.Fingerprint failed
)

// Config configures the middleware. Only Store (or, in transaction mode,
// BeginTx) is required.
type Config struct {
	// Store keeps the records. Required unless BeginTx is set: New refuses
	// a nil one, and a nil pointer of a store type, such as a constructor
	// returns with an error. With BeginTx it is not used (each request's
	// Tx brings the store bound to its transaction) and may be nil.
	Store idem.Store
	// Namespace of the records. Defaults to DefaultNamespace ("http").
	Namespace idem.Namespace
	// Methods are the protected methods, compared case-insensitively; other
	// methods pass through untouched. Defaults to POST and PATCH.
	Methods []string
	// RequireKey makes a protected request without a key fail with 400.
	// Defaults to false: such requests pass through and nothing is recorded.
	RequireKey bool
	// KeyScope returns the scope of a request's key, so that callers cannot
	// see or probe each other's records. Defaults to ScopeByAuthorization,
	// which scopes by the credential sent in the Authorization header:
	// an API that authenticates otherwise (a session cookie, an API-key
	// header, a client certificate) must set KeyScope to the caller's
	// identity, or all its callers share one scope; and so should one
	// whose clients' tokens change between a request and its retry (a
	// refreshed OAuth access token), which would otherwise run the retry
	// again.
	// A scope idem.Key.WithScope rejects (over idem.MaxScopeLen bytes,
	// control characters, invalid UTF-8) answers 500 (OutcomeInternal).
	KeyScope func(*http.Request) string
	// Profile selects IETF (default) or Stripe conventions.
	Profile Profile
	// StoreStatus, when set, decides which response statuses are recorded,
	// overriding the profile.
	StoreStatus func(status int) bool
	// Fingerprint, when set, replaces the request fingerprint (method, path,
	// query and body, the body by its canonical JSON form when the
	// Content-Type is JSON). body is the whole request body; the handler
	// gets it whole even if Fingerprint reads r.Body. An error, or
	// the zero Fingerprint, answers 500 (OutcomeInternal, the error in
	// Event.Err, not in the response).
	Fingerprint func(r *http.Request, body []byte) (idem.Fingerprint, error)
	// ReplayHeaders are the response headers recorded and replayed.
	// Defaults to DefaultReplayHeaders. Set-Cookie, authentication,
	// hop-by-hop and framing headers (Content-Length, Trailer) are never
	// recorded: New refuses a list naming one. They are recorded as they
	// are when the status is written, as net/http sends them: a change
	// the handler makes afterwards, even in place (w.Header()["X"][0] = v),
	// changes neither the response sent nor the record.
	ReplayHeaders []string
	// MaxBody is the largest request body accepted on protected requests
	// with a key, in bytes; larger bodies get 413. Defaults to DefaultMaxBody
	// (1 MiB).
	MaxBody int64
	// MaxCapture is the largest response body recorded, in bytes; larger
	// responses are delivered but not recorded. Defaults to
	// DefaultMaxCapture (1 MiB). A record holds the body in base64, with
	// the status and headers: above about 3 MiB, raise the store's
	// MaxPayload (idem.DefaultMaxPayload, 4 MiB) to 4/3 of MaxCapture and
	// room for the headers, or the Commit of a response that large fails
	// and the response is not recorded after all.
	MaxCapture int
	// Retention is how long records are kept. Defaults to the store's.
	Retention time.Duration
	// Lease is how long a request owns its key before a retry may take it
	// over; it is extended while the handler runs, not while the response
	// is recorded: keep it longer than StoreTimeout, within which a Commit
	// is made again through a store outage. Defaults to the store's.
	Lease time.Duration
	// FailOpen passes requests through unprotected when the store fails.
	// Defaults to false: fail closed with 503. New refuses it with BeginTx:
	// a handler expecting a transaction would run without one.
	FailOpen bool
	// BeginTx, when set, runs each protected request that has a key in a
	// transaction of the caller's database (transaction mode): the record
	// is written with Tx.Store, bound to that transaction, so that it and
	// the handler's own writes commit or roll back together, and the
	// client is told only what was committed. BeginTx is called once the
	// key, the body and the fingerprint are checked, with the request under
	// a context detached from the client's cancellation (as the handler's
	// is), so that a transaction begun with r.Context() outlives a client
	// that went away; an error answers 503 (ProblemStoreUnavailable,
	// OutcomeStoreError) without running the handler. See Tx, and
	// "Transaction mode" in the package documentation. Requests passed
	// through (no key without RequireKey, unprotected methods) get no
	// transaction: set RequireKey unless the handler copes without one.
	BeginTx func(r *http.Request) (*Tx, error)
	// ErrorWriter writes problem responses. Defaults to WriteProblem, or
	// with ProfileStripe to WriteStripeError.
	ErrorWriter ErrorWriter
	// OnEvent, when set, is called once per protected request after the
	// response was written. It must be safe for concurrent use.
	OnEvent func(Event)
	// StoreTimeout, when positive, bounds each store call (the Begin before
	// the handler, the Commit or release after it; in transaction mode
	// also Tx.Commit and Tx.Rollback, but not BeginTx: see "Transaction
	// mode" in the package documentation). Defaults to no bound of
	// the middleware's own: configure timeouts on the store's client (pgx
	// connect and statement timeouts, go-redis read and write timeouts),
	// which also apply. The calls are never cancelled by the client going
	// away. A Commit the store answers idem.ErrUnavailable is made again
	// (see idem.CommitRetrying) within StoreTimeout, or for 10 seconds
	// when it is not set.
	StoreTimeout time.Duration
	// BodyTimeout, when positive, bounds the time to receive the body of a
	// protected request with a key, which the middleware reads whole
	// before anything else: a body not received within it is answered 408
	// (ProblemBodyTimeout, OutcomeBodyTimeout), with no key reserved and
	// the handler not run. The bound is a read deadline on the connection
	// (http.ResponseController.SetReadDeadline), set before the body is
	// read and cleared right after, so that neither the handler nor later
	// requests on the connection are bound by it; clearing it also lifts
	// the server's http.Server.ReadTimeout for the rest of the request.
	// A writer that cannot set deadlines (http.ErrNotSupported, such as
	// httptest.ResponseRecorder or a wrapping writer without an Unwrap
	// method) has the body read without one. Requests without a key, and
	// unprotected methods, are not bound. Defaults to no bound.
	BodyTimeout time.Duration

	// replay is ReplayHeaders canonicalised, without the never-replayed
	// headers; replaySet is the same as a set.
	replay    []string
	replaySet map[string]bool
}

func (c *Config) validate() error {
	if c.BeginTx != nil && c.FailOpen {
		return errors.New("idemhttp: Config.FailOpen cannot be used with Config.BeginTx: a handler expecting a transaction would run without one")
	}
	if c.Store == nil && c.BeginTx == nil {
		return errors.New("idemhttp: Config.Store is required")
	}
	if c.Store != nil && idem.IsNilStore(c.Store) {
		// A store constructor's result kept although it failed: every
		// request would panic in the store.
		return fmt.Errorf("idemhttp: Config.Store is a nil %T (was its constructor's error ignored?)", c.Store)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if err := c.Namespace.Validate(); err != nil {
		return fmt.Errorf("idemhttp: Config.Namespace: %w", err)
	}
	if c.Methods == nil {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	for _, m := range c.Methods {
		if m == "" || strings.ContainsAny(m, " \t\r\n") {
			return fmt.Errorf("idemhttp: Config.Methods: invalid method %q", m)
		}
	}
	if c.KeyScope == nil {
		c.KeyScope = ScopeByAuthorization
	}
	if c.Profile != ProfileIETF && c.Profile != ProfileStripe {
		return fmt.Errorf("idemhttp: Config.Profile: unknown profile %d", c.Profile)
	}
	if c.StoreStatus == nil {
		c.StoreStatus = c.Profile.stores
	}
	if c.ReplayHeaders == nil {
		c.ReplayHeaders = DefaultReplayHeaders
	}
	switch {
	case c.MaxBody < 0:
		return errors.New("idemhttp: Config.MaxBody must not be negative")
	case c.MaxCapture < 0:
		return errors.New("idemhttp: Config.MaxCapture must not be negative")
	case c.Retention < 0:
		return errors.New("idemhttp: Config.Retention must not be negative")
	case c.Lease < 0:
		return errors.New("idemhttp: Config.Lease must not be negative")
	case c.StoreTimeout < 0:
		return errors.New("idemhttp: Config.StoreTimeout must not be negative")
	case c.BodyTimeout < 0:
		return errors.New("idemhttp: Config.BodyTimeout must not be negative")
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxCapture == 0 {
		c.MaxCapture = DefaultMaxCapture
	}
	if c.ErrorWriter == nil {
		c.ErrorWriter = WriteProblem
		if c.Profile == ProfileStripe {
			c.ErrorWriter = WriteStripeError
		}
	}
	c.replay, c.replaySet = nil, map[string]bool{}
	for _, name := range c.ReplayHeaders {
		k := http.CanonicalHeaderKey(name)
		if neverReplayed[k] {
			return fmt.Errorf("idemhttp: Config.ReplayHeaders: %q is never recorded (cookies, credentials, hop-by-hop headers and framing are not)", name)
		}
		if !c.replaySet[k] {
			c.replay = append(c.replay, k)
			c.replaySet[k] = true
		}
	}
	return nil
}
