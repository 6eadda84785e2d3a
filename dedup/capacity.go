package dedup

import "fmt"

// DefaultCapacity is how many keys a zero Window remembers, and the window
// of a zero Filter: the design's default of 100,000 keys, which take about
// 3.4 MB (allocated by the first CheckAndRecord or Accept).
const DefaultCapacity = 100_000

// CapacityError is the error of NewWindowChecked and NewFilterChecked, and
// the value NewWindow and NewFilter panic with, for a capacity out of range:
// below 1 or above 1<<28 - 1 (268,435,455) on a 64-bit platform, above
// 89,478,485 on a 32-bit one (whose address space could not hold more).
type CapacityError struct {
	// Capacity is the capacity that was asked for.
	Capacity int
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("dedup: window capacity must be between 1 and %d, got %d", maxCapacity, e.Capacity)
}

// checkCapacity returns a *CapacityError if no Window can have capacity.
func checkCapacity(capacity int) error {
	if capacity < 1 || capacity > maxCapacity {
		return &CapacityError{Capacity: capacity}
	}
	return nil
}
