// Package redistest gives tests real, throwaway Redis servers.
//
// URL returns the redis:// URL of a server shared by the whole test process,
// and Prefix a key prefix no other test uses: tests on the shared server
// keep to their own keys by putting the prefix in front of every key, and
// the keys under a prefix are deleted when its test ends. The shared server
// is the one TEST_REDIS_URL names when that variable is set. Otherwise the
// first call to URL starts one for the test process, redis-server with no
// persistence listening on 127.0.0.1 only, on a free port, in a temporary
// directory. Main (or Wrap) stops it and removes its directory when the
// tests are done.
//
// Start gives one test a private server, always started by this package even
// when TEST_REDIS_URL is set, that the test may stop, kill and start again on
// the same port: the tool for fault tests. StartCluster gives one test a
// private Redis Cluster of several masters. Launch and LaunchCluster do the
// same for programs that are not tests.
//
// An interrupt, termination or hang-up signal stops and removes the servers
// of running tests before it ends the test process. Should the process die
// some other way, the kernel kills each server it started, and the next
// Launch on the machine removes the directories the dead process left.
//
// When no server can be had, because TEST_REDIS_URL is unset and
// redis-server is not installed, the test is skipped with a message that
// says so; but when CI=true or TEST_REQUIRE_SERVERS=1 it fails instead.
// redis-server and redis-cli are looked up on PATH, then in /usr/bin and
// /usr/local/bin.
//
// A package that uses URL calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// or, composed with goleak and pgtest:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(redistest.Wrap(pgtest.Wrap(m)))
//	}
package redistest
