package sqlitestore

import (
	"math"
	"time"
)

// Timestamps are stored as Unix microseconds, the precision of the columns:
// the current time rounded down, the ends of leases and retentions rounded
// up, so that neither is ever shorter than asked for.

// now reads the configured clock, in Unix microseconds.
func (s *Store) now() int64 { return s.cfg.Now().UnixMicro() }

// after returns the time d after t in Unix microseconds, rounded up. Any
// duration up to math.MaxInt64 (292 years, a way of saying "for good") gives
// a time that far ahead; none wraps around into the past.
func after(t time.Time, d time.Duration) int64 {
	end := t.Add(d)
	us := end.UnixMicro()
	if end.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

// micros returns t in Unix microseconds, moved to the int64 range's end
// when it lies beyond (some 292,000 years from 1970), where UnixMicro would
// wrap around to another time: no stored timestamp lies beyond either end,
// so the clamped time compares with every record as t does.
func micros(t time.Time) int64 {
	switch {
	case t.After(maxMicros):
		return math.MaxInt64
	case t.Before(minMicros):
		return math.MinInt64
	}
	return t.UnixMicro()
}

var (
	maxMicros = time.UnixMicro(math.MaxInt64)
	minMicros = time.UnixMicro(math.MinInt64)
)

// timeOf converts a stored timestamp back to a time.Time, in UTC.
func timeOf(us int64) time.Time { return time.UnixMicro(us).UTC() }
