package main

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddressPrintedOnceListening: the command prints its address only
// once it listens there, since what runs it (the README's steps, a
// script) takes the line as the sign that it may send requests: on an
// address already in use it fails without printing it.
func TestAddressPrintedOnceListening(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "payments-api")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building payments-api: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := exec.Command(bin, "--listen", ln.Addr().String()).CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || strings.Contains(string(out), "payments-api on") || !strings.Contains(string(out), "address already in use") {
		t.Errorf("on an address in use: exit %v, output %q; want exit 1, the error and no address", err, out)
	}
}
