package pgstore_test

import (
	"strings"
	"testing"

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
