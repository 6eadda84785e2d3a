package main

import (
	"bytes"
	"errors"
	"flag"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// secretMark starts every password or query value the fuzz targets below
// hide.
const secretMark = "S3cr3tMark"

// FuzzParseUpstream checks parseUpstream on any --upstream: it never
// panics; what it refuses it refuses with a usage error; what it takes is
// an http or https URL with a host and neither a query string nor user
// info; and its message never shows a password given in the URL's user
// part, nor the value of a query parameter.
func FuzzParseUpstream(f *testing.F) {
	for i, c := range []struct{ scheme, user, host, rest string }{
		{"http", "", "127.0.0.1:9000", "/api"}, {"https", "svc", "api.example", "/"}, {"http", "u", "[::1]:1", ""},
		{"", "", "127.0.0.1:9000", ""}, {"ftp", "a", "h", "/x"}, {"http", "", "", "/"}, {"http", "u@v", "h:80", "#f"},
	} {
		f.Add(uint8(i), c.scheme, c.user, c.host, c.rest, "")
	}
	f.Fuzz(func(t *testing.T, form uint8, scheme, user, host, rest, extra string) {
		secret := secretMark + extra
		if strings.Contains(scheme+user+host+rest, secretMark[:4]) {
			return
		}
		var s string
		switch form % 5 {
		case 0: // no secret at all
			s = scheme + "://" + user + host + rest
		case 1: // user:password@, raw
			s = scheme + "://" + user + ":" + secret + "@" + host + rest
		case 2: // user:password@, escaped as a URL writes it
			s = (&url.URL{Scheme: scheme, User: url.UserPassword(user, secret), Host: host, Path: rest}).String()
		case 3: // a query parameter
			s = scheme + "://" + host + rest + "?token=" + url.QueryEscape(secret)
		case 4: // user:password@, no "//"
			s = user + ":" + secret + "@" + host + rest
		}
		up, err := parseUpstream(s)
		if err != nil {
			if !isUsage(err) {
				t.Fatalf("parseUpstream(%q) = %v, not a usage error", s, err)
			}
			if msg := err.Error(); strings.Contains(msg, secretMark) || strings.Contains(msg, url.QueryEscape(secretMark)) {
				t.Fatalf("parseUpstream(%q): %q shows the secret", s, msg)
			}
			return
		}
		if up.Scheme != "http" && up.Scheme != "https" || up.Host == "" || up.RawQuery != "" || up.Fragment != "" || up.User != nil {
			t.Fatalf("parseUpstream(%q) took %#v: want http or https, a host, no query, no fragment, no user info", s, up)
		}
	})
}

// FuzzStoreDSNErrors checks the errors of a Redis or Postgres store DSN
// that does not read, before any connection: the DSN parsed as idem
// parses it (redisClient; pgxpool.ParseConfig then badPostgresDSN) never
// panics, a DSN refused is a usage error, and the message never shows
// the password given in the DSN's user part or in a password parameter.
func FuzzStoreDSNErrors(f *testing.F) {
	for i, c := range []struct{ user, host, rest string }{
		{"u", "h:6379", "/0"}, {"", "h", "/db?sslmode=off"}, {"u", "h:bad", ""}, {"u", "[::1", "/x"},
		{"u", "h1:1", "?addr=h2:2"}, {"a b", "h", "/0?db=x"}, {"u", "h:5432", "/db?connect_timeout=x"},
	} {
		f.Add(uint8(i), c.user, c.host, c.rest, "")
	}
	schemes := []string{"redis", "rediss", "redis-cluster", "rediss-cluster", "postgres", "postgresql"}
	f.Fuzz(func(t *testing.T, form uint8, user, host, rest, extra string) {
		secret := secretMark + extra
		// A file a Postgres DSN names (sslrootcert, passfile…) is read
		// when it is parsed: none but those of the test.
		if strings.Contains(user+host+rest+extra, secretMark[:4]) || strings.Contains(user+host+rest+extra, "/dev") {
			return
		}
		scheme := schemes[int(form)%len(schemes)]
		var dsn string
		switch form / 8 % 3 {
		case 0: // user:password@, raw
			dsn = scheme + "://" + user + ":" + secret + "@" + host + rest
		case 1: // user:password@, escaped
			dsn = (&url.URL{Scheme: scheme, User: url.UserPassword(user, secret), Host: host}).String() + rest
		case 2: // a password parameter
			dsn = scheme + "://" + host + rest + "?password=" + url.QueryEscape(secret)
		}
		var err error
		if strings.HasPrefix(scheme, "redis") {
			var c interface{ Close() error }
			if c, err = redisClient(dsn); err == nil {
				_ = c.Close()
				return
			}
		} else {
			if _, err = pgxpool.ParseConfig(dsn); err == nil {
				return
			}
			err = badPostgresDSN(dsn, err)
			if !isUsage(err) && !strings.Contains(err.Error(), "no such file") && !strings.Contains(err.Error(), "is a directory") {
				t.Fatalf("DSN %q: %v, not a usage error", dsn, err)
			}
		}
		if strings.HasPrefix(scheme, "redis") && !isUsage(err) {
			t.Fatalf("DSN %q: %v, not a usage error", dsn, err)
		}
		if msg := err.Error(); strings.Contains(msg, secretMark) || strings.Contains(msg, url.QueryEscape(secretMark)) || strings.Contains(msg, url.PathEscape(secretMark)) {
			t.Fatalf("DSN %q: %q shows the password", dsn, msg)
		}
	})
}

// FuzzParseFlags checks how a command's flags are read from its command
// line and its IDEM_* variables (parse), whatever they hold: it never
// panics; an error is the flag package's, printed (errUsage), help asked
// for (flag.ErrHelp) or a usage error naming the variable; a variable's
// value is taken only when the command line does not set the flag; and
// every error names what the flag accepts rather than "parse error".
func FuzzParseFlags(f *testing.F) {
	f.Add("--ttl\x0010s\x00--require-key", "1h", "true", "5", "memory")
	f.Add("--require-key\x00false\x00--ttl=1m", "soon", "yes", "1MB", "")
	f.Add("-h", "", "", "", "")
	f.Add("--max-body=99999999999999999999", "-1s", "T", "-3", "x")
	f.Fuzz(func(t *testing.T, args, ttl, requireKey, maxBody, store string) {
		env := map[string]string{"IDEM_TTL": ttl, "IDEM_REQUIRE_KEY": requireKey, "IDEM_MAX_BODY": maxBody, "IDEM_STORE": store}
		var argv []string
		if args != "" {
			argv = strings.Split(args, "\x00")
		}
		var out bytes.Buffer
		fs, _, _ := testFlags(&out)
		err := parse(fs, argv, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
		case err == errUsage:
			if out.Len() == 0 {
				t.Fatalf("parse(%q) = errUsage with nothing printed", argv)
			}
		case isUsage(err):
			if !strings.Contains(err.Error(), "IDEM_") {
				t.Fatalf("parse(%q) = %v: a usage error that names no variable", argv, err)
			}
		default:
			t.Fatalf("parse(%q) = %v (%T): not a usage error", argv, err, err)
		}
		if msg := out.String() + errString(err); strings.Contains(msg, "parse error") {
			t.Fatalf("parse(%q): %q says only parse error", argv, msg)
		}
		if err != nil {
			return
		}
		// The command line wins over a variable.
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if !set["store"] && fs.Lookup("store").Value.String() != store {
			t.Fatalf("parse(%q) with IDEM_STORE=%q: --store %q", argv, store, fs.Lookup("store").Value)
		}
	})
}

// errString is err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
