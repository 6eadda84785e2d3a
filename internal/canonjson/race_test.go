//go:build race

package canonjson

// raceEnabled reports whether the race detector is on; sync.Pool then drops
// items on purpose, so allocation counts are not meaningful.
const raceEnabled = true
