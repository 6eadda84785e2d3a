package redisstore

// BeginByGet makes every Begin of s read the key first, as its script does
// on a server before Redis 7.0, instead of writing first with SET … NX.
func BeginByGet(s *Store) { s.getFirst = true }
