package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/pgstore"
)

var ordersNS = idem.MustNamespace("orders")

// maxBody is the largest request body read, in bytes: a larger one is
// answered 413 (as idem proxy and the idemhttp middleware answer one over
// their MaxBody) instead of being decoded into memory whatever its size.
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

// service creates orders, once per Idempotency-Key.
type service struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
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
	return &service{pool: pool, store: store}, nil
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/orders" {
		http.NotFound(w, r)
		return
	}
	key, err := idem.ParseHeader(ordersNS, r.Header.Values(idem.HeaderName))
	switch {
	case errors.Is(err, idem.ErrKeyMissing):
		problem(w, http.StatusBadRequest, idemhttp.ProblemKeyMissing, "send an Idempotency-Key header, e.g. Idempotency-Key: o-1")
		return
	case err != nil:
		problem(w, http.StatusBadRequest, idemhttp.ProblemKeyInvalid, err.Error())
		return
	}
	var req orderRequest
	err = json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		problem(w, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge, fmt.Sprintf("the body is over %d bytes", maxBody))
		return
	case err != nil || req.SKU == "" || req.Qty <= 0:
		problem(w, http.StatusBadRequest, "urn:orders:bad-request", `want {"sku":…,"qty":>0}`)
		return
	}
	o, replayed, err := s.create(r.Context(), key, req)
	var inFlight *idem.InFlightError
	switch {
	case err == nil:
		if replayed { // marked as idem proxy and the idemhttp middleware mark theirs
			w.Header().Set(idemhttp.ReplayedHeader, "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(o)
	case errors.As(err, &inFlight):
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusConflict, idemhttp.ProblemInProgress, "the original request is still running")
	case errors.Is(err, idem.ErrMismatch):
		problem(w, http.StatusUnprocessableEntity, idemhttp.ProblemKeyReused, "key reused with another request")
	default:
		problem(w, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable, "try again")
	}
}

// create inserts the order and records the idempotency key in one
// transaction: both commit together, or neither does. replayed reports
// that the key had already created its order, which is returned again.
func (s *service) create(ctx context.Context, key idem.Key, req orderRequest) (o order, replayed bool, err error) {
	ran := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		o, err = idem.Do(ctx, s.store.WithTx(tx), key, req, func(ctx context.Context) (order, error) {
			ran = true
			o := order{SKU: req.SKU, Qty: req.Qty}
			err := tx.QueryRow(ctx, `INSERT INTO orders (sku, qty) VALUES ($1, $2) RETURNING id`, req.SKU, req.Qty).Scan(&o.ID)
			return o, err
		}, nil)
		return err
	})
	return o, err == nil && !ran, err
}

func problem(w http.ResponseWriter, status int, typ, detail string) {
	idemhttp.WriteProblem(w, nil, &idemhttp.Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail})
}
