package consumer

import (
	"context"
	"time"
)

// State is what a ledger says of a key when asked to claim it.
type State int

// States of Ledger.Claim.
const (
	// Claimed: the caller holds the key and must Complete or Release it.
	Claimed State = iota + 1
	// Done: the key was handled before.
	Done
	// Busy: another caller holds the key right now.
	Busy
)

// Ledger records the keys of handled messages. Implementations must make
// Claim atomic: of concurrent claims of one free key exactly one is Claimed.
type Ledger interface {
	// Claim claims key. The Claim is non-nil exactly when the state is
	// Claimed.
	Claim(ctx context.Context, key string) (Claim, State, error)
}

// RetryAfterLedger is a Ledger that can also say, when it answers Busy, how
// long the key stays held: Handle then claims with ClaimRetryAfter, and its
// InProgress error carries the duration as an *idem.InFlightError's
// RetryAfter (see ErrInProgress), for the broker to delay the redelivery
// by. StoreLedger and TrackerLedger are. Implementing it is optional: a Ledger that is
// not one is claimed with Claim, and its InProgress error is ErrInProgress
// alone.
type RetryAfterLedger interface {
	Ledger
	// ClaimRetryAfter is Claim that also returns, with Busy, how long
	// until the key's holder loses it unless it renews its claim (the rest
	// of a lease or a TTL): a positive duration, or 0 when the ledger
	// cannot tell. With any other state it returns 0.
	ClaimRetryAfter(ctx context.Context, key string) (Claim, State, time.Duration, error)
}

// Claim is a held key. Its methods must return, with an error if need be,
// once ctx is done: the Consumer bounds them with Config.SettleTimeout.
type Claim interface {
	// Complete marks the key done: later claims answer Done.
	Complete(ctx context.Context) error
	// Release frees the key: the next claim answers Claimed.
	Release(ctx context.Context) error
}
