// Package durable runs durable finite-state machines on PostgreSQL: long
// processes whose state is committed to the database before each step
// proceeds, so that they survive crashes and restarts of the processes that
// run them and resume where they left off.
//
// Use it for a process of several steps that must finish whatever happens to
// the process running it: an order that is paid, shipped and invoiced, a
// sign-up that waits days for an e-mail confirmation, a batch fanned out to
// child jobs. Instances wait for named signals from the outside (a webhook,
// a user's click), addressed by a business key such as "order:42"; retries,
// timeouts, queues, priorities, concurrency and rate limits are the
// engine's. For one effect that must happen once per request or message,
// with no steps and no waiting, package idem (idem.Do over an idem.Store)
// or package consumer is enough. The package follows the GenDurable design,
// whose telemetry event names it keeps.
//
// # Getting started
//
// Run the engine against a PostgreSQL database and a pgxpool.Pool:
//
//	fsm, err := durable.NewFSM(durable.FSMConfig[Order]{Name: "order", Initial: "charge", Steps: steps})
//	client, err := durable.NewClient(pool, &durable.Config{
//		FSMs:   []durable.Definition{fsm},
//		Queues: map[string]durable.QueueConfig{durable.DefaultQueue: {Concurrency: 10}},
//	})
//	err = client.Migrate(ctx)     // creates or updates the tables; idempotent
//	err = client.Start(ctx)       // pickers, workers and background work
//	defer client.Stop(stopCtx)    // graceful: running steps finish and commit
//	// One order process per order, ever: with this scope the key stays
//	// taken after the instance ends (the default scope frees it then), and
//	// a redelivered Insert gets ErrDuplicate, naming the instance.
//	once := append(durable.LiveStatuses(), durable.StatusDone, durable.StatusFailed, durable.StatusCancelled)
//	id, err := client.Insert(ctx, fsm.With(Order{ID: 42}), &durable.InsertOpts{CorrelationKey: "order:42", CorrelationScope: once})
//	err = client.Signal(ctx, durable.ByKey("order:42"), "payment_confirmed", payment, paymentEventID)
//
// A Client comes from NewClient only (the zero Client is not usable). One
// Client both writes (Insert, Signal, Cancel, Retry, Get, Wait, List)
// and, once started, runs steps; a process that only inserts and signals,
// such as a web server beside separate workers, never calls Start, and its Config
// needs no FSMs or Queues. Start runs until Stop, or until Start's context
// is cancelled; a stopped Client can be started again. Every method is
// safe for concurrent use. The configuration's defaults are in the doc of
// each field of Config, FSMConfig, QueueConfig and InsertOpts; nil options
// (*Config, *InsertOpts, *RetryOpts, *ListOpts) take every default.
//
// To shut down on SIGTERM, call Stop with a deadline inside the grace
// period the process is given: running steps finish and commit, and those
// still running at the deadline have their contexts cancelled and their
// rows handed back, their attempts unchanged (the cause of their
// contexts' cancellation is ErrEngineStopping). Do not give Start a context
// that the signal cancels (signal.NotifyContext): cancelling Start's
// context is the hard stop, which cancels the running steps at once.
//
// # The model
//
// An FSM instance is a row, not a goroutine. Its state is a Go value (the S
// of FSM[S]) stored as JSON; its position is the name of the step to run
// next. A step is a short function that reads the state, does a piece of
// work, may change the state, and returns one Outcome:
//
//   - Next(step): run step next, at once (the attempt resets to 1);
//   - Retry(delay): run the same step again after delay (attempt + 1);
//   - Await(step, names...) and AwaitTimeout: park until a signal with one
//     of names arrives (or the timeout passes), then run step;
//   - Children(step, children...): insert child instances, park until
//     they have all ended, then run step;
//   - Done(result): end successfully, storing result as JSON;
//   - Stop(reason): end as failed;
//   - Cancel(reason): end as cancelled.
//
// The engine commits the outcome and the new state in one transaction before
// anything else happens to the instance. Execution is therefore
// at-least-once per step: a step whose engine dies, or loses its lease,
// before the commit runs again from the last committed state. A commit that
// fails because the connection or the server failed (a dropped connection,
// a failover, a restarting server), or that the server rolled back as a
// deadlock's victim or a serialization failure, is made again, at most
// half a second
// apart, while the lease lasts as it stood when the commit failed; a
// commit applied whose reply was lost counts as committed. Steps must be
// idempotent. For effects outside this database (an HTTP call, a payment),
// derive a key from the instance id and step with idem.Minter and run the
// effect through idem.Do, so that a repeated step replays the recorded
// result instead of repeating the effect.
//
// A step that returns an error or panics (a *PanicError) goes to the FSM's
// ErrorHandler, which may return any outcome; without one, the default
// handling retries with DefaultBackoff (capped exponential) until
// FSMConfig.MaxAttempts and then stops the instance with the error's text.
// The failed step's changes to the state are discarded.
//
// Define an FSM with NewFSM, list it in Config.FSMs of the engines that
// run it, and insert instances with Client.Insert(ctx, fsm.With(state),
// opts). NewFSM and NewClient reject an invalid definition or configuration
// with a *ConfigError naming the field (errors.Is(err, ErrInvalidConfig)).
// A step reads the payload of the signal that woke it from Step.Awaited,
// as JSON (json.Unmarshal of Signal.Payload).
//
// # Versions
//
// FSMConfig.Version is stored with each instance at insert (fsm_version)
// and an instance runs on the version it was inserted with until it ends:
// the engine dispatches each step on (name, version), never on the name
// alone. To change an FSM's steps, register the new version beside the old
// one (Config.FSMs holding "order" v1 and v2) and insert new instances with
// the new one; remove the old one once no live instance uses it. An engine
// that lacks a picked row's version runs nothing of it: the row is retried
// with the default backoff and ErrUnknownFSM on the row (Instance.Error),
// its state unchanged, so that an engine of a rolling deploy that has the
// version can take it; after DefaultMaxAttempts it fails, and Client.Retry
// can revive it once an engine has the version.
//
// # Bad input
//
// Input the engine cannot use ends in an error, never in a row stuck
// executing or a queue that stops serving the others. Config.MaxPayload
// (default 1 MiB) bounds every JSON document the client writes: Insert,
// InsertAll and Signal reject a larger state or signal payload with a
// *PayloadTooLargeError (errors.Is(err, ErrPayloadTooLarge)) before writing
// anything, and a step whose new state or Done result is larger fails with
// one, handled like any step error; so does one whose new state or result
// does not encode as JSON (a NaN, a MarshalJSON that fails or panics), its
// changes discarded. Numbers count as PostgreSQL prints
// them back, every digit spelled out (1e131071 is 131072 bytes). A step whose outcome names an unknown
// step, or a row naming one, fails with ErrUnknownStep. A state that does
// not decode as S is a step error too: the default handling retries it,
// with the error on the row (Instance.Error), and then fails the instance,
// never overwriting the state so that it can be repaired. Values
// PostgreSQL cannot store (text that is not valid UTF-8 or holds a NUL, a
// string with a NUL in JSON, a number or a time beyond its types' range)
// are rejected the same way: the client's calls fail with ErrUnstorable
// before writing anything, and a step whose state, result, Await names or
// children hold one fails with it. Error texts and Stop
// reasons are recorded with such characters replaced by U+FFFD.
//
// # Crashes
//
// An engine that dies mid-step (a crash, SIGKILL, a lost network) commits
// nothing for the steps it was running; its leases stop being extended,
// and once they expire (Config.LeaseTTL) the reaper of any engine returns
// the rows to runnable with the attempt increased, and the steps run again.
// Should the old engine come back and finish such a step, its commit is
// fenced off (StepStopEvent.Fenced): each outcome is committed once.
// An engine cut off from the database (a network partition) does not run
// its steps past their leases meanwhile: each heartbeat is bounded by the
// moment a lease may lapse, Config.LeaseTTL after the last extension that
// succeeded was sent, on the engine's monotonic clock, and by then the
// step's context is cancelled with cause ErrLeaseLost, whether the
// heartbeats failed or hung; a claimed step whose lease lapsed before it
// started does not start. So it is too for a row that a caller's
// transaction (SignalTx, CancelTx) keeps locked past the end of its lease:
// the heartbeat skips the row, rather than wait for the lock, and does not
// extend its lease, so the step's context is cancelled when the lease may
// lapse, before the reaper of any engine may take the row once the lock is
// released; a lock released sooner costs the step nothing. A step that
// fails so cancelled is not charged with the failure: its error handling
// is not called, and its row, if the engine still holds it, is handed back
// with its attempt unchanged (StepStopEvent.HandedBack). Only a running
// process can be told, though: one paused past its leases (stopped,
// starved of CPU for seconds, a suspended VM) goes on with its steps when
// it resumes, until the cancellation reaches them, while the reaper has
// given their rows to other engines; their commits are fenced off, but
// their effects outside the database are not, which is why steps must be
// idempotent. Cancelling Start's context is a hard stop, not a crash: the engine keeps
// its leases until its running steps return, and commits their outcomes;
// a step that fails once its context is so cancelled has its row handed
// back, runnable with its attempt unchanged, rather than spending an
// attempt (at the last one, failing the instance) on the stop.
//
// A step that hangs is bounded by FSMConfig.StepTimeout: its context is
// cancelled when the timeout passes, and its lease is no longer extended
// from then on, so a step that ignores its context loses its row to the
// reaper like a dead engine's step. An instance whose lease expires
// Config.MaxReaps times in a row (25 by default), with no outcome committed
// in between, is failed with ErrReapedTooOften instead of running again:
// a step that kills its engine, or hangs, every time cannot loop forever.
//
// # Statuses
//
// An instance is runnable (waiting for a picker, perhaps until a future
// eligible time), executing (leased to an engine running its step),
// awaiting_signal (parked by Await), awaiting_children (parked by
// Children), done, failed or cancelled (by Client.Cancel or a step's Cancel
// outcome). The first four are live, the last three terminal: no step runs
// again (unless an operator retries a failed instance with Client.Retry)
// and no signal reaches the instance.
//
// # Cancellation
//
// Client.Cancel (or CancelTx) ends a live instance, addressed by id or key,
// as cancelled, with the reason as its Error: its inbox is deleted in the
// same transaction, on the instance's locked row. A
// step that was running then cannot commit: its commit is fenced off as
// that of a reaped lease is, and the engine's heartbeat cancels its
// context. Until that step returns (or its lease expires: it is no longer
// extended) the row keeps its lease and its concurrency slot. Cancelling
// an ended instance by id fails with ErrTerminal; by
// key, with ErrNoTarget (no live instance carries the key). Cancelling an
// instance cancels its live children, and theirs, in the same transaction.
// Cancel locks the whole tree first, parents before children, level by
// level and by ascending id within a level, the order in which an ending
// child locks its parent: cancelling a grandparent while its grandchildren
// end cannot deadlock.
//
// # Child instances
//
// A step that returns Children(step, children...) inserts the children, as
// InsertAll does, in the transaction that commits its outcome, under the
// same fence, and parks its instance (the parent) in awaiting_children
// with a count of the children actually inserted: a child whose
// correlation key is occupied is dropped and not waited for, and when none
// is inserted step runs at once. Each child, when it ends (done, failed or
// cancelled alike), decrements its parent's count exactly once, in the
// transaction that ends it; the decrement to zero makes the parent
// runnable at step. A child's end therefore takes its parent's row lock,
// and waits while a caller's transaction holds it (SignalTx or CancelTx to
// the parent, not yet committed): the engine keeps the child's lease
// meanwhile, however long it waits, so the child is not run again, but
// the worker waits with it. Client.ChildrenOf reads the children's statuses,
// results and errors. A child retried after it failed no longer holds its
// parent. Garbage collection keeps ended children while their parent is
// live.
//
// # Schema
//
// Migrate creates, in the first schema of the pool's search_path:
//
//   - durable_instance: one row per instance (fsm, fsm_version, step,
//     state jsonb, status, queue, priority, attempt, eligible_at,
//     concurrency_key, correlation_key, correlation_scope text[], the
//     generated correlation_guard, awaiting text[], await_deadline,
//     lease_owner, lease_expires_at, claims, concurrency_slot,
//     rate_limit, rate_weight, result, error and timestamps), with
//     partial indexes for the picker (queue, priority, eligible_at of
//     runnable rows, with and without a rate limit), the reaper, await
//     deadlines, GC, correlation keys, concurrency keys and rate limits;
//   - durable_signal: the inboxes, one row per signal not yet consumed;
//   - durable_signal_dedup: the dedup keys each instance has received;
//   - durable_rate_limit_bucket: the rate-limit buckets (key, tokens,
//     updated_at);
//   - durable_migration: the migrations applied.
//
// MigrationSQL returns the same SQL for external migration tools.
//
// Upgrading a large durable_instance: a migration that adds an index
// builds it with CREATE INDEX, which blocks writes to the table while it
// runs (Migrate applies each migration in a transaction, where CREATE
// INDEX CONCURRENTLY cannot run). On a table too large for that pause,
// build the index first with CREATE INDEX CONCURRENTLY under the name and
// definition the migration gives (MigrationSQL shows them): the
// migration's CREATE INDEX IF NOT EXISTS then finds it and returns at
// once. Migration 007 adds durable_instance_key_waiting_idx so; 006
// replaces durable_instance_concurrency_idx under the same name, which
// cannot be built ahead: apply it when writes can pause for a scan of the
// table.
//
// # Correlation keys and scopes
//
// InsertOpts.CorrelationKey is an instance's business identity ("order:42"):
// Signal can address it with ByKey instead of the internal id, and the
// engine keeps it unique. InsertOpts.CorrelationScope is the set of
// statuses in which the instance occupies its key. The row's generated
// column correlation_guard equals the key while the status is in the scope
// and is NULL otherwise; a partial unique index on it makes a key occupied by
// at most one row at a time, and signal addressing resolves through it.
//
//   - The default scope is the live statuses: unique among live instances,
//     freed when the instance ends, so a new "order:42" can start once the
//     old one is done, failed or cancelled.
//   - Adding terminal statuses keeps the key reserved after the instance
//     ends in those statuses, until GC deletes the row (Config.GCRetention).
//     To never reuse a key, add all three: done, failed and cancelled. A
//     terminal status left out frees the key: with live+done+failed, an
//     instance ended by Client.Cancel or a step's Cancel outcome frees its
//     key and a new "order:42" can start.
//   - An empty scope disables uniqueness: the key is only an address, and
//     Signal by key works while exactly one live instance carries it
//     (ErrAmbiguousTarget otherwise).
//   - Any other scope must contain every live status, or Insert fails with a
//     *ScopeError (a CHECK constraint enforces the same): an instance that
//     left its scope and came back (executing → runnable) could otherwise
//     meet a newcomer holding its key and be unable to commit.
//
// An Insert whose key is occupied inserts nothing and returns a
// *DuplicateError with the occupant's id (errors.Is(err, ErrDuplicate)).
// InsertAll inserts a batch in one statement, drops duplicates (against
// existing rows and within the batch) and inserts in key order, so that
// concurrent batches with overlapping keys wait for each other instead of
// deadlocking.
//
// # Concurrency keys
//
// InsertOpts.ConcurrencyKey ("tenant:42", "account:7") limits how many
// instances carrying the key execute at once, across all engines: one by
// default. The picker skips rows whose key is at its limit, in the pick
// statement itself, so they wait runnable without holding back other rows
// of the queue, and no picker blocks on them. Config.ConcurrencyLimits sets
// other limits by key prefix: a key takes the limit of the longest prefix
// of it in the map, the empty prefix covering every key; the limit applies
// to each key, and engines sharing a database should agree on it.
//
// The database enforces the limit, not advisory locks: each row the picker
// leases takes a free slot of its key, a number below the key's limit
// (always 0 for a limit of one), stored in concurrency_slot, and a unique
// index over (concurrency_key, concurrency_slot) of executing rows makes a
// slot held by one row. Two pickers that race for a key's last slot, each
// not yet seeing the other's lease, cannot both win: the loser's statement
// fails on the index and is repeated, and then skips the key. A row keeps
// its slot until it leaves executing (the step's outcome, a release, the
// reaper), so a step that awaits a signal or retries frees its slot. A row
// cancelled while executing keeps its slot until its step has returned, or
// its lease (no longer extended) has expired: the step still runs, and the
// key's limit holds while it does.
//
// Hooks.ConcurrencyContended reports, per pick that left room unused, each
// key whose due rows wait for a slot, with their count, the key's limit and
// the races the pick lost.
//
// # Rate limits
//
// InsertOpts.RateLimit names a token bucket that every step of the
// instance draws from: "name", or "name:partition" (RateLimitKey) for a
// bucket of its own per partition, say per tenant, so that partitions are
// limited independently and none starves another. Config.RateLimits says,
// by name, how fast a bucket refills (Limit tokens per Period) and how many
// tokens it holds at most (Burst, by default Limit); a bucket starts full.
// A step costs InsertOpts.RateLimitWeight tokens (default 1; a weight above
// the burst costs the burst, so that it still runs).
//
// The picker enforces the limits when it leases rows, in the claim
// statement itself, in strict order: it leases a bucket's rows in pick
// order (priority, then eligible time) while the bucket holds their cost,
// so a heavy row is never overtaken by lighter rows of its bucket, and it
// takes their tokens as it leases them. A row whose bucket lacks the tokens
// stays runnable and holds back nothing else: rows with no limit, and rows
// of other buckets, are picked past it. The claim reaches the rows of each
// bucket through an index by key, so a long queue of rows waiting for
// tokens costs a probe per bucket, not per row; a queue with no such rows
// is claimed from as if rate limits did not exist. When rows wait for
// tokens, the picker comes back when the tokens are due, not only at the
// next poll. Tokens are spent at the lease, so rows claimed ahead
// (QueueConfig.Prefetch) and handed back by Stop do not return theirs.
//
// The limits hold per instance, for each of its steps, as concurrency keys
// do; an outcome does not change them.
//
// Buckets are rows of durable_rate_limit_bucket, shared by every engine on
// the database: an insert that names a bucket creates it in its
// transaction, and a claim locks the buckets it draws from, refills them by
// the time elapsed since they were last drawn from (the database's clock)
// and stores what is left, so engines take a bucket's tokens one after the
// other and together keep its rate. Engines sharing a database should
// agree on Config.RateLimits. Over any window of time a bucket lets
// through at most Burst plus the window times its rate in cost. A missing
// bucket counts as full, so garbage collection deletes the buckets that
// have refilled and sat idle for Config.GCInterval (and those of names no
// limit configures once idle for Config.GCRetention): the table holds the
// buckets in use, not every partition ever named. Client.RateLimitStats
// (idem durable buckets) shows each bucket's tokens and waiting rows.
//
// A row whose limit name is not in Config.RateLimits is not picked: rather
// than run it unlimited, the engine leaves it runnable (an engine
// configured with the name will pick it) and reports it to
// Hooks.RateLimitUnknown, one event per key, at most once per pick and per
// Config.PollInterval of the queue, so that the stall is never silent.
// Hooks.RateLimitThrottled reports, per pick, each bucket that left due
// rows waiting for tokens, with how many the pick wanted and how many it
// granted.
//
// # Signals
//
// Signal stores a named signal with a JSON payload in the target's durable
// inbox. It wakes the instance only if it is parked awaiting that name;
// other signals wait for an Await that names them. A signal is never lost
// between a step deciding to await and the park: both take the instance's
// row lock, and the park, once it holds the lock, looks for a matching
// signal with a fresh snapshot, waking at once if one is there.
//
// The woken step sees the awaited signals (Step.Awaited) and the whole inbox
// (Step.Pending). Progress (Next, Await or Children) consumes, by id,
// exactly the awaited signals the step saw; a same-name signal that arrived
// while it ran stays for the next Await. Retry consumes nothing. Done, Stop
// and Cancel delete the inbox, and signals to a terminal instance, to an
// unknown id or to a key no
// live instance occupies fail with ErrNoTarget: a signal is never held for
// an instance that does not exist yet. A non-empty dedup key makes delivery
// idempotent per instance for the row's lifetime, even after the signal was
// consumed.
//
// # Retry
//
// Client.Retry makes a failed instance runnable again at the step it failed
// in, with the attempt reset to 1, at once or at RetryOpts.At: for operators,
// once the cause is fixed. It addresses the instance by id, or by a key that
// exactly one failed instance carries. Only failed instances are retried
// (ErrNotFailed otherwise): a cancellation is a decision, not undone by Retry.
// The instance must take its correlation key back; when another instance
// occupies it, Retry changes nothing and returns a *DuplicateError with the
// occupant's id.
//
// # Insert or signal
//
// Client.InsertOrSignal delivers a signal to the live instance occupying a
// correlation key or, when none does, inserts one and delivers the signal to
// it, in one transaction: the pattern of a process that the first of its
// events starts. Concurrent calls with one key make one instance, and every
// call's signal reaches it once (or not at all for a repeated dedup key). It
// needs a key with uniqueness (a non-empty scope); a key kept by an ended
// instance is a *DuplicateError.
//
// # The engine
//
// Client.Start runs, for each queue of Config.Queues, one picker and
// Concurrency workers. A picker claims rows of its queue only (queue = $1)
// with FOR UPDATE SKIP LOCKED at READ COMMITTED, in priority order (lower
// first) then eligible time, and leases them to the engine (Config.ID) for
// Config.LeaseTTL. A heartbeat extends the leases of the rows it holds; a
// reaper on every engine returns rows whose lease expired to runnable, with
// the attempt increased. Every commit of an outcome is fenced by lease
// owner, attempt and claim count, so a worker whose lease was reaped
// commits nothing. Pickers poll every Config.PollInterval; inserts,
// signals, retries, reaps, await timeouts and the rows a stopping engine
// hands back also send a NOTIFY that wakes the pickers of the queue on
// every engine at once, a hint only. A row scheduled for later (InsertOpts
// ScheduleIn, EligibleAt, ScheduleAt; a Retry outcome with a delay, the
// default backoff; RetryOpts.At) starts when it becomes eligible, not at
// the next poll, once the picker knows of it: from a claim that found
// fewer rows than it had room for, which learns when the earliest row not
// yet eligible becomes so; at once when this engine's client made it; and
// at once when a client in another process made it with Insert,
// InsertAll, InsertOrSignal or Retry (or their Tx forms): for a row not
// yet eligible these send, instead of the wake-up hint, a due hint on the
// "durable_due" channel, saying how long until the row is eligible as the
// database's clock sees it when the hint is sent, and the listener moves
// the picker's timer to then. A hint sent in a transaction reaches the
// engines when it commits, so a row inserted by a transaction that
// commits later than its insert is learnt that much late. A row the
// engines do not hear of so (with Config.PollOnly, a hint lost while the
// listener reconnects, a client of a version that sends no due hints, a
// Retry outcome another engine commits, whose own picker knows it) is
// learnt at the picker's next claim, its next poll at the latest: it
// starts on time if that comes before it is eligible, else up to one
// PollInterval late.
// A timer wakes parked rows whose await deadline passed (AwaitTimeout):
// at the engine's start, when the earliest deadline it knows of passes,
// and every PollInterval at the latest. It learns that deadline from its
// own look for the rows past theirs, and at once from the Await outcomes
// its engine commits, so that the engine that parks a row fires its
// deadline on time. Other engines learn it at their next look (no hint
// tells them: each would run the look at each deadline), which matters
// when that engine stops first: the deadline then fires at the next look
// of another engine, up to one PollInterval late. A collector
// deletes done, failed and cancelled rows older than Config.GCRetention, in
// batches (a row cancelled while its step ran, once that step has returned
// or its lease has expired).
// Any number of engines may share a database; none is a leader.
//
// Client.Stop stops gracefully: pickers stop, claimed rows that have not
// started are handed back at once, running steps finish and commit. If
// Stop's context ends first, the steps' contexts are cancelled.
// Client.Stopped reports the end. Hooks receive telemetry events named as
// in the GenDurable design.
//
// The pool must allow, per engine, one connection per queue and per
// worker, one for LISTEN and a few for the background work. The engine's
// statements need READ COMMITTED (PostgreSQL's default); times are the
// database server's now().
//
// # Errors
//
// The errors a caller branches on are sentinels, tested with errors.Is;
// those that carry data are typed, read with errors.As, and match a
// sentinel too:
//
//   - NewFSM, NewClient: *ConfigError naming the field (ErrInvalidConfig).
//   - Insert and its relatives: *DuplicateError with the occupant's id
//     (ErrDuplicate), *PayloadTooLargeError (ErrPayloadTooLarge),
//     ErrUnstorable, *ScopeError for a correlation scope that lacks a live
//     status.
//   - Signal, Lookup: ErrNoTarget (no live instance: ended, unknown, or a
//     key nobody occupies), ErrAmbiguousTarget; Signal also the payload
//     errors of Insert.
//   - Cancel: ErrNoTarget, ErrAmbiguousTarget, ErrTerminal (by id, already
//     ended).
//   - Retry: ErrNotFailed, ErrNoTarget, ErrAmbiguousTarget, *DuplicateError.
//   - Get, Wait: ErrNotFound; Wait also its context's error, itself.
//   - Stop: ErrStopInStep, or Stop's context's error.
//
// A step's error handling (FSMConfig.OnError) is handed the step's own
// error, or a *PanicError, an error matching ErrStepTimeout (a
// *StepTimeoutError), ErrUnknownStep, ErrUnknownFSM, ErrPayloadTooLarge or
// ErrUnstorable. A running step's context is cancelled with the cause
// (context.Cause) ErrLeaseLost when its lease is lost, and
// ErrEngineStopping when its engine stops hard. An instance failed
// for being reaped too often has an Instance.Error that begins with
// ErrReapedTooOften's text. Other errors come from the database, the pool
// (pgx) or a cancelled context, and match none of these.
//
// # Testing
//
// Test FSMs against a real PostgreSQL, as this package's own tests do. Give
// each test a schema of its own: create it, and put it first in the pool's
// search_path (the search_path parameter of the connection string), so that
// Migrate creates the tables there and nothing is shared with other tests.
// A short Config.PollInterval (tens of milliseconds) keeps a test from
// waiting on a poll for what a NOTIFY missed; stop the client in the test's
// cleanup. Client.Wait, with a deadline, returns an instance once it has
// ended: at once when a Client on the same pool committed the end (its
// engine's step or reaper, or Client.Cancel), and up to a second late
// when another process or pool did, since it learns of those ends by
// polling. To learn of the steps' ends as they happen, have Hooks.StepStop
// send on a buffered channel the events whose Kind ends the instance
// (KindDone, KindStop, KindCancel); hooks must return quickly. A step's effects are tested by signalling the instance
// (Client.Signal) and reading its state and result back with Client.Get.
package durable
