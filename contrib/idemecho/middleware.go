package idemecho

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem/idemhttp"
)

// New returns an echo middleware that applies the idemhttp middleware
// configured by cfg to the next handler, or the error of idemhttp.New
// naming the invalid Config field.
//
// For a protected request the next handler runs inside idemhttp's handler:
// c.Request() is the request idemhttp passes on (its body already read and
// put back, its context detached from the client's cancellation) and
// c.Response() is a new *echo.Response that records what is written, its
// Status at first that of echo's own (200, unless a middleware outside set
// another). Both are restored when the middleware returns, also when a
// handler panics. For a method it does not protect the middleware only
// calls the next handler: what the chain sets with c.SetRequest or
// c.SetResponse stays, as without the middleware.
// Hooks registered with c.Response().Before before the middleware still run
// when the response is committed.
//
// An error the next handler returns for a protected method (a request
// with a key, or without one when none is required) is rendered at once,
// with c.Error (echo's HTTPErrorHandler), so that the response recorded is
// the one the client gets. The middleware then returns the error too, as
// echo's own request logger does with HandleError: echo's default error
// handler ignores it because the response is committed, and middlewares
// further out still see it. A custom HTTPErrorHandler must likewise do
// nothing when c.Response().Committed is set. A replay or an error response
// of the middleware itself returns nil. For methods that are not protected
// the handler's error is returned untouched.
//
// The router's answer to a request that matches no route (see unrouted) is
// delivered but not recorded: the key is released, so that a retry with
// the same key runs the route once it exists.
func New(cfg idemhttp.Config) (echo.MiddlewareFunc, error) {
	mw, err := idemhttp.New(cfg)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			outerRes, outerReq := c.Response(), c.Request()
			var herr error
			mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if w == http.ResponseWriter(outerRes) && r == outerReq {
					herr = next(c) // not protected: idemhttp handed the request on as it came
					return
				}
				defer func() { // also when a handler panics
					c.SetResponse(outerRes)
					c.SetRequest(outerReq)
				}()
				c.SetRequest(r)
				res := echo.NewResponse(w, c.Echo())
				// As echo's own response: 200 until a status is written,
				// or the status a middleware outside set.
				res.Status = outerRes.Status
				c.SetResponse(res)
				if herr = next(c); herr != nil {
					c.Error(herr)
				}
				if unrouted(c, outerReq) {
					idemhttp.Unrecorded(w)
				}
			})).ServeHTTP(outerRes, outerReq)
			return herr
		}
	}, nil
}

// unrouted reports whether the response of c is the router's answer to r
// matching no route: a 404 for a path that no route matches (c.Path() is
// then empty) or only a RouteNotFound route does (as the catch-all that a
// Group with middleware registers), or a 405 for a path with routes for
// other methods only (the router then sets echo.ContextKeyHeaderAllow). It
// is called after the handler ran, when the router has run also for a
// middleware registered with e.Pre.
func unrouted(c echo.Context, r *http.Request) bool {
	switch c.Response().Status {
	case http.StatusMethodNotAllowed:
		return c.Get(echo.ContextKeyHeaderAllow) != nil
	case http.StatusNotFound:
		path := c.Path()
		if path == "" {
			return true
		}
		// A path that is both a route for r.Method and a RouteNotFound
		// route matched the route: the router prefers it.
		router, ok := c.Echo().Routers()[r.Host]
		if !ok {
			router = c.Echo().Router()
		}
		notFound := false
		for _, route := range router.Routes() {
			if route.Path == path {
				if route.Method == r.Method {
					return false
				}
				notFound = notFound || route.Method == echo.RouteNotFound
			}
		}
		return notFound
	}
	return false
}
