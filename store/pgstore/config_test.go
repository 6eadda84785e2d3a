package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem/store/pgstore"
)

func TestConfigValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  pgstore.Config
		want string // in the error; "" for a valid config
	}{
		"zero":               {pgstore.Config{}, ""},
		"plain table":        {pgstore.Config{Table: "idem_records2"}, ""},
		"qualified table":    {pgstore.Config{Table: "idem.records"}, ""},
		"48-byte table":      {pgstore.Config{Table: strings.Repeat("t", 48)}, ""},
		"49-byte table":      {pgstore.Config{Table: strings.Repeat("t", 49)}, "Config.Table"},
		"upper case":         {pgstore.Config{Table: "Records"}, "Config.Table"},
		"quote":              {pgstore.Config{Table: `records"; DROP TABLE x; --`}, "Config.Table"},
		"space":              {pgstore.Config{Table: "idem records"}, "Config.Table"},
		"leading digit":      {pgstore.Config{Table: "1records"}, "Config.Table"},
		"two dots":           {pgstore.Config{Table: "a.b.c"}, "Config.Table"},
		"empty schema":       {pgstore.Config{Table: ".records"}, "Config.Table"},
		"empty name":         {pgstore.Config{Table: "idem."}, "Config.Table"},
		"non-ASCII":          {pgstore.Config{Table: "récords"}, "Config.Table"},
		"negative retention": {pgstore.Config{Retention: -1}, "Config.Retention"},
		"negative lease":     {pgstore.Config{Lease: -1}, "Config.Lease"},
		"negative payload":   {pgstore.Config{MaxPayload: -1}, "Config.MaxPayload"},
		"negative batch":     {pgstore.Config{PurgeBatch: -1}, "Config.PurgeBatch"},
		"payload of 1 GiB":   {pgstore.Config{MaxPayload: 1 << 30}, "Config.MaxPayload"},
		"MaxMaxPayload":      {pgstore.Config{MaxPayload: pgstore.MaxMaxPayload}, ""},
		"beyond MaxMax":      {pgstore.Config{MaxPayload: pgstore.MaxMaxPayload + 1}, "Config.MaxPayload"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := pgstore.New(nil, tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			case tc.want == "" && tc.cfg.Table == "" && s.Table() != pgstore.DefaultTable:
				t.Errorf("Table() = %q, want the default %q", s.Table(), pgstore.DefaultTable)
			}
		})
	}
}

// TestMaxMaxPayloadFitsJSONB: the encoded stored error that MaxMaxPayload
// admits, all of it one message, fits the error_payload column's jsonb
// (a FailPermanent refused by the server would fail after the effect ran,
// as idem.ErrUnavailable), and one string past jsonb's cap does not: the
// limit is the server's, not a guess.
func TestMaxMaxPayloadFitsJSONB(t *testing.T) {
	tb := setup(t, pgstore.Config{})
	ctx := ctxT(t)
	envelope := len(`{"class":"","message":""}`)
	var size int
	if err := tb.pool.QueryRow(ctx, `SELECT pg_column_size(jsonb_build_object('class', '', 'message', repeat('m', $1::int)))`,
		pgstore.MaxMaxPayload-envelope).Scan(&size); err != nil {
		t.Fatalf("a stored error of MaxMaxPayload bytes as jsonb: %v", err)
	}
	if size < pgstore.MaxMaxPayload-envelope {
		t.Fatalf("pg_column_size = %d, less than the message alone", size)
	}
	_, err := tb.pool.Exec(ctx, `SELECT jsonb_build_object('message', repeat('m', 268435455))`)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "54000" {
		t.Fatalf("a jsonb string of 268435455 bytes: %v, want SQLSTATE 54000 (program limit exceeded)", err)
	}
}
