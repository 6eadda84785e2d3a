package idemgin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem/idemhttp"
)

// New returns a gin middleware that applies the idemhttp middleware
// configured by cfg to the rest of the handler chain, or the error of
// idemhttp.New naming the invalid Config field.
//
// For a protected request the handlers after the middleware run inside
// idemhttp's handler: c.Request is the request idemhttp passes on (its body
// already read and put back, its context detached from the client's
// cancellation) and c.Writer records the response. Both are restored when
// the middleware returns, also when a handler panics. When the middleware
// answers by itself (a replay or an error response), it calls c.Abort, so
// no later handler runs. For a method it does not protect it only calls
// c.Next: what the chain sets c.Request or c.Writer to stays, as in plain
// gin.
//
// A chain that fails with c.Error and writes no body leaves its response,
// or its body, to a middleware outside this one (an error renderer): it is
// not recorded, and the key is released, so that a retry runs again. That
// holds for c.AbortWithError too, which sends the status at once, and
// after which such a renderer may still write the body. Errors attached
// before the middleware ran are not the chain's and do not count. In
// transaction mode (Config.BeginTx) such a chain's transaction is rolled
// back; a status of 400 or more that it set goes out as it is, but for
// any other the middleware answers its own 500 problem, which an error
// renderer outside cannot replace: write the error response in the chain.
// Likewise a chain that ends with an error status (400 or more) set by
// c.Status alone, no body written: gin sends it only after the middleware
// returns, and a middleware outside may render a body for it first, so it
// is not recorded either (but in transaction mode, where it is sent before
// the middleware returns, as a replay is).
//
// Requests that match no route run the engine's NoRoute (or NoMethod)
// handlers protected like a route; the 404 or 405 they, or gin itself,
// answer is delivered but not recorded (see the package documentation).
//
// Register it before any middleware that reads the request body, and after
// those that must see every request (logging, recovery, authentication).
// Register response-compressing middleware before it too (outside it): one
// registered after it would have the compressed body recorded and replayed
// to clients that may not accept that encoding.
func New(cfg idemhttp.Config) (gin.HandlerFunc, error) {
	mw, err := idemhttp.New(cfg)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		// No route matched: the chain is the engine's NoRoute (or
		// NoMethod) handlers, if any, after which gin answers 404 (405)
		// itself unless they wrote a response.
		unrouted := c.FullPath() == ""
		outerW, outerR := c.Writer, c.Request
		ran := false
		outerErrs := len(c.Errors) // attached before the chain: not its own
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			if w == http.ResponseWriter(outerW) && r == outerR {
				c.Next() // not protected: idemhttp handed the request on as it came
				return
			}
			defer func() { c.Writer, c.Request = outerW, outerR }() // also when a handler panics
			gw := newWriter(w, outerW)
			gw.client = outerR.Context()
			// Passed through unprotected, the chain runs with the client's
			// context, whose end CloseNotify reports at once.
			gw.watched = r == outerR
			// In transaction mode a protected request's response is held
			// until the transaction ends; one passed through (no key)
			// comes with the client's request and is not.
			gw.held = cfg.BeginTx != nil && r != outerR
			c.Writer, c.Request = gw, r
			c.Next()
			if gw.Size() <= 0 && len(c.Errors) > outerErrs {
				// Failed with c.Error and no body written, its status
				// maybe sent (c.AbortWithError sends it at once): the
				// body may be for a middleware outside this one to
				// render, after the record would be taken. Nothing is
				// recorded; the key is released. The status the chain
				// set still goes out, and that middleware may still
				// change it if it was not sent, as in plain gin.
				idemhttp.Unrecorded(w)
			}
			if !gw.Written() && !gw.held && gw.Status() >= http.StatusBadRequest {
				// An error status alone (c.Status), which gin's writer
				// still holds unsent when the middleware returns, as
				// plain gin does: a middleware outside may render a body
				// for it, after the record would be taken. Not recorded;
				// the key is released. (A held response is sent before
				// the middleware returns, as a replay is: nothing is
				// rendered over it.)
				idemhttp.Unrecorded(w)
			}
			if unrouted && (gw.Status() == http.StatusNotFound || gw.Status() == http.StatusMethodNotAllowed) {
				// The router's answer, gin's own (written after the
				// middleware returns, from the status gin set before the
				// chain) or a NoRoute handler's: not recorded, so that a
				// retry runs the route once it exists.
				idemhttp.Unrecorded(w)
				if gw.held && !gw.Written() && gw.Status() == outerW.Status() {
					// gin's own answer, which comes too late for a held
					// response: the middleware sends it empty, after
					// which gin writes nothing. Written here as gin
					// would write it.
					gw.Header()["Content-Type"] = []string{"text/plain"}
					_, _ = gw.WriteString(routerAnswer[gw.Status()])
				}
			}
			gw.finish()
		})).ServeHTTP(outerW, outerR)
		if !ran {
			c.Abort()
		}
	}, nil
}

// routerAnswer are the bodies of gin's own answers to a request no route
// matches (404) or that only routes of other methods match (405), which it
// writes after the chain when the chain wrote nothing.
var routerAnswer = map[int]string{
	http.StatusNotFound:         "404 page not found",
	http.StatusMethodNotAllowed: "405 method not allowed",
}
