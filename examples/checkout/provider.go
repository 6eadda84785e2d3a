package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// charge is one charge the payment provider created.
type charge struct {
	ID     string `json:"id"`
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// provider is a fake payment API that honours Idempotency-Key as real
// providers do: POST /charges with a key it has seen returns the charge it
// created for that key instead of charging again. FailAfterCharge makes it
// lose its next responses after charging, as a timeout or a dropped
// connection would: the client sees a failure although the money moved.
// It is safe for concurrent use.
type provider struct {
	mu              sync.Mutex
	byKey           map[string]charge
	requests        []string // the Idempotency-Key of every charge request
	charges         int
	failAfterCharge int
}

func newProvider() *provider { return &provider{byKey: map[string]charge{}} }

// Charges returns how many charges were created.
func (p *provider) Charges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charges
}

// Requests returns the Idempotency-Key of every charge request, in order.
func (p *provider) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// FailAfterCharge makes the next n charge requests fail after the charge
// was made (or, for a key seen before, found).
func (p *provider) FailAfterCharge(n int) {
	p.mu.Lock()
	p.failAfterCharge = n
	p.mu.Unlock()
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key is required", http.StatusBadRequest)
		return
	}
	var req charge
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	p.mu.Lock()
	p.requests = append(p.requests, key)
	c, seen := p.byKey[key]
	if !seen {
		p.charges++
		c = charge{ID: fmt.Sprintf("ch_%d", p.charges), Order: req.Order, Amount: req.Amount}
		p.byKey[key] = c
	}
	fail := p.failAfterCharge > 0
	if fail {
		p.failAfterCharge--
	}
	p.mu.Unlock()

	if fail {
		http.Error(w, "upstream timeout", http.StatusGatewayTimeout)
		return
	}
	if seen && (c.Order != req.Order || c.Amount != req.Amount) {
		http.Error(w, "Idempotency-Key reused with another request", http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if seen {
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(c)
}
