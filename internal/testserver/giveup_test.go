package testserver

import (
	"errors"
	"fmt"
	"testing"
)

// outcome records how GiveUp ended a test.
type outcome struct {
	testing.TB
	skipped, failed bool
}

func (o *outcome) Helper()                      {}
func (o *outcome) Skipf(string, ...any)         { o.skipped = true }
func (o *outcome) Fatal(...any)                 { o.failed = true }
func (o *outcome) Fatalf(string, ...any)        { o.failed = true }
func (o *outcome) String() string               { return fmt.Sprintf("skipped=%v failed=%v", o.skipped, o.failed) }
func (o *outcome) is(skipped, failed bool) bool { return o.skipped == skipped && o.failed == failed }

func TestGiveUp(t *testing.T) {
	unavailable := errors.New("no server")
	missing := fmt.Errorf("%w: no binaries", unavailable)
	broken := errors.New("initdb failed")
	for _, c := range []struct {
		ci, require string
		err         error
		skip, fail  bool
	}{
		{err: missing, skip: true},
		{ci: "true", err: missing, fail: true},
		{require: "1", err: missing, fail: true},
		{ci: "false", require: "0", err: missing, skip: true},
		{err: broken, fail: true},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv("TEST_REQUIRE_SERVERS", c.require)
		var o outcome
		GiveUp(&o, c.err, unavailable, "install one")
		if !o.is(c.skip, c.fail) {
			t.Errorf("CI=%q TEST_REQUIRE_SERVERS=%q err=%v: %v, want skipped=%v failed=%v", c.ci, c.require, c.err, &o, c.skip, c.fail)
		}
	}
}
