package idemgin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem/contrib/idemgin"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/txfake"
	"github.com/idemgo/idem/store/memstore"
)

// A handler registered with NoRoute (or NoMethod), such as a reverse proxy
// forwarding every path the engine does not route itself, is protected
// like a route: RequireKey applies, and a retry with the same key is
// replayed rather than run again. Its 404 or 405 is the router's answer
// and is not recorded, as gin's own.
func TestNoRouteHandlerIsProtected(t *testing.T) {
	s, _ := memstore.New(memstore.Config{})
	mw, err := idemgin.New(idemhttp.Config{Store: s, RequireKey: true})
	if err != nil {
		t.Fatal(err)
	}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(mw)
	e.GET("/only-get", func(c *gin.Context) { c.String(200, "got") })
	runs := 0
	e.NoRoute(func(c *gin.Context) {
		runs++
		if c.Request.URL.Path == "/missing" {
			c.String(http.StatusNotFound, "no such thing %d", runs)
			return
		}
		c.String(http.StatusCreated, "forwarded %d", runs)
	})
	e.NoMethod(func(c *gin.Context) {
		runs++
		c.String(http.StatusMethodNotAllowed, "not here %d", runs)
	})

	if w := serve(e, "POST", "/upstream/orders", `{}`); w.Code != http.StatusBadRequest || runs != 0 {
		t.Fatalf("POST without a key under RequireKey: %d %q, %d runs; want 400 and no run", w.Code, w.Body, runs)
	}
	for i := range 2 {
		w := serve(e, "POST", "/upstream/orders", `{}`, key("k1"))
		if w.Code != http.StatusCreated || w.Body.String() != "forwarded 1" || replayed(w) != (i == 1) {
			t.Fatalf("POST %d through NoRoute: %d %q replayed=%v; want 201 \"forwarded 1\", replayed the second time", i, w.Code, w.Body, replayed(w))
		}
	}
	// The router's answers, its NoRoute 404 and its NoMethod 405, are
	// not recorded: a retry runs again, as after a deploy adding the route.
	for _, tc := range []struct {
		path   string
		status int
	}{{"/missing", http.StatusNotFound}, {"/only-get", http.StatusMethodNotAllowed}} {
		before := runs
		for i := range 2 {
			w := serve(e, "POST", tc.path, `{}`, key("k"+tc.path))
			if w.Code != tc.status || replayed(w) {
				t.Errorf("POST %s %d: %d %q replayed=%v; want %d, not replayed", tc.path, i, w.Code, w.Body, replayed(w), tc.status)
			}
		}
		if runs != before+2 {
			t.Errorf("POST %s: %d runs of the handler, want 2", tc.path, runs-before)
		}
	}
}

// In transaction mode a NoRoute handler runs in the request's transaction
// like a route, and its response is committed and replayed; gin's own 404
// and 405, which it writes after the chain, reach the client with their
// bodies although the response is held, and roll the transaction back.
func TestTxNoRouteHandlerAndRouterAnswers(t *testing.T) {
	t.Run("NoRoute handler", func(t *testing.T) {
		e := newTxEngine(t)
		runs := 0
		e.engine.NoRoute(func(c *gin.Context) {
			runs++
			if c.Request.Context().Value(txfake.ValueKey{}) == nil {
				t.Error("the NoRoute handler found no transaction in its context")
			}
			c.String(http.StatusCreated, "forwarded %d", runs)
		})
		for i := range 2 {
			w, tx := e.serve(t, "/upstream/orders", "k1")
			if w.Code != http.StatusCreated || w.Body.String() != "forwarded 1" || replayed(w.ResponseRecorder) != (i == 1) {
				t.Fatalf("POST %d: %d %q replayed=%v; want 201 \"forwarded 1\", replayed the second time", i, w.Code, w.Body, replayed(w.ResponseRecorder))
			}
			if commits, _, _ := tx.Calls(); commits != 1-i {
				t.Errorf("POST %d: %d commits, want %d", i, commits, 1-i)
			}
		}
	})
	t.Run("router answers", func(t *testing.T) {
		e := newTxEngine(t)
		e.engine.HandleMethodNotAllowed = true
		e.engine.GET("/only-get", func(c *gin.Context) { c.String(200, "got") })
		for _, tc := range []struct {
			path, body string
			status     int
		}{{"/nowhere", "404 page not found", 404}, {"/only-get", "405 method not allowed", 405}} {
			for i := range 2 {
				w, tx := e.serve(t, tc.path, "k"+tc.path)
				if w.Code != tc.status || w.Body.String() != tc.body || w.Header().Get("Content-Type") != "text/plain" || replayed(w.ResponseRecorder) {
					t.Errorf("POST %s %d: %d %q %v; want %d %q, text/plain, not replayed", tc.path, i, w.Code, w.Body, w.Header(), tc.status, tc.body)
				}
				tx.WantEnded(t, fmt.Sprintf("POST %s %d", tc.path, i), 0, 1)
			}
		}
	})
}
