// Package idemhttp adds Idempotency-Key semantics to any HTTP handler, as
// the IETF draft "The Idempotency-Key HTTP Header Field" describes them (and,
// as an option, as Stripe's API does): a retried POST with the same key is
// answered from the recorded response instead of running twice.
//
//	mw, err := idemhttp.New(idemhttp.Config{Store: store, RequireKey: true})
//	if err != nil { … }
//	http.ListenAndServe(addr, mw(apiHandler))
//
// For each request with a protected method (POST and PATCH by default):
//
//   - no key: 400 when the key is required, else the request passes through
//     and nothing is recorded;
//   - an invalid key (empty, over 255 bytes, control characters, malformed
//     sf-string, several values): 400;
//   - a body over Config.MaxBody: 413;
//   - the same key (within the caller's scope) with another request (method,
//     path, query or body; JSON bodies compared by their canonical form): 422
//     (400 in the Stripe profile), even while the original still runs;
//   - the same key while the original runs: 409 with Retry-After;
//   - the same key after the original completed: the recorded status, the
//     allowlisted headers and the body, plus "Idempotent-Replayed: true";
//   - the store unreachable: 503 (or pass-through with Config.FailOpen).
//
// A caller's scope is what Config.KeyScope returns: by default a hash of
// the Authorization header (ScopeByAuthorization). An API that
// authenticates callers otherwise, by cookie or API-key header, sets its own
// (see ExampleConfig_keyScope), or all its callers share one scope.
//
// Errors are RFC 9457 application/problem+json documents with a stable type
// URI per condition (see the Problem… constants) and Cache-Control: no-store.
//
// What is recorded: the status, the headers in Config.ReplayHeaders (never
// Set-Cookie, authentication or hop-by-hop headers: New refuses a list
// naming one; nor those a middleware outside this one set before
// the handler ran and the handler left untouched, such as a compressor's
// Content-Encoding: that middleware runs again for the replay and sets
// them, or not, for the retry), the body up to Config.MaxCapture, and the
// trailers (declared in the Trailer header or set under
// http.TrailerPrefix; never Set-Cookie, authentication or hop-by-hop
// ones). Not recorded, so a retry runs again: statuses the profile does
// not store (IETF: all 5xx, 408, 409, 425, 429), responses larger than MaxCapture, streaming responses
// (the handler called Flush or Hijack), responses whose body is shorter
// than the Content-Length the handler set, or longer over HTTP/2 (the
// client got them cut off, or with an error; over HTTP/1, net/http refuses
// writes past the declared length, and a body written whole and then on
// is recorded as declared, as the client got it), handler panics (the
// key is released and the panic goes on), and a response the store could
// not record: the Commit is made again while the store answers
// idem.ErrUnavailable (a connection dropped, a failover), within
// Config.StoreTimeout (10 seconds when it is not set; meanwhile a
// response of declared Content-Length, as NewProxy relays, is sent to
// the client at once over HTTP/1, while over HTTP/2 its header and body
// go at once but its stream ends only once the Commit is done), and
// only a store still failing then leaves the
// response unrecorded and the key released (lease mode; in transaction
// mode the transaction rolls back).
// A replay sends the recorded status, headers and body back with
// Idempotent-Replayed: true and the body's Content-Length (for HEAD, the
// one the handler declared), or, for a response with trailers, chunked
// with the recorded trailers after the body.
//
// A recorded body in a content coding the handler chose for the first
// request (an upstream of NewProxy that gzipped its answer for a client
// sending Accept-Encoding: gzip, say) is replayed as recorded to a retry
// that accepts that coding. A retry that does not (no Accept-Encoding, as
// compressing servers read it; identity only; the coding refused with
// q=0) gets a body recorded in gzip (x-gzip) or deflate decoded as it is
// sent, without Content-Encoding and of undeclared length (chunked), its
// other headers as recorded but for those that name the coded bytes (for
// HEAD, the Content-Length of the coded body; a strong ETag, sent weak;
// Content-Digest, Repr-Digest, Digest and Content-MD5, not sent); a body that breaks while decoded is cut off
// (http.ErrAbortHandler), one whose coding's header does not read is
// replayed as recorded. Other codings, several stacked, and a range of
// the coded bytes (Content-Range) are replayed as recorded whatever the
// retry accepts.
//
// A handler that takes the connection over (Hijack; a protocol upgrade
// through NewProxy) holds its key, its lease extended, until it returns,
// however long the connection lasts: a retry meanwhile gets 409. Since
// http.Server.Shutdown does not wait for such connections, one still open
// when the process exits leaves its key reserved until its lease ends
// (Config.Lease). A server that should settle them tracks the connections
// it hands over (http.Server.ConnState reports StateHijacked) and waits
// for their handlers, as idem proxy does up to its --shutdown-timeout.
//
// Requests with the same key are compared by method, target and body, a
// JSON body by its canonical form (idem.FingerprintJSON's: RFC 8785's,
// numbers by their exact value): member order, whitespace and the
// spelling of a number (100, 1e2, 100.0) do not count; two integers beyond
// 2^53 that differ only in their last digits are different requests.
//
// The body of a protected request with a key is read whole (up to
// Config.MaxBody) before the handler runs, to fingerprint it; the handler
// reads the same bytes from memory, and r.GetBody gives them again, so an
// outbound client or httputil.ReverseProxy can resend them.
//
// The handler runs with a context detached from the client's cancellation
// (context.WithoutCancel): a client that disconnects does not abort the work
// it started, so its retry finds the result instead of running again. For
// the same reason, while the response is being recorded the handler's
// writes to a client that went away report success. A streaming handler
// (one that flushes), whose response is never recorded, gets its failed
// writes reported: it must stop on them, since its context does not end
// when the client goes away. The lease is extended
// in the background while the handler runs. The context ends, with cause
// idem.ErrLeaseLost, only when the key's reservation is lost under the
// handler (taken over once its lease lapsed, or the store unreachable for
// a whole lease): a retry may then run the request again, so a handler
// should stop on it.
//
// Records expire after Config.Retention but, except on Redis, stay stored
// until purged: call the store's PurgeExpired (for DefaultNamespace, or
// Config.Namespace) now and then, as idem proxy does every 10 minutes.
//
// # Transaction mode
//
// With Config.BeginTx, each protected request with a key runs in a
// transaction of the caller's database (see ExampleConfig_beginTx): the
// record is written with the store bound to it (pgstore's or sqlitestore's
// WithTx, in Tx.Store), and the handler writes its rows in the same
// transaction, which it finds in its context (Tx.Context). The record and
// the rows commit or roll back together, and the client is told only what
// is true:
//
//   - The response is held, in memory, while the handler runs: nothing
//     reaches the client before the transaction ends. Only up to
//     Config.MaxCapture: a success beyond it cannot be recorded, and is
//     answered 500 as below; a failure (status 400 or more) beyond it
//     cannot be recorded either, so its transaction is rolled back
//     whatever follows, and it is passed on to the client as the handler
//     writes it. Flush does nothing (the response is delivered whole, and
//     recorded like any other), informational 1xx responses are dropped,
//     and Hijack fails with http.ErrNotSupported.
//   - A response that can be recorded (see above; Config.MaxCapture still
//     bounds it) is recorded in the transaction, which is then committed;
//     only then is it sent. If either fails, the transaction is rolled
//     back: a response of status 400 or more is sent as the handler wrote
//     it, unrecorded (a statement that failed may have aborted the
//     transaction), and any other gets 503 (ProblemStoreUnavailable): the
//     request had no effect, and a retry with the same key runs it again
//     (but for a Tx.Commit cut short by Config.StoreTimeout, which may
//     have committed: the 503 says so, and a retry with the same key is
//     answered from the record if it did; and for a record larger than
//     the store accepts, which every retry would meet again: 500, as for
//     a response over MaxCapture).
//     A constraint checked at commit (DEFERRABLE INITIALLY DEFERRED) fails
//     that way on every retry: check such constraints in the handler (SET
//     CONSTRAINTS ALL IMMEDIATE) and answer the conflict there.
//   - A response that is not recorded rolls the transaction back. One of
//     status 400 or more is sent as the handler wrote it: its failure is
//     the truth. One of status 100-399 (over MaxCapture, marked
//     Unrecorded, a status Config.StoreStatus refuses, not as long as its
//     Content-Length) cannot be: the client gets 500 (ProblemInternal)
//     saying the response could not be recorded and the request was
//     rolled back (or, when Tx.Rollback fails, as after a handler that
//     committed the transaction itself, that it may have been committed).
//   - A replay, a Mismatch, an InFlight and a store error roll the
//     transaction back, and are answered as in lease mode. So is a handler
//     panic, which then goes on.
//   - A failing Config.BeginTx answers 503 without running the handler.
//
// The handler's context is Tx.Context (or, when nil, the request's),
// detached from the client's cancellation as in lease mode; no lease is
// extended: the open transaction holds the key. A concurrent request with
// the same key gets what the store's
// transactional mode answers while the first transaction is open: pgstore
// answers InFlight (409, with Retry-After: 1) at once; sqlitestore waits
// for the first transaction to end, then answers from what it left.
//
// Each request in flight holds one connection for its transaction until
// the handler returns. A handler that takes another connection from the
// same pool can exhaust it: with as many requests in flight as the pool
// has connections, each waits for a connection the others hold, and the
// contexts, detached from the clients, never end that wait. Use only the
// transaction in the handler, or size the pool for it. Config.StoreTimeout
// does not bound BeginTx (its context is also the transaction's, which
// database/sql ends with it): bound the begin inside BeginTx, say with a
// context with a timeout for pgx's pool.Begin alone.
//
// The handler must not commit or roll back the transaction itself: what
// it wrote may then be committed with the key's reservation, which lapses
// only after the store's lease, and the client gets a 500
// (ProblemInternal) saying so. Requests passed through (no key without
// Config.RequireKey, unprotected methods) get no transaction, so set
// RequireKey unless the handler copes without one; New refuses
// Config.FailOpen with BeginTx.
package idemhttp
