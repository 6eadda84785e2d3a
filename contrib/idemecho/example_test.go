package idemecho_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem/contrib/idemecho"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
)

// A retried POST with the same Idempotency-Key gets the recorded response;
// the handler runs once.
func Example() {
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idemecho.New(idemhttp.Config{Store: store, RequireKey: true})
	if err != nil {
		log.Fatal(err)
	}

	e := echo.New()
	e.Use(mw)
	charges := 0
	e.POST("/charges", func(c echo.Context) error {
		charges++
		return c.JSON(http.StatusCreated, map[string]int{"charge": charges})
	})

	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "order-1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()), "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"charge":1} replayed: false
	// 201 {"charge":1} replayed: true
	// charges: 1
}
