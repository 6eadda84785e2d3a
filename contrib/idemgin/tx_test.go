package idemgin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem/contrib/idemgin"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/txfake"
)

// txEngine is a gin engine with the middleware in transaction mode on
// fake transactions (txfake).
type txEngine struct {
	*txfake.Env
	engine *gin.Engine
}

func newTxEngine(t *testing.T) *txEngine {
	t.Helper()
	env := txfake.New(t)
	mw, err := idemgin.New(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	e := &txEngine{Env: env, engine: gin.New()}
	e.engine.Use(mw)
	return e
}

// serve sends a POST with key k and returns what the client got and the
// request's transaction, if one was begun.
func (e *txEngine) serve(t *testing.T, target, k string) (*txfake.Client, *txfake.Tx) {
	t.Helper()
	return e.Serve(t, e.engine, target, k)
}

// In transaction mode through the gin adapter, a handler answering with
// c.JSON finds the transaction in c.Request.Context(), its 201 is held
// until the record and the transaction are committed (nothing reaches the
// client before Commit), the transaction is committed once and not rolled
// back, the client then gets the 201, and a retry with the same key is a
// replay that does not run the handler.
func TestTxCommitHoldsTheResponse(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var seen []any
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		tx, _ := c.Request.Context().Value(txfake.ValueKey{}).(*txfake.Tx)
		seen = append(seen, tx)
		c.JSON(http.StatusCreated, gin.H{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(seen) != 1 || seen[0] != tx {
		t.Errorf("the handler found %v in c.Request.Context(), want the request's transaction %p", seen, tx)
	}
	commits, rollbacks, early := tx.Calls()
	if commits != 1 || rollbacks != 0 {
		t.Errorf("Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	if len(early) != 0 {
		t.Errorf("the client had been sent %q before the transaction was committed", early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != `{"order":1}` || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 {\"order\":1}", w.Code, w.Body.String(), replayed(w.ResponseRecorder))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want c.JSON's application/json", ct)
	}

	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != `{"order":1}` || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the replayed 201", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder))
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
	if rtx != nil {
		if commits, _, _ := rtx.Calls(); commits != 0 {
			t.Errorf("the replay's transaction was committed %d times", commits)
		}
	}
}

// In transaction mode through the gin adapter, a handler answering 502
// with c.JSON has its transaction rolled back, not committed; the client
// gets the 502 as written, and a retry with the same key runs the handler
// again.
func TestTxFailureRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, found := 0, 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		if c.Request.Context().Value(txfake.ValueKey{}) != nil {
			found++
		}
		c.JSON(http.StatusBadGateway, gin.H{"error": "upstream down", "run": runs})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		tx.WantEnded(t, fmt.Sprintf("request %d", i), 0, 1)
		want := `{"error":"upstream down","run":` + string(rune('1'+i)) + `}`
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 502 is not recorded)", runs)
	}
	if found != runs {
		t.Errorf("the handler found its transaction in c.Request.Context() in %d of %d runs", found, runs)
	}
}

// In transaction mode through the gin adapter, when Tx.Commit fails after
// the handler answered 201, the client gets 503 with the store-unavailable
// problem and nothing of the 201 (status, body or the handler's headers),
// and a retry with the same key runs the handler again.
func TestTxCommitFailureAnswers503(t *testing.T) {
	e := newTxEngine(t)
	e.SetCommitErr(errors.New("connection reset during COMMIT"))
	runs := 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		c.Header("Location", "/orders/1")
		c.JSON(http.StatusCreated, gin.H{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if commits, _, early := tx.Calls(); commits != 1 || len(early) != 0 {
		t.Errorf("Commit called %d times, the client sent %q before it; want 1 and nothing", commits, early)
	}
	wantProblem(t, w.ResponseRecorder, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
	if strings.Contains(w.Body.String(), `"order"`) || w.Header().Get("Location") != "" {
		t.Errorf("the client got part of the handler's 201: body %q, Location %q", w.Body.String(), w.Header().Get("Location"))
	}

	e.SetCommitErr(nil)
	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != `{"order":2}` || replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the handler's second 201", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder))
	}
	if rtx == nil {
		t.Fatal("the retry began no transaction")
	}
	rtx.WantEnded(t, "the retry", 1, 0)
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the failed commit had no effect)", runs)
	}
}

// In transaction mode through the gin adapter, a streaming handler (c.Stream,
// and c.Writer.Flush between writes) sends nothing to the client before
// Commit: the client then gets the whole body, which is recorded and
// replayed to a retry with the same key.
func TestTxStreamIsHeldAndRecorded(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var sentEarly []string
	e.engine.POST("/events", func(c *gin.Context) {
		runs++
		c.Header("Content-Type", "text/plain")
		c.Status(http.StatusCreated)
		i := 0
		c.Stream(func(w io.Writer) bool {
			i++
			_, _ = fmt.Fprintf(w, "part %d\n", i)
			return i < 3
		})
		_, _ = c.Writer.WriteString("tail\n")
		c.Writer.Flush()
		cw := e.CurrentClient()
		if cw.Written() || cw.Flushed {
			sentEarly = append(sentEarly, cw.Body.String())
		}
	})

	const want = "part 1\npart 2\npart 3\ntail\n"
	w, tx := e.serve(t, "/events", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(sentEarly) != 0 {
		t.Errorf("the client had been sent %q while the handler streamed", sentEarly)
	}
	commits, rollbacks, early := tx.Calls()
	if commits != 1 || rollbacks != 0 || len(early) != 0 {
		t.Errorf("Commit called %d times, Rollback %d, the client sent %q before Commit; want 1, 0 and nothing", commits, rollbacks, early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != want || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 %q", w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
	}

	retry, _ := e.serve(t, "/events", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != want || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the replayed 201 %q", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder), want)
	}
	if ct := retry.Header().Get("Content-Type"); ct != "text/plain" {
		t.Errorf("replayed Content-Type %q, want text/plain", ct)
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}

// In transaction mode through the gin adapter, a handler failing with
// c.AbortWithStatusJSON(502, ...) has its transaction rolled back, the
// client gets that 502 as written, and a retry with the same key runs the
// handler again; a handler after it in the chain does not run.
func TestTxAbortWithStatusJSONRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, after := 0, 0
	e.engine.POST("/orders", func(c *gin.Context) {
		runs++
		c.AbortWithStatusJSON(http.StatusBadGateway, gin.H{"error": "down", "run": runs})
	}, func(c *gin.Context) {
		after++
		c.JSON(http.StatusCreated, gin.H{"order": 1})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		tx.WantEnded(t, fmt.Sprintf("request %d", i), 0, 1)
		want := fmt.Sprintf(`{"error":"down","run":%d}`, i+1)
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 || after != 0 {
		t.Errorf("the handler ran %d times and the one after it %d, want 2 and 0", runs, after)
	}
}

// In transaction mode through the gin adapter, a streaming handler's
// response is held and recorded whole, so c.Writer.CloseNotify does not
// report the client leaving, even after a Flush: c.Stream runs to its end
// rather than stop early and have a truncated body committed and replayed.
func TestTxStreamRunsToItsEndWhenTheClientLeaves(t *testing.T) {
	e := newTxEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := false
	e.engine.POST("/events", func(c *gin.Context) {
		i := 0
		stopped = c.Stream(func(w io.Writer) bool {
			i++
			_, _ = fmt.Fprintf(w, "part %d\n", i)
			if i == 1 {
				c.Writer.Flush()
				cancel() // the client leaves after the first part
				// Give CloseNotify the time to report it, were it watching.
				for deadline := time.Now().Add(300 * time.Millisecond); len(c.Writer.CloseNotify()) == 0 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			return i < 3
		})
	})
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/events", strings.NewReader(`{"sku":"a"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k1")
	_, tx := e.ServeRequest(e.engine, r)

	const want = "part 1\npart 2\npart 3\n"
	if stopped {
		t.Error("c.Stream stopped early: CloseNotify reported the client leaving while the response was held")
	}
	tx.WantEnded(t, "the transaction", 1, 0)
	retry, _ := e.serve(t, "/events", "k1")
	if retry.Code != http.StatusOK || retry.Body.String() != want || !replayed(retry.ResponseRecorder) {
		t.Errorf("retry got %d %q replayed=%v, want the whole stream replayed, %q", retry.Code, retry.Body.String(), replayed(retry.ResponseRecorder), want)
	}
}
