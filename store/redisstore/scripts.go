package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts below make every state transition of a record atomic. Each
// touches exactly one key, KEYS[1], the record (see record.go), so each works
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
	codeReadRecord  = 6 // {6, token}: the answer is the record's, too large to pass through the script
)

// beginReadAhead is how much of a record beginScript reads at once, from
// its start: the header, the fingerprint and the token of every record
// the store writes, and the whole of a small record, in one GETRANGE.
const beginReadAhead = 4096

// recordHeader is the Lua that reads a record's header from v, as
// record.go lays it out, into st, tko, fence, exp, lease, nfp, ntok and
// nreq; a value that is not a record is an error reply naming the key.
const recordHeader = `
if #v < 46 or string.sub(v, 1, 4) ~= 'IDM\1' then
	return redis.error_reply('IDEMNOTRECORD ' .. key .. ' holds a value that is not a record of this store')
end
local _, st, tko, fence, _, exp, lease, nfp, ntok, nreq = struct.unpack('>c4c1Bi8i8i8i8I2I2I4', v)
`

// beginScript is Begin.
//
//	ARGV: now, fingerprint, token, the new record (fence 1, not a
//	      takeover), its lease_expires_at, its time to live (ms, for PX),
//	      "get" to read the key first even on Redis 7.0 or later (for the
//	      tests of the path of older servers), the largest part (result,
//	      stored error, recorded request) to answer with
//
// The script writes the new record with SET … NX, which answers whether
// the key was absent: a Begin of a new key is that one command. Before
// Redis 7.0 (which lacks redis.REDIS_VERSION_NUM) it reads the key first
// instead, and writes when it finds nothing. It then answers as
// idem.Decide does for a live record, and otherwise (an expired record,
// or a takeover of a lapsed lease) writes the new record with fence+1:
// the fence keeps counting while the old record is still there.
//
// It reads the record with GETRANGE, never whole: its first
// beginReadAhead bytes, then of the rest only the part it answers with,
// so that what it copies into the server's Lua heap (which maxmemory does
// not count, and which keeps garbage until Lua's collector runs) is
// bounded. A result, stored error or recorded request longer than the
// last argument is not copied at all: the script answers codeReadRecord
// with the record's token, and Begin reads the record with GET (see
// beginCall.readRecord).
var beginScript = redis.NewScript(`
local key = KEYS[1]
local now = tonumber(ARGV[1])
local v
if redis.REDIS_VERSION_NUM and ARGV[7] ~= 'get' then
	if redis.call('SET', key, ARGV[4], 'NX', 'PX', ARGV[6]) then
		return {1, 1, ARGV[5], 0}
	end
	v = redis.call('GETRANGE', key, 0, ` + strconv.Itoa(beginReadAhead-1) + `)
else
	v = redis.call('GETRANGE', key, 0, ` + strconv.Itoa(beginReadAhead-1) + `)
	if v == '' and redis.call('SET', key, ARGV[4], 'NX', 'PX', ARGV[6]) then
		return {1, 1, ARGV[5], 0}
	end
end
-- The key holds a value: v is its start, and the whole of it when shorter
-- than the read-ahead.` + recordHeader + `
local whole = #v < ` + strconv.Itoa(beginReadAhead) + `
local takeover = 0
if now < exp then
	local head = 46 + nfp + ntok -- the offset of the request
	local tail = head + nreq -- the offset of the tail
	if #v < head and not whole then
		v = redis.call('GETRANGE', key, 0, head - 1)
	end
	local tok = string.sub(v, 47 + nfp, head)
	if tok == ARGV[3] and st == 'p' then
		return {1, fence, lease, tko}
	end
	local inline = tonumber(ARGV[8])
	local fp = string.sub(v, 47, 46 + nfp)
	if fp ~= ARGV[2] then
		if nreq > inline then
			return {6, tok}
		end
		if #v >= tail or whole then
			return {4, fp, string.sub(v, head + 1, tail)}
		end
		return {4, fp, redis.call('GETRANGE', key, head, tail - 1)}
	end
	if st == 'c' or st == 'f' then
		local code = 3
		if st == 'c' then
			code = 2
		end
		if whole then
			return {code, string.sub(v, tail + 1)}
		end
		if redis.call('STRLEN', key) - tail > inline then
			return {6, tok}
		end
		return {code, redis.call('GETRANGE', key, tail, -1)}
	end
	if now < lease then
		return {5, lease}
	end
	takeover = 1
end
local rec = ARGV[4]
rec = string.sub(rec, 1, 5) .. struct.pack('>Bi8', takeover, fence + 1) .. string.sub(rec, 15)
redis.call('SET', key, rec, 'PX', ARGV[6])
return {1, fence + 1, ARGV[5], takeover}
`)

