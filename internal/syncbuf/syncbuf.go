// Package syncbuf is a byte buffer safe for concurrent use, for tests that
// read a log or a process's output while it is still being written.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it; String may be called while
// writes go on. The zero Buffer is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
