// Package pgtest gives tests real, throwaway PostgreSQL databases.
//
// URL returns a connection URL isolated for one test: a fresh schema with a
// random name on a server shared by the whole test process. The URL carries
// the search_path run-time parameter, so every connection made from it, by
// pgx, pgxpool or database/sql through pgx/stdlib, works in that schema. The
// schema is dropped, with everything in it, when the test ends.
//
// The shared server is the one TEST_DATABASE_URL names when that variable is
// set. Otherwise the first call to URL starts one for the test process: initdb
// with trust authentication in a temporary directory, fsync off, listening on
// 127.0.0.1 only, on a free port, with its unix socket in that directory. Main
// (or Wrap) stops it and removes its directory when the tests are done.
//
// Start gives one test a private server, always started by this package even
// when TEST_DATABASE_URL is set, that the test may stop, kill and start again
// on the same port and data directory: the tool for fault tests. Launch does
// the same for programs that are not tests.
//
// An interrupt, termination or hang-up signal stops and removes the servers
// of running tests before it ends the test process. Should the process die
// some other way, each server it started gets an immediate-shutdown signal
// from the kernel, and the next Launch on the machine removes the
// directories the dead process left.
//
// When no server can be had, because TEST_DATABASE_URL is unset and the
// PostgreSQL binaries are not installed, the test is skipped with a message
// that says so; but when CI=true or TEST_REQUIRE_SERVERS=1 it fails instead.
// The binaries are looked up on PATH, then in the highest-versioned
// /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root, so when the
// test process is root the server runs as the "postgres" OS user.
//
// A package that uses URL calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// or, composed with goleak and redistest:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(pgtest.Wrap(redistest.Wrap(m)))
//	}
package pgtest
