package main

import "testing"

// TestShellWord: the DSN a message tells to pass to --db can be pasted
// into a shell as it is.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h/db":                 "postgres://u@h/db",
		"postgres://u@h/db?sslmode=disable": "'postgres://u@h/db?sslmode=disable'",
		"host=h user=u":                     "'host=h user=u'",
		"password='x y'":                    `'password='\''x y'\'''`,
		"":                                  "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
