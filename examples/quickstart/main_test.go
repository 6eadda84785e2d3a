package main

import (
	"context"
	"testing"
)

// The README's first command works: the quickstart builds idem, runs the
// proxy on SQLite in front of the toy API, and the retried POST is
// replayed (one charge).
func TestQuickstart(t *testing.T) {
	t.Chdir("../..") // run from the repository root, as the README says
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The quickstart runs the same whatever IDEM_* variables the shell has
// (as the README shows, every flag of idem can come from one): its proxy
// is configured by its command line alone. Here IDEM_MIGRATE=false would
// make the proxy refuse its fresh database.
func TestQuickstartIgnoresIdemEnvironment(t *testing.T) {
	t.Setenv("IDEM_MIGRATE", "false")
	t.Chdir("../..")
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
