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
// no later handler runs.
//
// Register it before any middleware that reads the request body, and after
// those that must see every request (logging, recovery, authentication).
func New(cfg idemhttp.Config) (gin.HandlerFunc, error) {
	mw, err := idemhttp.New(cfg)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		outerW, outerR := c.Writer, c.Request
		defer func() { c.Writer, c.Request = outerW, outerR }()
		ran := false
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			if w == http.ResponseWriter(outerW) && r == outerR {
				c.Next() // not protected: idemhttp handed the request on as it came
				return
			}
			gw := newWriter(w, outerW)
			c.Writer, c.Request = gw, r
			c.Next()
			gw.finish()
		})).ServeHTTP(outerW, outerR)
		if !ran {
			c.Abort()
		}
	}, nil
}
