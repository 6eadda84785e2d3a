//go:build !race

package dedup

// raceEnabled reports whether the race detector is on; under it sync.Pool
// drops pooled values at random, so pooled paths allocate.
const raceEnabled = false
