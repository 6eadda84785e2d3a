package durable

// HeartbeatSQL is the heartbeat's statement, for the tests that make it
// hang.
const HeartbeatSQL = heartbeatSQL
