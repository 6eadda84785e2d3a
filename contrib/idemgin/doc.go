// Package idemgin adds Idempotency-Key semantics to gin handlers: a retried
// POST with the same key is answered from the recorded response instead of
// running twice.
//
//	mw, err := idemgin.New(idemhttp.Config{Store: store, RequireKey: true})
//	if err != nil { … }
//	router.Use(mw)
//
// The middleware is idemhttp's, run around the rest of the gin handler
// chain, so the behaviour is exactly that package's (see its documentation):
// which methods are protected, key parsing and scoping, fingerprints,
// problem+json errors (400, 409, 413, 422, 503), which statuses are stored,
// which headers are replayed with "Idempotent-Replayed: true", streaming and
// oversized responses, panics (the key is released and the panic goes on to
// gin's recovery), and a handler context detached from the client's
// cancellation. Config is idemhttp.Config; OnEvent reports every protected
// request as idemhttp.Event.
//
// What is gin's own: while a protected request runs, c.Writer keeps gin's
// conventions (c.Status only sets the status, which is sent with the first
// body byte or when the chain returns), so the headers recorded are those
// set before the body, even after c.Status. Its CloseNotify channel
// receives only once the response streams (a Flush, as c.Stream and
// c.SSEvent do), when it is no longer recorded; until then the handler
// runs on when the client goes away. In transaction mode
// (idemhttp.Config.BeginTx) a flushed response is still held and recorded
// whole, so it never receives, and c.Stream runs to its end. A request
// the middleware answers itself is aborted (c.Abort), so the handlers after
// the middleware do not run; those before it see the status it sent.
//
// A request that matches no route runs the engine's NoRoute (or NoMethod)
// handlers protected like a route, so that a catch-all such as a reverse
// proxy forwarding what the engine does not route itself is covered, and
// Config.RequireKey applies to it. A 404 or 405 answered to such a
// request, gin's own or a NoRoute handler's, is the router's answer: it is
// delivered, not recorded, and the key is released, so that a retry runs
// the route once it exists. With Config.RequireKey, a request to an
// unknown route without a key is answered 400.
//
// Order: register the middleware after those that must see every request
// (logging, recovery, authentication, which KeyScope may rely on) and
// before those that read the request body or compress the response; a
// compressor inside it would have the compressed body recorded and
// replayed to clients that may not accept that encoding. A body read
// before the middleware (c.ShouldBindJSON in a middleware in front of it)
// is gone when the middleware reads it: a request that announced its
// Content-Length is answered 400 (body-unreadable) and not run, but a
// chunked one cannot be told from an empty body, and is fingerprinted and
// run as one.
//
// Key scope: Config.KeyScope is given the *http.Request, not the gin
// context, so a caller that an authentication middleware keeps only with
// c.Set is invisible to it. Have that middleware also put the caller in
// the request's context (c.Request = c.Request.WithContext(…)) and read it
// there; the default scope, a hash of the Authorization header, needs
// nothing.
//
// This package is a module of its own, so that gin is a dependency only of
// programs that use it.
package idemgin
