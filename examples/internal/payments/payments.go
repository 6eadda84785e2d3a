// Package payments is the toy API the examples put idem in front of.
package payments

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Charge is one created charge.
type Charge struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

// API counts every charge it creates; a retried request that reaches it
// twice creates two charges. It answers in JSON: a charge (201), the list
// of charges (200, an array, empty before the first), or a refused charge
// (400, {"error":…}).
type API struct {
	mu      sync.Mutex
	charges []Charge
	mux     *http.ServeMux
}

// New returns an empty API.
func New() *API {
	a := &API{charges: []Charge{}, mux: http.NewServeMux()}
	a.mux.HandleFunc("POST /charges", a.create)
	a.mux.HandleFunc("GET /charges", a.list)
	return a
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Count returns how many charges were created.
func (a *API) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.charges)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	var c Charge
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.Amount <= 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"want {\"customer\":…,\"amount\":>0}"}`+"\n")
		return
	}
	a.mu.Lock()
	c.ID = fmt.Sprintf("ch_%d", len(a.charges)+1)
	a.charges = append(a.charges, c)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/charges/"+c.ID)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(c)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a.charges)
}
