package idemgin_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem/contrib/idemgin"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// renderErrors is the error renderer of gin's own documentation: after
// the chain, the last error the chain attached is rendered as JSON,
// whether or not a status was already sent.
func renderErrors(c *gin.Context) {
	c.Next()
	if len(c.Errors) > 0 {
		c.JSON(-1, gin.H{"error": c.Errors.Last().Error()})
	}
}

// A chain that fails with c.AbortWithError sends its status at once but
// leaves the body to an error renderer outside the middleware, which
// writes it after the record would be taken: the retry is not answered a
// recorded 400 with an empty body, but runs again and gets what the first
// client got, the renderer's body.
func TestAbortWithErrorBodyRenderedOutside(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemgin.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	e := gin.New()
	e.Use(renderErrors, mw)
	runs := 0
	e.POST("/charges", func(c *gin.Context) {
		runs++
		_ = c.AbortWithError(http.StatusBadRequest, errors.New("amount must be positive"))
	})
	const want = `{"error":"amount must be positive"}`
	for i := range 2 {
		w := serve(e, "POST", "/charges", `{"amount":-1}`, key("k"))
		if w.Code != http.StatusBadRequest || w.Body.String() != want || replayed(w) {
			t.Errorf("request %d: %d %q replayed=%v, want 400 %s as the renderer wrote it", i, w.Code, w.Body, replayed(w), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (a response whose body is rendered outside is not recorded)", runs)
	}
}

// In transaction mode, a chain that fails with c.AbortWithError has its
// transaction rolled back, not committed with an empty 400 that its retry
// would be answered; the client gets the status, and the body an error
// renderer outside writes after it.
func TestTxAbortWithErrorRollsBack(t *testing.T) {
	e := newTxEngine(t)
	e.engine = gin.New()
	mw, err := idemgin.New(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	e.engine.Use(renderErrors, mw)
	runs := 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		_ = c.AbortWithError(http.StatusUnprocessableEntity, errors.New("out of stock"))
	})
	const want = `{"error":"out of stock"}`
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		tx.WantEnded(t, fmt.Sprintf("request %d", i), 0, 1)
		if w.Code != http.StatusUnprocessableEntity || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 422 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2", runs)
	}
}

// A chain that ends with an error status and no body written (c.Status
// alone) leaves gin's writer unwritten, as plain gin does, so that a
// middleware outside may still render a body for it, after the record
// would be taken: that response is not recorded, and the retry gets what
// the first client got, the outer middleware's body, rather than a
// recorded empty 404.
func TestBodylessErrorStatusRenderedOutside(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemgin.New(idemhttp.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	e := gin.New()
	e.Use(func(c *gin.Context) { // renders the bodyless error statuses of the chain
		c.Next()
		if status := c.Writer.Status(); status >= 400 && !c.Writer.Written() {
			c.JSON(status, gin.H{"error": http.StatusText(status)})
		}
	}, mw)
	runs := 0
	e.POST("/orders/:id/cancel", func(c *gin.Context) {
		runs++
		c.Status(http.StatusNotFound)
	})
	const want = `{"error":"Not Found"}`
	for i := range 2 {
		w := serve(e, "POST", "/orders/7/cancel", `{}`, key("k"))
		if w.Code != http.StatusNotFound || w.Body.String() != want || replayed(w) {
			t.Errorf("request %d: %d %q replayed=%v, want 404 %s as the outer middleware wrote it", i, w.Code, w.Body, replayed(w), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2", runs)
	}
}
