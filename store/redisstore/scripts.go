package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below make every state transition of a record atomic. Each
// touches exactly one key, KEYS[1], the record's hash, so each works
// unchanged on Redis Cluster. Times are Unix milliseconds passed in by the
// store from its own clock (Config.Now); the scripts never read the server's
// clock. A record whose stored exp is at or before the caller's now counts
// as absent, whether or not Redis has evicted it yet.
//
// Each script is run with go-redis's Script.Run: EVALSHA first, EVAL when
// the server answers NOSCRIPT (after a restart or a SCRIPT FLUSH).
//
// The scripts are safe to repeat: go-redis resends a command whose reply
// was lost on the network, so a script may run twice for one call. Begin
// takes the token from the caller and answers a repeat of the same call
// (the same token) with the same Fresh lease; a Commit or FailPermanent
// that already recorded the same value under the same lease succeeds again.

// Outcome codes of beginScript, the first element of its reply.
const (
	codeFresh       = 1 // {1, fence, lease_expires_at, taken_over}
	codePriorResult = 2 // {2, result}
	codePriorError  = 3 // {3, stored error as JSON}
	codeMismatch    = 4 // {4, recorded fingerprint, recorded request}
	codeInFlight    = 5 // {5, lease_expires_at}
)

// beginScript is Begin.
//
//	ARGV: now, fingerprint, request, token, expires_at, lease_expires_at,
//	      retention (ms, for PEXPIRE)
//
// It answers as idem.Decide does for a live record, and otherwise (no
// record, an expired one, or a takeover of a lapsed lease) writes a new
// in_progress record with fence+1: the fence keeps counting while the old
// hash is still there.
var beginScript = redis.NewScript(`
local key = KEYS[1]
local now = tonumber(ARGV[1])
local r = redis.call('HMGET', key, 'st', 'fp', 'exp', 'lease', 'fence', 'tok', 'tko')
local fence = 0
local takeover = 0
if r[1] then
	fence = tonumber(r[5]) or 0
	if now < (tonumber(r[3]) or 0) then
		if r[6] == ARGV[4] and r[1] == 'in_progress' then
			return {1, r[5], r[4], r[7] or '0'}
		end
		if r[2] ~= ARGV[2] then
			return {4, r[2], redis.call('HGET', key, 'req')}
		end
		if r[1] == 'committed' then
			return {2, redis.call('HGET', key, 'res')}
		end
		if r[1] == 'failed_permanent' then
			return {3, redis.call('HGET', key, 'err')}
		end
		if now < (tonumber(r[4]) or 0) then
			return {5, r[4]}
		end
		takeover = 1
	end
	redis.call('DEL', key)
end
fence = fence + 1
if takeover == 1 then
	redis.call('HSET', key,
		'st', 'in_progress', 'fp', ARGV[2], 'req', ARGV[3], 'tok', ARGV[4],
		'fence', fence, 'created', ARGV[1], 'exp', ARGV[5], 'lease', ARGV[6],
		'tko', 1)
else
	redis.call('HSET', key,
		'st', 'in_progress', 'fp', ARGV[2], 'req', ARGV[3], 'tok', ARGV[4],
		'fence', fence, 'created', ARGV[1], 'exp', ARGV[5], 'lease', ARGV[6])
end
redis.call('PEXPIRE', key, ARGV[7])
return {1, fence, ARGV[6], takeover}
`)

// ownerCheck begins every script that needs the current lease. It leaves
// the record's status in st, or returns 0 (stale) when the record is
// missing, expired, or held under another token or fence.
//
//	ARGV: now, token, fence, ...
const ownerCheck = `
local key = KEYS[1]
local r = redis.call('HMGET', key, 'st', 'tok', 'fence', 'exp')
if not r[1] or tonumber(ARGV[1]) >= (tonumber(r[4]) or 0)
	or r[2] ~= ARGV[2] or tonumber(r[3]) ~= tonumber(ARGV[3]) then
	return 0
end
local st = r[1]
`

// commitScript is Commit. ARGV: now, token, fence, result. Reply 1 when
// committed, 0 when the lease is stale.
var commitScript = redis.NewScript(ownerCheck + `
if st ~= 'in_progress' then
	if st == 'committed' and redis.call('HGET', key, 'res') == ARGV[4] then
		return 1
	end
	return 0
end
redis.call('HSET', key, 'st', 'committed', 'res', ARGV[4])
return 1
`)

// failPermanentScript is FailPermanent. ARGV: now, token, fence, error
// (JSON). Reply 1 when recorded, 0 when the lease is stale.
var failPermanentScript = redis.NewScript(ownerCheck + `
if st ~= 'in_progress' then
	if st == 'failed_permanent' and redis.call('HGET', key, 'err') == ARGV[4] then
		return 1
	end
	return 0
end
redis.call('HSET', key, 'st', 'failed_permanent', 'err', ARGV[4])
return 1
`)

// failTransientScript is FailTransient: it deletes the record. ARGV: now,
// token, fence. Reply 1 when deleted, 0 when the lease is stale.
var failTransientScript = redis.NewScript(ownerCheck + `
if st ~= 'in_progress' then
	return 0
end
redis.call('DEL', key)
return 1
`)

// heartbeatScript is Heartbeat. ARGV: now, token, fence, new
// lease_expires_at, the lease's rest (ms, for PEXPIRE). A lease that ends
// after the record's exp moves exp (and the key's TTL) to its end, as the
// record lives at least as long as its lease. Reply 1 when extended, 0
// when the lease is stale.
var heartbeatScript = redis.NewScript(ownerCheck + `
if st ~= 'in_progress' then
	return 0
end
redis.call('HSET', key, 'lease', ARGV[4])
if tonumber(ARGV[4]) > (tonumber(r[4]) or 0) then
	redis.call('HSET', key, 'exp', ARGV[4])
	redis.call('PEXPIRE', key, ARGV[5])
end
return 1
`)

// purgeScript is one deletion of PurgeExpired: it deletes the record if its
// stored exp is at or before asOf, and leaves alone any key that is not a
// record hash. ARGV: asOf. Reply 1 when deleted, else 0.
var purgeScript = redis.NewScript(`
local key = KEYS[1]
if redis.call('TYPE', key).ok ~= 'hash' then
	return 0
end
local exp = tonumber(redis.call('HGET', key, 'exp'))
if exp and exp <= tonumber(ARGV[1]) then
	redis.call('DEL', key)
	return 1
end
return 0
`)
