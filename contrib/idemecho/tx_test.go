package idemecho_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem/contrib/idemecho"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/txfake"
)

// txEngine is an echo instance with the middleware in transaction mode
// on fake transactions (txfake).
type txEngine struct {
	*txfake.Env
	engine *echo.Echo
}

func newTxEngine(t *testing.T) *txEngine {
	t.Helper()
	env := txfake.New(t)
	mw, err := idemecho.New(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	e := &txEngine{Env: env, engine: echo.New()}
	e.engine.Use(mw)
	return e
}

// serve sends a POST with key k and returns what the client got and the
// request's transaction, if one was begun.
func (e *txEngine) serve(t *testing.T, target, k string) (*txfake.Client, *txfake.Tx) {
	t.Helper()
	return e.Serve(t, e.engine, target, k)
}

// In transaction mode through the echo adapter, a handler answering with
// c.JSON finds the transaction in c.Request().Context(), its 201 is held
// until the record and the transaction are committed (nothing reaches the
// client before Commit), the transaction is committed once and not rolled
// back, the client then gets the 201, and a retry with the same key is a
// replay that does not run the handler.
func TestTxCommitHoldsTheResponse(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var seen []any
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		tx, _ := c.Request().Context().Value(txfake.ValueKey{}).(*txfake.Tx)
		seen = append(seen, tx)
		return c.JSON(http.StatusCreated, map[string]int{"order": runs})
	})

	w, tx := e.serve(t, "/orders", "k1")
	if tx == nil {
		t.Fatal("BeginTx was not called")
	}
	if len(seen) != 1 || seen[0] != tx {
		t.Errorf("the handler found %v in c.Request().Context(), want the request's transaction %p", seen, tx)
	}
	commits, rollbacks, early := tx.Calls()
	if commits != 1 || rollbacks != 0 {
		t.Errorf("Commit called %d times, Rollback %d, want 1 and 0", commits, rollbacks)
	}
	if len(early) != 0 {
		t.Errorf("the client had been sent %q before the transaction was committed", early)
	}
	if w.Code != http.StatusCreated || w.Body.String() != "{\"order\":1}\n" || replayed(w.ResponseRecorder) {
		t.Errorf("client got %d %q replayed=%v, want 201 {\"order\":1}", w.Code, w.Body.String(), replayed(w.ResponseRecorder))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want c.JSON's application/json", ct)
	}

	retry, rtx := e.serve(t, "/orders", "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != "{\"order\":1}\n" || !replayed(retry.ResponseRecorder) {
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

// In transaction mode through the echo adapter, a handler answering 502
// with c.JSON has its transaction rolled back, not committed; the client
// gets the 502 as written, and a retry with the same key runs the handler
// again.
func TestTxFailureRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs, found := 0, 0
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		if c.Request().Context().Value(txfake.ValueKey{}) != nil {
			found++
		}
		return c.JSON(http.StatusBadGateway, map[string]any{"error": "upstream down", "run": runs})
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		tx.WantEnded(t, fmt.Sprintf("request %d", i), 0, 1)
		want := `{"error":"upstream down","run":` + string(rune('1'+i)) + "}\n"
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want 502 %s", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 502 is not recorded)", runs)
	}
	if found != runs {
		t.Errorf("the handler found its transaction in c.Request().Context() in %d of %d runs", found, runs)
	}
}

// In transaction mode through the echo adapter, when Tx.Commit fails after
// the handler answered 201, the client gets 503 with the store-unavailable
// problem and nothing of the 201 (status, body or the handler's headers),
// and a retry with the same key runs the handler again.
func TestTxCommitFailureAnswers503(t *testing.T) {
	e := newTxEngine(t)
	e.SetCommitErr(errors.New("connection reset during COMMIT"))
	runs := 0
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		c.Response().Header().Set("Location", "/orders/1")
		return c.JSON(http.StatusCreated, map[string]int{"order": runs})
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
	if retry.Code != http.StatusCreated || retry.Body.String() != "{\"order\":2}\n" || replayed(retry.ResponseRecorder) {
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

// In transaction mode through the echo adapter, a streaming handler
// (c.Response().Flush() between writes) sends nothing to the client before
// Commit: the client then gets the whole body, which is recorded and
// replayed to a retry with the same key.
func TestTxStreamIsHeldAndRecorded(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var sentEarly []string
	e.engine.POST("/events", func(c echo.Context) error {
		runs++
		res := c.Response()
		res.Header().Set(echo.HeaderContentType, echo.MIMETextPlain)
		res.WriteHeader(http.StatusCreated)
		for i := 1; i <= 3; i++ {
			if _, err := fmt.Fprintf(res, "part %d\n", i); err != nil {
				return err
			}
			res.Flush()
			cw := e.CurrentClient()
			if cw.Written() || cw.Flushed {
				sentEarly = append(sentEarly, cw.Body.String())
			}
		}
		return nil
	})

	const want = "part 1\npart 2\npart 3\n"
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
	if ct := retry.Header().Get(echo.HeaderContentType); ct != echo.MIMETextPlain {
		t.Errorf("replayed Content-Type %q, want %s", ct, echo.MIMETextPlain)
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}

// In transaction mode through the echo adapter, a handler that returns
// echo.NewHTTPError(502, "down") instead of writing has its transaction
// rolled back, as in lease mode the error is rendered at once by echo's
// HTTPErrorHandler and the client gets that 502 (once, not rendered twice),
// and a retry with the same key runs the handler again; the middleware
// returns the handler's error.
func TestTxReturnedErrorRollsBack(t *testing.T) {
	e := newTxEngine(t)
	runs := 0
	var returned []error
	// A middleware outside the idem one sees what it returns.
	e.engine.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			returned = append(returned, err)
			return err
		}
	})
	e.engine.POST("/orders", func(c echo.Context) error {
		runs++
		return echo.NewHTTPError(http.StatusBadGateway, "down")
	})
	for i := range 2 {
		w, tx := e.serve(t, "/orders", "k1")
		if tx == nil {
			t.Fatalf("request %d: BeginTx was not called", i)
		}
		tx.WantEnded(t, fmt.Sprintf("request %d", i), 0, 1)
		const want = "{\"message\":\"down\"}\n"
		if w.Code != http.StatusBadGateway || w.Body.String() != want || replayed(w.ResponseRecorder) {
			t.Errorf("request %d: client got %d %q replayed=%v, want echo's 502 %q", i, w.Code, w.Body.String(), replayed(w.ResponseRecorder), want)
		}
	}
	if runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 502 is not recorded)", runs)
	}
	if len(returned) != 2 {
		t.Errorf("the middleware returned %d times, want 2", len(returned))
	}
	for i, err := range returned {
		var he *echo.HTTPError
		if !errors.As(err, &he) || he.Code != http.StatusBadGateway {
			t.Errorf("request %d: the middleware returned %v, want the handler's 502 error", i, err)
		}
	}
}
