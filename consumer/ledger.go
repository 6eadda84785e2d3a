package consumer

import "context"

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

// Claim is a held key. Its methods must return, with an error if need be,
// once ctx is done: the Consumer bounds them with Config.SettleTimeout.
type Claim interface {
	// Complete marks the key done: later claims answer Done.
	Complete(ctx context.Context) error
	// Release frees the key: the next claim answers Claimed.
	Release(ctx context.Context) error
}
