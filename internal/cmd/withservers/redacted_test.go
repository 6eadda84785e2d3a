package main

import (
	"strings"
	"testing"
)

// The line withservers prints never shows a password of the servers the
// variables name.
func TestRedactedHidesPasswords(t *testing.T) {
	for _, u := range []string{
		"postgres://user:s3cret@db.example:5432/app?sslmode=require",
		"redis://:s3cret@127.0.0.1:6379/0",
		"rediss://default:s3cret@cache.example:6380",
		"postgres://user:s3cret@[::1",
	} {
		if got := redacted(u); strings.Contains(got, "s3cret") {
			t.Errorf("redacted(%q) = %q, which shows the password", u, got)
		}
	}
	if got := redacted("postgres://postgres@127.0.0.1:5432/postgres"); got != "postgres://postgres@127.0.0.1:5432/postgres" {
		t.Errorf("a URL without a password became %q", got)
	}
}
