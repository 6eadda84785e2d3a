package sqlitestore

import "time"

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

// timeOf converts a stored timestamp back to a time.Time, in UTC.
func timeOf(us int64) time.Time { return time.UnixMicro(us).UTC() }
