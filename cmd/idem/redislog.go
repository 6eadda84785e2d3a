package main

import "context"

// quietRedis is the go-redis client's logger in idem: it drops the lines
// the client prints by itself (a dial that failed, pool and cluster
// notices). Every error a store call meets is returned to its caller, which
// reports it: a command in its one error message, the proxy through
// errorReporter, at most one line per 10 s. The client's own lines would
// repeat those errors once per call, without limit, in a format of their
// own.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
