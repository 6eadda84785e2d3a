package main

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

// pwMark starts every password FuzzRedact hides.
const pwMark = "Pw0rdMark"

// FuzzRedact checks that redact never shows a password, however the DSN
// around it is written: in a URL's user part (escaped as a URL writes it,
// or raw), in a password query parameter, in a libpq key=value string
// (quoted when it must be), or in an opaque user:password@host; and that
// a DSN without a password comes back unchanged when it is a URL that
// parses.
func FuzzRedact(f *testing.F) {
	for i, c := range []struct{ scheme, user, host, rest, pw string }{
		{"postgres", "u", "h", "/db", ""}, {"redis", "", "h:6379", "/0", "x"}, {"postgresql", "u", "h", "/db?sslmode=off", "sec ret"},
		{"rediss", "u", "[::1]:1", "", "a@b/c"}, {"redis-cluster", "u", "h1,h2", "", "%zz"}, {"mongo", "", "x", "", "'q\\"},
		{"sqlite", "", "", "idem.db", ":"}, {"", "u", "h", "", "#frag?q"},
	} {
		f.Add(uint8(i), c.scheme, c.user, c.host, c.rest, c.pw)
	}
	f.Fuzz(func(t *testing.T, form uint8, scheme, user, host, rest, extra string) {
		pw := pwMark + extra
		if strings.Contains(scheme+user+host+rest, pwMark[:4]) {
			return
		}
		// In the raw user:password@ forms, a user name with '=' or white
		// space makes text no client reads as a user and password
		// ("0://\n=:secret@h"), which redact cannot tell from key=value.
		rawUser := !strings.Contains(user, "=") && strings.IndexFunc(user, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
		if (form%7 == 1 || form%7 == 6) && !rawUser {
			return
		}
		var dsn string
		switch form % 7 {
		case 0: // user:password in a URL, escaped
			u := url.URL{Scheme: scheme, User: url.UserPassword(user, pw), Host: host, Path: rest}
			dsn = u.String()
		case 1: // user:password in a URL, raw
			dsn = scheme + "://" + user + ":" + pw + "@" + host + rest
		case 2: // a password query parameter
			dsn = scheme + "://" + host + rest + "?" + url.Values{"password": {pw}, "user": {user}}.Encode()
		case 3: // a password or sslpassword query parameter, raw
			key := "password"
			if len(extra)%2 == 1 {
				key = "sslpassword"
			}
			dsn = scheme + "://" + host + "/?sslmode=off&" + key + "=" + pw + "&" + rest
		case 4, 5: // libpq key=value
			key := "password"
			if form%7 == 5 {
				key = "sslpassword"
			}
			v := pw
			if strings.ContainsAny(pw, " \t\n\r\v\f'\\") || pw == "" {
				v = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'"
			}
			dsn = "host=" + strings.Join(strings.Fields(host), "") + " " + key + "=" + v + " user=" + strings.Join(strings.Fields(user), "")
		case 6: // user:password@host, no "//"
			dsn = user + ":" + pw + "@" + host + rest
		}
		got := redact(dsn)
		if strings.Contains(got, pwMark) || strings.Contains(got, url.QueryEscape(pwMark)) {
			t.Fatalf("redact(%q) = %q shows the password", dsn, got)
		}
		// Without a password.
		plain := scheme + "://" + user + "@" + host + rest
		if u, err := url.Parse(plain); err == nil && u.Scheme != "" && u.Opaque == "" && !u.Query().Has("password") && !strings.Contains(plain, "password") {
			if _, has := u.User.Password(); !has {
				if got := redact(plain); got != u.String() {
					t.Fatalf("redact(%q) = %q, want it as it parses: %q", plain, got, u.String())
				}
			}
		}
	})
}
