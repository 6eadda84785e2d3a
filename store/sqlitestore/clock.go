package sqlitestore

import "time"

// Timestamps are stored as Unix microseconds, the precision of the columns;
// durations are rounded up to whole microseconds so that a positive lease
// never rounds down to an expired one.

// now reads the configured clock, in Unix microseconds.
func (s *Store) now() int64 { return s.cfg.Now().UnixMicro() }

// micros returns d in whole microseconds, rounded up.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// timeOf converts a stored timestamp back to a time.Time, in UTC.
func timeOf(us int64) time.Time { return time.UnixMicro(us).UTC() }
