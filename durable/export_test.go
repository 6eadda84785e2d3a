package durable

// HeartbeatSQL is the heartbeat's statement, for the tests that make it
// hang.
const HeartbeatSQL = heartbeatSQL

// MigrateLockID is the advisory lock Migrate holds, for the test that
// queues two migrations behind it.
const MigrateLockID = migrateLockID

// LockParentByKeySQL and LockByKeySQL are Cancel's look-ups of a key, for
// the test that makes the key change hands between them.
const (
	LockParentByKeySQL = lockParentByKeySQL
	LockByKeySQL       = lockByKeySQL
)
