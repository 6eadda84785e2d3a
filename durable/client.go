package durable

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Client inserts and signals FSM instances, inspects them, migrates the
// schema and, once started, runs the engine: the queues' pickers and
// workers, the heartbeat, the reaper, the await timer and the garbage
// collector. Its methods are safe for concurrent use.
type Client struct {
	pool *pgxpool.Pool
	cfg  Config
	defs map[fsmKey]Definition

	mu  sync.Mutex
	run *engine // the current or last run; nil before the first Start
}

// NewClient returns a client on pool with cfg (nil: the zero Config, enough
// to insert, signal, inspect and migrate). The tables live in the first
// schema of the pool's search_path; every client of one engine must see the
// same one. Its errors name the Config field at fault (a *ConfigError),
// but for a nil pool, a plain error.
func NewClient(pool *pgxpool.Pool, cfg *Config) (*Client, error) {
	if pool == nil {
		return nil, errors.New("durable: NewClient: pool is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
		c.Queues = make(map[string]QueueConfig, len(cfg.Queues))
		for k, v := range cfg.Queues {
			c.Queues[k] = v
		}
		c.FSMs = append([]Definition(nil), cfg.FSMs...)
	}
	defs, err := c.validate()
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, cfg: c, defs: defs}, nil
}

// ID returns the engine's Config.ID (or its default).
func (c *Client) ID() string { return c.cfg.ID }

// dbtx is what the queries need: a pool or a transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}
