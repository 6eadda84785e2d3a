package redisstore

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckVersion: the version a server's INFO reports is held against
// MinRedisVersion: an older one is a *VersionError naming the server, the
// version found and the one required; a newer or equal one passes, and so
// does an INFO without a redis_version it can read (a server that does not
// say cannot be checked).
func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		info  string
		found string // "" when it passes
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", ""},
		{"# Server\r\nredis_version:6.0.0\r\n", ""},
		{"redis_version:6.2.14\r\n", ""},
		{"redis_version:10.0.0\r\n", ""},
		{"# Server\r\nredis_version:5.0.14\r\n", "5.0.14"},
		{"redis_version:4.0.9\r\n", "4.0.9"},
		{"redis_version:2.8\r\n", "2.8"},
		{"redis_version:6\r\n", ""},
		{"# Server\r\nredis_mode:standalone\r\n", ""},
		{"redis_version:unknown\r\n", ""},
		{"", ""},
	} {
		err := checkVersion("127.0.0.1:6379", c.info)
		if c.found == "" {
			if err != nil {
				t.Errorf("checkVersion(%q) = %v, want nil", c.info, err)
			}
			continue
		}
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Found != c.found || ve.Required != MinRedisVersion || ve.Addr != "127.0.0.1:6379" {
			t.Errorf("checkVersion(%q) = %#v, want a *VersionError finding %s", c.info, err, c.found)
			continue
		}
		for _, want := range []string{"127.0.0.1:6379", c.found, MinRedisVersion} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %s", err, want)
			}
		}
	}
}
