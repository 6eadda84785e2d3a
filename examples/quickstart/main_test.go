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
