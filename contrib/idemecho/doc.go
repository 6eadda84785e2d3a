// Package idemecho adds Idempotency-Key semantics to echo handlers: a
// retried POST with the same key is answered from the recorded response
// instead of running twice.
//
//	mw, err := idemecho.New(idemhttp.Config{Store: store, RequireKey: true})
//	if err != nil { … }
//	e.Use(mw)
//
// The middleware is idemhttp's, run around the next echo handler, so the
// behaviour is exactly that package's (see its documentation): which
// methods are protected, key parsing and scoping, fingerprints,
// problem+json errors (400, 409, 413, 422, 503), which statuses are stored,
// which headers are replayed with "Idempotent-Replayed: true", streaming and
// oversized responses, panics (the key is released and the panic goes on to
// echo's Recover middleware, if any), and a handler context detached from
// the client's cancellation. Config is idemhttp.Config; OnEvent reports
// every protected request as idemhttp.Event.
//
// What is echo's own: echo renders a handler's returned error after the
// middleware chain has returned, too late to be recorded. On protected
// requests the middleware therefore renders it itself with c.Error, so that
// an echo.HTTPError(404) is stored and replayed like any 404, and an
// HTTPError(500) releases the key like any 5xx (see New).
//
// Unknown routes: a request that matches no route is answered by the
// router as usual, and that answer is not recorded (the key is released and
// nothing is stored), so that a retry runs the route once it exists, as on
// a newer version of the service sharing the store during a rolling deploy.
// This holds for the router's 404 for a path no route matches, its 405 for
// a path with routes for other methods only, and the 404 of a route
// registered with RouteNotFound (such as the catch-all that a Group or Host
// with middleware registers). A 404 that the handler of a matched route answers,
// echo.ErrNotFound too, is about the resource and is recorded like any 404.
// With Config.RequireKey, a request to an unknown route without a key is
// still answered 400.
//
// Register it with e.Use or on a Group (with e.Pre it also works, but runs
// before every e.Use middleware), after authentication, which
// Config.KeyScope may rely on, and before any middleware that reads the
// request body or compresses the response (Gzip: one inside the middleware
// would have the compressed body recorded and replayed to clients that may
// not accept that encoding). A body read before the middleware (c.Bind in
// a middleware in front of it) is gone when the middleware reads it: a
// request that announced its Content-Length is answered 400
// (body-unreadable) and not run, but a chunked one cannot be told from an
// empty body, and is fingerprinted and run as one. Bound protected bodies
// with idemhttp.Config.MaxBody rather than echo's BodyLimit in front of the
// middleware: BodyLimit's error on a chunked body reaches the middleware as
// an unreadable body (400), where MaxBody answers 413.
//
// Key scope: Config.KeyScope is given the *http.Request, not the echo
// context, so a caller that an authentication middleware keeps only with
// c.Set is invisible to it. Have that middleware also put the caller in
// the request's context (c.SetRequest(r.WithContext(…))) and read it
// there; the default scope, a hash of the Authorization header, needs
// nothing.
//
// This package is a module of its own, so that echo is a dependency only
// of programs that use it.
package idemecho
