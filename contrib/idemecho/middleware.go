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
// c.Response() is a new *echo.Response that records what is written. Both
// are restored when the middleware returns, also when a handler panics.
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
func New(cfg idemhttp.Config) (echo.MiddlewareFunc, error) {
	mw, err := idemhttp.New(cfg)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			outerRes, outerReq := c.Response(), c.Request()
			defer func() {
				c.SetResponse(outerRes)
				c.SetRequest(outerReq)
			}()
			var herr error
			mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if w == http.ResponseWriter(outerRes) && r == outerReq {
					herr = next(c) // not protected: idemhttp handed the request on as it came
					return
				}
				c.SetRequest(r)
				c.SetResponse(echo.NewResponse(w, c.Echo()))
				if herr = next(c); herr != nil {
					c.Error(herr)
				}
			})).ServeHTTP(outerRes, outerReq)
			return herr
		}
	}, nil
}
