// Package idemtest is the conformance suite of idem.Store: the author of a
// backend runs it from the backend's tests, and every store of this
// repository (memstore, sqlitestore, pgstore, redisstore) passes it. One
// call, Exercise, checks the whole store contract (the statements S1–S11 of
// the repository's CONFORMANCE.md, plus input checking, expiry, key edge
// cases and a model-based comparison against a reference) against a real
// backend. Applications that only use a store do not need this package.
//
// # Running the suite
//
// In the backend's package, a test hands Exercise a Harness whose NewStore
// makes a store on the suite's clock, with Retention and Lease as its
// default retention and lease:
//
//	func TestConformance(t *testing.T) {
//		db := openTestDatabase(t) // once: every store may share it
//		idemtest.Exercise(t, idemtest.Harness{
//			NewStore: func(t *testing.T, now func() time.Time) idem.Store {
//				s, err := mystore.New(db, mystore.Config{
//					Now:       now,
//					Retention: idemtest.Retention,
//					Lease:     idemtest.Lease,
//				})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//		})
//	}
//
// and `go test -race -run TestConformance ./mystore` runs it. The examples
// of Exercise are complete test files: ExampleExercise_mapStore is a store
// written from idem.Store's contract alone, on the helpers package idem
// offers backends (CheckBegin, CheckLease and CheckPayload for the
// arguments, BeginOpts.Durations, Decide for a Begin that finds a live
// record, NewToken), and passes the suite.
//
// What the store must do for the suite:
//
//   - Take every time from now: the time of a record, the end of a lease, and
//     whether a record or a lease has expired. The suite moves its Clock by
//     seconds to hours with Clock.Advance, without waiting, so a backend
//     that reads its server's clock (PostgreSQL's now(), Redis expiry)
//     instead fails the lease and expiry cases. The clock starts on a whole
//     millisecond: timestamps stored to the millisecond or finer round-trip.
//   - Default to Retention and Lease. A store made with other defaults
//     fails many cases (record times, takeover, heartbeat, RetryAfter),
//     with messages that name the times they expected rather than the
//     setting at fault.
//   - Be safe for concurrent use. Every case runs in parallel with the others
//     (t.Parallel) and calls NewStore for a store of its own, so NewStore is
//     called concurrently and should be cheap: open the database or server
//     once, outside it, and release what a store holds with t.Cleanup. Every
//     case uses its own random namespace (RandomNamespace), so the stores may
//     share one database or server, across cases and across test runs.
//
// The other fields of Harness turn on more cases: NewTx the transactional
// mode of SQL backends, MaxPayload the payload-limit cases (skipped while it
// is zero), NewUnreachableStore the outage case, in which every call must
// fail with idem.ErrUnavailable within 20 seconds.
//
// # Reading a failure
//
// Each case is a subtest named after the statement it checks
// ("S8/LeaseTakeoverFencesOldOwner", "Expiry/ExpiredRecordCountsAsAbsent",
// "Tx/S6/RollbackRemovesReservation"), so
// -run 'TestConformance/S8/' runs one group again. The model-based case,
// "Model/RandomSequencesMatchReference", uses pgregory.net/rapid: on a
// failure it prints the shortest sequence of calls it found, writes it to
// a file under testdata/rapid/ in the package's directory, and prints the
// -rapid.failfile or -rapid.seed flag that replays it. Later runs replay
// that file first: delete it once the failure is fixed (or commit it, as a
// regression case).
//
// Clock and RandomNamespace are exported for a backend's own tests beside
// the suite, and so is Crowd, for a backend that sends concurrent calls
// together (a batch, a pipeline): a thousand callers at once must each get
// their own answers.
package idemtest
