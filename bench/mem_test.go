package bench

import "runtime"

// runtimeMem is a snapshot of the allocator's counters.
type runtimeMem struct{ mallocs, heap uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.mallocs, m.heap = s.Mallocs, s.HeapAlloc
}
