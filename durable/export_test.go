package durable

// HeartbeatSQL is the heartbeat's statement, for the tests that make it
// hang.
const HeartbeatSQL = heartbeatSQL

// MigrateLockID is the advisory lock Migrate holds, for the test that
// queues two migrations behind it.
const MigrateLockID = migrateLockID

// LookupByKeySQL and LockHolderSQL are the look-up of a key and the lock
// of the instance found, for the test that makes the key change hands
// between them.
const (
	LookupByKeySQL = lookupByKeySQL
	LockHolderSQL  = lockHolderSQL
)

// MaxConcurrencyKey is the longest InsertOpts.ConcurrencyKey, for the test
// that inserts one.
const MaxConcurrencyKey = maxConcurrencyKey

// MaxCorrelationKey is the longest InsertOpts.CorrelationKey, for the
// test that inserts one.
const MaxCorrelationKey = maxCorrelationKey
