package pgstore

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the table a Store uses when Config.Table is empty.
const DefaultTable = "idempotency_record"

// maxIdentLen bounds each part of Config.Table, so that the names derived
// from it (the index Table+"_expiry_idx", the constraints PostgreSQL names
// after it) stay within PostgreSQL's 63-byte identifier limit.
const maxIdentLen = 48

// table is a validated table name.
type table struct {
	schema string // empty when not qualified
	name   string
	full   string // as configured: name or schema.name
}

// parseTable validates s, a table name that may be schema-qualified
// ("records" or "idem.records"). Each part is 1–48 bytes of lowercase ASCII
// letters, digits and '_', not starting with a digit. Upper case is
// rejected rather than quoted: PostgreSQL folds unquoted names to lower
// case, so "Records" in the store would be a different table than Records
// in the operator's own SQL.
func parseTable(s string) (table, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return table{}, fmt.Errorf("%q has %d dots; want name or schema.name", s, len(parts)-1)
	}
	for _, p := range parts {
		if err := checkIdent(p); err != nil {
			return table{}, fmt.Errorf("%q: %w", s, err)
		}
	}
	if len(parts) == 2 {
		return table{schema: parts[0], name: parts[1], full: s}, nil
	}
	return table{name: parts[0], full: s}, nil
}

func checkIdent(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty name")
	case len(p) > maxIdentLen:
		return fmt.Errorf("%q is %d bytes, the limit is %d", p, len(p), maxIdentLen)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := 'a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return fmt.Errorf("%q has %q at byte %d (allowed: lowercase a-z and _, then also digits 0-9)", p, c, i)
		}
	}
	return nil
}

// String returns the name as configured.
func (t table) String() string { return t.full }

// ident returns the quoted, possibly qualified table name for SQL text.
func (t table) ident() string {
	if t.schema == "" {
		return pgx.Identifier{t.name}.Sanitize()
	}
	return pgx.Identifier{t.schema, t.name}.Sanitize()
}

// indexIdent returns the quoted name of the purge index. An index always
// lives in its table's schema, so the name is never qualified.
func (t table) indexIdent() string {
	return pgx.Identifier{t.name + "_purge_idx"}.Sanitize()
}

// qualifiedIndexIdent is indexIdent qualified with the table's schema when
// it has one, for to_regclass.
func (t table) qualifiedIndexIdent() string {
	return t.qualified(t.name + "_purge_idx")
}

// oldIndexIdents returns the quoted names of the expiry indexes of earlier
// schema versions, qualified with the table's schema when it has one, for
// DROP INDEX and to_regclass: version 1's (namespace, expires_at), which
// generic plans of point lookups could prefer to the primary key, and
// version 2's (expires_at, namespace), which PurgeExpired walked through
// the expired records of every namespace.
func (t table) oldIndexIdents() (version1, version2 string) {
	return t.qualified(t.name + "_expires_idx"), t.qualified(t.name + "_expiry_idx")
}

// qualified returns the quoted name of an object in the table's schema.
func (t table) qualified(name string) string {
	if t.schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{t.schema, name}.Sanitize()
}

// schemaIdent returns the quoted schema name, empty when not qualified.
func (t table) schemaIdent() string {
	if t.schema == "" {
		return ""
	}
	return pgx.Identifier{t.schema}.Sanitize()
}