// ownerCheck begins every script that needs the current lease: it reads
// the header and the token (GETRANGE, not the payloads), and returns 0
// (stale) when the record is missing, expired, or held under another
// token or fence. It leaves the record's status in st and the offset of
// its tail in tail.
//
//	ARGV: now, token, fence, ...
const ownerCheck = `
local key = KEYS[1]
local v = redis.call('GETRANGE', key, 0, 255)
if v == '' then
	return 0
end` + recordHeader + `
if #v < 46 + nfp + ntok then
	v = redis.call('GETRANGE', key, 0, 45 + nfp + ntok)
end
if tonumber(ARGV[1]) >= exp or string.sub(v, 47 + nfp, 46 + nfp + ntok) ~= ARGV[2]
	or fence ~= tonumber(ARGV[3]) then
	return 0
end
local tail = 46 + nfp + ntok + nreq
`

// settleScript returns the script of a settle that sets the status to st
// and appends the value (ARGV[4]) as the tail. ARGV: now, token, fence,
// value. Reply 1 when recorded, 0 when the lease is stale. A repeat with
// the same lease and the same value finds it recorded and answers 1.
//
// The tail is appended before the status is set: Redis does not undo a
// script's writes when a later command fails, and APPEND can fail (the
// string would grow past the server's proto-max-bulk-len), while a
// SETRANGE of one byte inside the header cannot. A refused settle so
// leaves the record in progress, as it was, rather than settled without
// its tail.
func settleScript(st string) *redis.Script {
	return redis.NewScript(ownerCheck + `
if st ~= 'p' then
	if st == '` + st + `' and redis.call('GETRANGE', key, tail, -1) == ARGV[4] then
		return 1
	end
	return 0
end
redis.call('APPEND', key, ARGV[4])
redis.call('SETRANGE', key, 4, '` + st + `')
return 1
`)
}

// commitScript is Commit: the result is the tail.
var commitScript = settleScript("c")

// failPermanentScript is FailPermanent: the error, as JSON, is the tail.
var failPermanentScript = settleScript("f")

// failTransientScript is FailTransient: it deletes the record. ARGV: now,
// token, fence. Reply 1 when deleted, 0 when the lease is stale.
var failTransientScript = redis.NewScript(ownerCheck + `
if st ~= 'p' then
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
if st ~= 'p' then
	return 0
end
local until_ = tonumber(ARGV[4])
redis.call('SETRANGE', key, 30, struct.pack('>i8', until_))
if until_ > exp then
	redis.call('SETRANGE', key, 22, struct.pack('>i8', until_))
	redis.call('PEXPIRE', key, ARGV[5])
end
return 1
`)

// purgeScript is one deletion of PurgeExpired: it deletes the record if its
// stored exp is at or before asOf, and leaves alone any key that is not a
// record. ARGV: asOf. Reply 1 when deleted, else 0.
var purgeScript = redis.NewScript(`
local key = KEYS[1]
if redis.call('TYPE', key).ok ~= 'string' then
	return 0
end
local v = redis.call('GETRANGE', key, 0, 45)
if #v < 46 or string.sub(v, 1, 4) ~= 'IDM\1' then
	return 0
end
if struct.unpack('>i8', v, 23) <= tonumber(ARGV[1]) then
	redis.call('DEL', key)
	return 1
end
return 0
`)
