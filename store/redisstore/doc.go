// Package redisstore is the idem.Store on Redis, through go-redis v9: a
// single server, a Sentinel failover group, a Ring, or Redis Cluster. It
// works in lease mode: a Fresh reservation is visible to every process at
// once, carries a lease and a fencing token, and is taken over when its
// lease lapses. It passes the idemtest conformance suite against a single
// server and against a Redis Cluster.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	store, err := redisstore.New(client, redisstore.Config{})
//
// A Store comes only from New: the zero Store, and the nil *Store New
// returns with an error, panic when used.
//
// The store needs Redis 6.0 or later (MinRedisVersion): PurgeExpired scans
// with SCAN … TYPE, new in 6.0. New does no I/O; Store.Check asks every
// server for its version and returns a *VersionError naming the server,
// the version found and the one required when a server is older, and
// PurgeExpired does the same when a server refuses its SCAN.
//
// # Data layout
//
// Each record is one Redis string, at the key
//
//	<Prefix><namespace>:<n>:<scope>:<value>
//
// where Prefix defaults to "idem:", n is the length in bytes of the scope
// as written (0 and an empty scope for unscoped keys) and, in scope and
// value, '%', '{' and '}' are written as %25, %7B and %7D. For example
// "idem:orders:0::order-1" and "idem:api:8:caller-a:order-1". The
// encoding is injective, whatever bytes scopes and values hold, and no
// caller can choose a record's hash slot with a hash tag. The string is a
// fixed header of 46 bytes, then the parts:
//
//	magic     "IDM" and the layout's version, 1
//	status    'p' in progress, 'c' committed, 'f' failed permanently
//	takeover  1 when the reservation was a takeover, else 0
//	fence     the fencing number, counting up with each takeover
//	created   creation time
//	expires   expires_at
//	lease     the lease's expiry: meaningful only while in progress, and
//	          left in place when the record is settled
//	lengths   of the fingerprint, the token and the request payload
//	then      the request fingerprint (idem.Fingerprint.Bytes), the
//	          current owner's lease token, the request payload as given,
//	          and last the committed result as given (replayed byte for
//	          byte) or the stored error of FailPermanent as JSON
//
// with the numbers as big-endian int64 (times in Unix milliseconds) and
// the lengths as big-endian uint16, uint16 and uint32. A settle rewrites
// the status byte and appends the result or error, and a heartbeat
// rewrites the times in place, so that neither copies the payloads; a
// record takes about a quarter less memory than the same fields in a
// hash. idem inspect, or Store.Get, shows a record as its fields.
//
// A key under the prefix that holds anything else (another type, a string
// without the magic, a record of another layout version) is never
// written over: every call on it fails with idem.ErrUnavailable naming
// it, and PurgeExpired leaves it alone.
//
// Times are kept to the millisecond and come from the store's clock
// (Config.Now), never from the Redis server's: clients and server need
// not agree on the time, but the application hosts sharing a store must
// (as for every lease-based store).
//
// # Atomicity and expiry
//
// Every operation but Get and PurgeExpired's scan is one Lua script on one
// key (EVALSHA, falling back to EVAL when the server has lost its script
// cache), so each transition is atomic and the decision of Begin is the
// one idem.Decide takes. On Redis 7.0 and later, Begin's script starts
// with SET … NX, so a Begin of a new key costs the server that one
// command; on an older server the script reads the key first. Begin's
// script reads a record in parts (GETRANGE), never whole: what it copies
// into the server's Lua heap, which maxmemory does not count, is bounded.
// A Begin that finds a result, stored error or recorded request over
// 64 KiB answers with it after a GET of the record, a round trip more. A
// record whose stored expires_at has passed counts as absent in every
// script and in Get, whether or not Redis has evicted it yet. Redis evicts it by its own clock: each record's TTL is
// set to the retention (PEXPIRE) when it is created, so it lives in Redis
// as long as the retention, whatever the skew between the clocks.
// PurgeExpired deletes expired records sooner and counts them.
//
// The settle scripts check the token, the fence and the status together:
// a late owner whose reservation was taken over, settled or has expired
// gets idem.ErrStaleToken and changes nothing.
//
// go-redis resends a command whose reply was lost (Options.MaxRetries), so
// a script may run twice for one call. The scripts are written for that:
// Begin sends the new token with the script, and a repeat of the same call
// gets the same Fresh lease back instead of InFlight; a repeated Commit or
// FailPermanent with the same lease and the same value succeeds again. A
// repeated FailTransient finds the record gone and reports
// idem.ErrStaleToken.
//
// # Redis Cluster
//
// Every script touches exactly one key, so the store works unchanged on
// Redis Cluster with a *redis.ClusterClient, and records spread over all
// hash slots. PurgeExpired scans every master (ForEachMaster) and deletes
// through the cluster client, which follows slot migrations.
//
// A *redis.Ring works as well (PurgeExpired scans every shard), but a Ring
// sends the keys of a shard it deems down to the other shards, where their
// records are not: while the shard is away its keys may run again. Prefer
// Redis Cluster when records must outlive a node's failure. PurgeExpired
// cannot scan a shard the Ring deems down: it purges the others and
// returns their count with a *ShardsNotPurgedError naming the shards left
// out.
//
// # Auto-pipelining
//
// With Config.AutoPipeline the store sends its record calls through the
// client's blocking auto-pipeliner (go-redis's AutoPipeline): calls made
// at the same time from many goroutines go out in one write and come back
// in one read. Each script still runs atomically on its own. Under
// concurrency this about halves the CPU time a call costs on both sides
// (32 workers on a two-core machine: 10.7k → 15–21k Begin+Commit pairs
// per second); a lone caller sees the same latency. It works on a
// *redis.Client and a *redis.ClusterClient; go-redis has none for a
// *redis.Ring, and New reports that. PurgeExpired still scans through the
// client itself. go-redis's blocking auto-pipeliner does not watch a
// call's context, and holds the call until its batch is done, which the
// client's ReadTimeout and WriteTimeout do not bound while the server does
// not answer; so the store waits for the batch in a goroutine of its own,
// and a call whose context ends first returns then, with the context's
// error, its command still in the batch (a Begin's reservation is then
// released: see below). go-redis marks the API
// experimental, so it is off by default; idem proxy turns it on.
//
// # A caller that leaves
//
// A Begin whose context ends while its command is on its way or on the
// wire returns then, with the context's error; but the server may still
// run the command and reserve the key, under a lease its caller never
// got, and the key would answer InFlight until that lease lapsed. So the
// store reads the answer on for the caller that left and, if it is a
// Fresh reservation, releases it (FailTransient, with the token that
// Begin sent and the fence the answer gave, so that nobody else's
// reservation is touched). With auto-pipelining the answer comes with the
// batch. Through a plain client (with or without ContextTimeoutEnabled)
// the command goes on in a goroutine of its own, on a context with the
// caller's values but not its end, which ends two seconds after the
// caller's deadline (or, for a context without a deadline, two seconds
// after it ends), and the client's ReadTimeout, PoolTimeout and retries
// bound it as well. The release is given two seconds too.
//
// Before closing the client, call Store.Drain: it waits for those answers
// and releases, which closing the client would cut short. With
// auto-pipelining, closing the client flushes the batches under way, so a
// Begin whose caller left may still reserve its key during the close,
// with nothing left to release it; and go-redis's close then waits for
// the server to answer those batches (up to 30 s while it does not).
//
// What remains: when that answer does not come in time (the server
// stalls longer, the connection is lost, the client gives up sooner at
// its ReadTimeout), or the release itself fails, the store cannot know
// whether the command ran, and a reservation it made holds the key until
// its lease lapses. The same holds for a Begin that fails with
// idem.ErrUnavailable after its command was sent (the client's
// ReadTimeout passed, the connection broke) while its caller is still
// there. Releasing it blindly, from another connection, could run before
// the late command and release nothing. Keep Config.Lease (or
// BeginOpts.Lease) as short as the work allows, with Heartbeat for longer
// work, to bound that wait.
//
// # Durability
//
// A record is as durable as the Redis deployment that holds it. Redis
// without persistence loses every record on a restart, and with RDB
// snapshots only it loses the writes since the last snapshot; a lost
// reservation or result lets the same key run again. For exactly-once
// effects across restarts, run Redis with AOF (appendonly yes) and
// appendfsync everysec (at most about a second of writes lost on a crash)
// or always (none), and keep writes on the master: an asynchronous
// replica promoted by Sentinel or Cluster failover may lack the last
// writes the old master acknowledged (WAIT can narrow, not close, that
// gap). Eviction policies other than noeviction (or volatile-* with
// enough memory) may drop live records under memory pressure.
//
// # Errors
//
// A failure of Redis or of the connection to it (refused, closed client,
// pool timeout, CLUSTERDOWN, LOADING, OOM, READONLY, a script error)
// satisfies errors.Is(err, idem.ErrUnavailable), and errors.As still finds
// the go-redis error. A call whose ctx is cancelled or expires satisfies
// errors.Is(err, ctx.Err()). Such a call may or may not have reached
// Redis: retrying a settle call with the same lease is safe (see above).
// A payload over Config.MaxPayload is a *idem.PayloadTooLargeError,
// returned before anything is sent. A server whose proto-max-bulk-len is
// set below its 512 MiB default refuses a record that would grow past it:
// the Begin or settle fails with idem.ErrUnavailable and the record stays
// as it was (an owner may still settle with a smaller value). After an
// outage in which every dial of a go-redis pool failed, the pool fails
// fast until its background probe, once a second, reaches the server
// again: expect ErrUnavailable for up to a second after Redis is back.
package redisstore
