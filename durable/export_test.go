package durable

// HeartbeatSQL is the heartbeat's statement, for the tests that make it
// hang.
const HeartbeatSQL = heartbeatSQL

// MigrateLockID is the advisory lock Migrate holds, for the test that
// queues two migrations behind it.
const MigrateLockID = migrateLockID
