package tracker

import "time"

// Start starts the tracker: from now on its methods track keys, and a
// sweeper goroutine deletes expired keys every SweepInterval. Starting a
// started Tracker, or a nil one, does nothing. A stopped Tracker can be
// started again. Starting a zero Tracker gives it the default Config.
// The sweeper holds the Tracker: one no longer used must be stopped, or
// it and its keys stay in memory for as long as the process runs.
func (t *Tracker) Start() {
	if t == nil {
		return
	}
	t.configured()
	t.lifecycle.Lock()
	defer t.lifecycle.Unlock()
	if t.running.Load() {
		return
	}
	t.stop = make(chan struct{})
	t.done = make(chan struct{})
	go t.sweepEvery(t.interval, t.stop, t.done)
	t.running.Store(true)
}

// Stop stops the sweeper, waits for it to exit, and drops every key: like
// the design's table, which lives and dies with its owner process, a
// stopped Tracker holds nothing and fails open as one never started.
// Stopping a stopped, unstarted or nil Tracker does nothing.
func (t *Tracker) Stop() {
	if t == nil {
		return
	}
	t.lifecycle.Lock()
	defer t.lifecycle.Unlock()
	if !t.running.Load() {
		return
	}
	t.running.Store(false)
	close(t.stop)
	<-t.done
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.keys = make(map[scopedKey]entry) // a cleared map would keep its memory
		s.peak = 0
		s.mu.Unlock()
	}
}

// Close is Stop, for use as an io.Closer; it always returns nil.
func (t *Tracker) Close() error {
	t.Stop()
	return nil
}

func (t *Tracker) sweepEvery(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.sweep()
		}
	}
}

// sweep deletes every expired key, one shard at a time, so that calls on
// other shards proceed meanwhile.
func (t *Tracker) sweep() {
	now := t.clock()
	for i := range t.shards {
		t.shards[i].sweep(now)
	}
}
