package main

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
)

var ordersNS = idem.MustNamespace("orders")

// maxBody is the largest request body read, in bytes: the middleware
// answers a larger one 413 instead of reading it whole.
const maxBody = 1 << 20

type orderRequest struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type order struct {
	ID  int64  `json:"id"`
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// service creates orders, once per Idempotency-Key: the idemhttp
// middleware in transaction mode runs each keyed POST in a transaction of
// its own, in which the handler inserts the order and the middleware
// records the response; both commit together, or neither does.
type service struct {
	pool    *pgxpool.Pool
	store   *pgstore.Store
	handler http.Handler
}

func newService(ctx context.Context, pool *pgxpool.Pool) (*service, error) {
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, sku text NOT NULL, qty int NOT NULL)`); err != nil {
		return nil, err
	}
	s := &service{pool: pool, store: store}
	mw, err := idemhttp.New(idemhttp.Config{
		Namespace:  ordersNS,
		RequireKey: true, // a POST without a key would run without a transaction
		MaxBody:    maxBody,
		BeginTx:    s.beginTx,
	})
	if err != nil {
		return nil, err
	}
	s.handler = mw(http.HandlerFunc(s.createOrder))
	return s, nil
}

// txKey is the context key of the request's transaction.
type txKey struct{}

// beginTx begins the transaction of a keyed POST: the middleware records
// the response with the store bound to it, and the handler finds it in
// its context.
func (s *service) beginTx(r *http.Request) (*idemhttp.Tx, error) {
	tx, err := s.pool.Begin(r.Context())
	if err != nil {
		return nil, err
	}
	return &idemhttp.Tx{
		Store:    s.store.WithTx(tx),
		Context:  context.WithValue(r.Context(), txKey{}, tx),
		Commit:   tx.Commit,
		Rollback: tx.Rollback,
	}, nil
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/orders" {
		http.NotFound(w, r)
		return
	}
	s.handler.ServeHTTP(w, r)
}

// createOrder inserts the order in the request's transaction; the
// middleware has already read the body (answering 413 over maxBody). A
// failed insert answers 503, a status the middleware does not record: it
// rolls the transaction back, and a retry with the same key runs again. A
// bad body's 400 is recorded, like the 201, and replayed to a retry.
func (s *service) createOrder(w http.ResponseWriter, r *http.Request) {
	var req orderRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.SKU == "" || req.Qty <= 0 {
		problem(w, http.StatusBadRequest, "urn:orders:bad-request", `want {"sku":…,"qty":>0}`)
		return
	}
	tx, ok := r.Context().Value(txKey{}).(pgx.Tx)
	if !ok { // the middleware passed the request through: no transaction
		problem(w, http.StatusInternalServerError, idemhttp.ProblemInternal, "no transaction")
		return
	}
	o := order{SKU: req.SKU, Qty: req.Qty}
	if err := tx.QueryRow(r.Context(), `INSERT INTO orders (sku, qty) VALUES ($1, $2) RETURNING id`, req.SKU, req.Qty).Scan(&o.ID); err != nil {
		problem(w, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable, "try again")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o)
}

func problem(w http.ResponseWriter, status int, typ, detail string) {
	idemhttp.WriteProblem(w, nil, &idemhttp.Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail})
}
