package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
		// A '?' or '#' in the password of a user:password@ with no "//".
		"u:sec?ret@h:1/db": "u:xxxxx@h:1/db",
		"u:sec#ret@h:1/db": "u:xxxxx@h:1/db",
		"u:sec?r#et@h?x=1": "u:xxxxx@h",
	} {
		got := redact(dsn)
		if got != want || strings.Contains(got, "secret") || strings.Contains(got, "sec ret") {
			t.Errorf("redact(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// TestRedisCallsEndAtTheirDeadline: the proxy's Redis client gives up on
// a server that does not answer at the call's deadline (--store-timeout),
// not at its read timeout, 3 s by default.
func TestRedisCallsEndAtTheirDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	t.Cleanup(func() {
		_ = ln.Close()
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})
	go func() { // accepts and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for _, dsn := range []string{"redis://" + ln.Addr().String() + "/0?protocol=2&max_retries=-1", "redis-cluster://" + ln.Addr().String() + "?protocol=2&max_retries=-1"} {
		client, err := redisClient(dsn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err = client.Ping(ctx).Err()
		took := time.Since(start)
		cancel()
		_ = client.Close()
		if err == nil || took > time.Second {
			t.Errorf("%s: Ping on a silent server with a 100ms deadline: %v after %s; want an error at about 100ms", dsn, err, took)
		}
	}
}

// TestClusterDSN: the Redis Cluster DSN suggested for a redis:// or
// rediss:// DSN naming a node keeps TLS (rediss-cluster://) and the user,
// and hides the password.
func TestClusterDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"redis://10.0.0.1:7000", "redis-cluster://10.0.0.1:7000"},
		{"redis://10.0.0.1:7000/0?dial_timeout=1s", "redis-cluster://10.0.0.1:7000"},
		{"redis://:secret@10.0.0.1:7000", "redis-cluster://:xxxxx@10.0.0.1:7000"},
		{"rediss://app:secret@node.example:7000", "rediss-cluster://app:xxxxx@node.example:7000"},
		{"rediss://app@node.example:7000", "rediss-cluster://app@node.example:7000"},
		{"rediss://us%40er:p%40ss@node.example:7000", "rediss-cluster://us%40er:xxxxx@node.example:7000"},
	} {
		addr := tc.want[strings.LastIndexByte(tc.want, '@')+1:]
		if i := strings.Index(addr, "://"); i >= 0 {
			addr = addr[i+3:]
		}
		if got := clusterDSN(tc.dsn, addr); got != tc.want {
			t.Errorf("clusterDSN(%q, %q) = %q, want %q", tc.dsn, addr, got, tc.want)
		}
	}
}

// TestBadPostgresDSNHidesThePassword: a Postgres DSN that does not read
// is refused with a usage error that says why, and shows the DSN once,
// redacted: not pgx's copy of it, whose redaction misses passwords in
// some malformed DSNs.
func TestBadPostgresDSNHidesThePassword(t *testing.T) {
	for dsn, why := range map[string]string{
		"postgresql://u:sec ret/x@h/db":                     "spaces",
		"postgresql://0?%?password=secret":                  "percent-encoded",
		"postgres://u:secret@h:port/db":                     "port",
		"postgres://h/db?connect_timeout=x&password=secret": "connect_timeout",
	} {
		_, err := pgxpool.ParseConfig(dsn)
		if err == nil {
			t.Fatalf("pgxpool.ParseConfig(%q) took it", dsn)
		}
		err = badPostgresDSN(dsn, err)
		msg := err.Error()
		if !isUsage(err) || !strings.Contains(msg, why) || strings.Contains(msg, "secret") || strings.Contains(msg, "sec ret") || strings.Count(msg, "://") != 1 {
			t.Errorf("badPostgresDSN(%q) = %q; want a usage error saying %q, the DSN once, without its password", dsn, msg, why)
		}
	}
}
