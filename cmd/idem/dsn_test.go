package main

import (
	"strings"
	"testing"
)

func TestRedactHidesPasswords(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:secret@h/db":                    "postgres://u:xxxxx@h/db",
		"postgres://h/db?password=secret&sslmode=off": "postgres://h/db?password=xxxxx&sslmode=off",
		"postgres://u:secret/x@h/db":                  "postgres://(unreadable URL)",
		"host=h user=u password=secret dbname=d":      "host=h user=u password=xxxxx dbname=d",
		"host=h password='sec ret' dbname=d":          "host=h password=xxxxx dbname=d",
		"redis://:secret@h:6379/0":                    "redis://:xxxxx@h:6379/0",
		"sqllite:idem.db":                             "sqllite:idem.db",
		"mongo://x":                                   "mongo://x",
		"%zz":                                         "%zz",
		"password=se://cret host=h":                   "password=xxxxx host=h",
		"host=h sslpassword=secret":                   "host=h sslpassword=xxxxx",
		"u:secret@h:5432/db":                          "u:xxxxx@h:5432/db",
		// Found by FuzzRedact.
		"postgres://h/db?sslmode=off?password=secret": "postgres://h/db?sslmode=off?password=xxxxx",
		"postgres://h/db?sslpassword=secret":          "postgres://h/db?sslpassword=xxxxx",
		":secret@h/db":                                ":xxxxx@h/db",
		"my_user:secret@h:5432/db":                    "my_user:xxxxx@h:5432/db",
		"//u:secret@h/db":                             "//u:xxxxx@h/db",
		"//0:secret@%20/0":                            "//0:xxxxx@%20/0",
		" u:secret@h":                                 " u:xxxxx@h",
		":sec ret@h":                                  ":xxxxx@h",
		"=://u:secret@h/db":                           "=:xxxxx@h/db",
		"/://u:secret@h/db":                           "/:xxxxx@h/db",
		"u@server:secret@h":                           "u@server:xxxxx@h",
		":sec\nret@h":                                 ":xxxxx@h",
		"postgres://us#er:secret@h/db":                "postgres://us#er:xxxxx@h/db",
		"postgres://us/er:secret@h/db":                "postgres://us/er:xxxxx@h/db",
		"postgres://us?er:secret@h/db":                "postgres://us?er:xxxxx@h/db",
	} {
		got := redact(dsn)
		if got != want || strings.Contains(got, "secret") || strings.Contains(got, "sec ret") {
			t.Errorf("redact(%q) = %q, want %q", dsn, got, want)
		}
	}
}
