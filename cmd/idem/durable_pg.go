package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgConnectTimeout bounds the first connection to PostgreSQL, for the
// store and the durable engine alike: a server that accepts the connection
// but never answers is given up on instead of waited for.
const pgConnectTimeout = 10 * time.Second

// connectPostgres opens a pool on dsn (a postgres:// URL or a libpq
// key=value string) and checks, within pgConnectTimeout, that the server
// answers. The store (openPostgres) and the durable commands both connect
// through it, so that every command reports a bad, unreachable or refusing
// database alike (badPostgresDSN, pgConnectError). configure, when not
// nil, adjusts the pool's configuration first.
func connectPostgres(ctx context.Context, dsn string, configure func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, badPostgresDSN(dsn, err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, pgConnectError(&cfg.ConnConfig.Config, err)
	}
	return pool, nil
}

// badPostgresDSN is the error of pgxpool.ParseConfig(dsn): a usage error,
// as a DSN it cannot read is, unless a file the DSN names (sslrootcert,
// sslcert…) could not be read, which is no mistake in how idem is called.
// The DSN is shown once, redacted: pgconn's error repeats it, hiding
// its password only as far as it can tell it in a DSN that does not read,
// and is shown without it, nor what it quotes of a DSN with a password.
func badPostgresDSN(dsn string, err error) error {
	reason := withoutConnString(err)
	if redact(dsn) != dsn {
		// What pgconn quotes of a DSN with a password, or one that does
		// not read as a URL, may be the password or a part of it (a '/'
		// in it ends the URL's host, and what comes before reads as a
		// port).
		reason = quoted.ReplaceAllString(reason, `"…"`)
	}
	err = pgParseError{msg: fmt.Sprintf("bad postgres DSN %q: %s", redact(dsn), reason), error: err}
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return err
	}
	return usageError{err}
}

// quoted is a string quoted as %q quotes it.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// pgParseError is an error of pgxpool.ParseConfig shown as msg.
type pgParseError struct {
	msg string
	error
}

func (e pgParseError) Error() string { return e.msg }
func (e pgParseError) Unwrap() error { return e.error }

// withoutConnString is the message of err, from pgxpool.ParseConfig,
// without the connection string a *pgconn.ParseConfigError in it quotes.
func withoutConnString(err error) string {
	pe, ok := errors.AsType[*pgconn.ParseConfigError](err)
	if !ok {
		return err.Error()
	}
	bare := *pe
	bare.ConnString = ""
	return strings.Replace(err.Error(), pe.Error(), strings.TrimPrefix(bare.Error(), "cannot parse ``: "), 1)
}
