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

// MaxConcurrencyKey and MaxCorrelationKey are the longest
// InsertOpts.ConcurrencyKey and CorrelationKey, for the tests that insert
// them.
const (
	MaxConcurrencyKey = maxIndexedText
	MaxCorrelationKey = maxIndexedText
)

// InboxHeadSQL is Get's read of the head of an inbox, for the test of its
// plan.
const InboxHeadSQL = inboxHeadSQL

// WaitsOn counts the Waits registered, in this process, on c's pool: for
// the test that they unregister.
func WaitsOn(c *Client) int { return endWaits.count(c.pool) }

// DueSQL is the await timer's statement, for the test of its plan.
const DueSQL = dueSQL
