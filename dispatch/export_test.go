package dispatch

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
)

// WriterBusy reports whether partition p's writer lock is held here (a
// write of the partition is in progress): for tests that must know a
// write is waiting for etcd.
func (d *Dispatcher) WriterBusy(p int) bool {
	pt := d.partitionOf(p)
	if pt == nil {
		return false
	}
	if pt.wmu.TryLock() {
		pt.wmu.Unlock()
		return false
	}
	return true
}

// CommitAbandoned makes partition p write as its work does once that
// work's context has ended (the partition released while a write was
// due), and returns the write's error.
func (d *Dispatcher) CommitAbandoned(p int) error {
	d.mu.Lock()
	pt := d.parts[p]
	d.mu.Unlock()
	if pt == nil {
		return errors.New("partition not owned here")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	_, err := pt.commit(ctx, nil)
	return err
}

// SetLoadPages makes a partition's load read n keys per request (specs,
// states, queue entries and runs), and returns what restores the
// defaults. Tests that call it must not run in parallel.
func SetLoadPages(n int64) (restore func()) {
	keys, runs := loadPage, loadRunsPage
	loadPage, loadRunsPage = n, n
	return func() { loadPage, loadRunsPage = keys, runs }
}

// JobPaused reports whether job id's owner here has taken in its spec
// as paused (false if no partition here knows the job).
func (d *Dispatcher) JobPaused(id string) bool {
	pt, err := d.partitionFor(id)
	if err != nil {
		return false
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	e := pt.jobs[id]
	return e != nil && e.spec.Paused
}

// QueueUnsureTakeBack records, for partition p's run runID, what an
// attempt's write of unknown outcome leaves behind (assign's error path):
// an unsure take-back of attempt by worker, without waking the loop.
func (d *Dispatcher) QueueUnsureTakeBack(p int, runID, worker string, attempt int) {
	d.queueTakeBack(p, runID, worker, attempt, true)
}

// QueueStaleTakeBack records, for partition p's run runID, a take-back
// of attempt by worker that its loop has not written yet (its write
// failed, or the loop has not run since), without waking the loop.
func (d *Dispatcher) QueueStaleTakeBack(p int, runID, worker string, attempt int) {
	d.queueTakeBack(p, runID, worker, attempt, false)
}

func (d *Dispatcher) queueTakeBack(p int, runID, worker string, attempt int, unsure bool) {
	d.mu.Lock()
	pt := d.parts[p]
	d.mu.Unlock()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.takeBacks[chainKey{run: runID, item: noItem}] = undelivered{attempt: attempt, worker: worker, unsure: unsure}
}

// ReportsWaiting returns how many results of partition p wait for
// its writer lock.
func (d *Dispatcher) ReportsWaiting(p int) int {
	return d.queued(p, func(pt *partition) int { return len(pt.reports) })
}

// Polls returns the polls in progress at this member: for each, the
// worker, its labels (as placement knows them; nil without a
// registration) and its free slots.
func (d *Dispatcher) Polls() []PollInfo {
	d.pollsMu.Lock()
	defer d.pollsMu.Unlock()
	out := make([]PollInfo, 0, len(d.polls))
	for p := range d.polls {
		id := p.id.Load()
		out = append(out, PollInfo{Worker: p.req.Worker, Labels: maps.Clone(id.labels), Registered: id.known, Free: int(p.free.Load())})
	}
	return out
}

// PollInfo describes a poll in progress (Dispatcher.Polls).
type PollInfo struct {
	Worker     string
	Labels     map[string]string
	Registered bool
	Free       int
}

// HoldWriter takes partition p's writer lock, as a long write of the
// partition does, until release is called (once; at the latest when t
// ends). It fails t if p is not loaded here.
func (d *Dispatcher) HoldWriter(t testing.TB, p int) (release func()) {
	t.Helper()
	pt := d.partitionOf(p)
	if pt == nil {
		t.Fatalf("partition %d is not loaded here", p)
	}
	pt.wmu.Lock()
	release = sync.OnceFunc(pt.wmu.Unlock)
	t.Cleanup(release)
	return release
}

// partitionOf returns partition p, nil if it is not loaded here.
func (d *Dispatcher) partitionOf(p int) *partition {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.parts[p]
}

// queued returns the length of the queue of partition p that queue
// returns, 0 if p is not loaded here.
func (d *Dispatcher) queued(p int, queue func(pt *partition) int) int {
	pt := d.partitionOf(p)
	if pt == nil {
		return 0
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return queue(pt)
}

// VisitsWaiting returns how many polls wait to be handed runs of
// partition p (assign's queue of visits).
func (d *Dispatcher) VisitsWaiting(p int) int {
	return d.queued(p, func(pt *partition) int { return len(pt.visits) })
}

// RaceEnabled: the race detector is on.
const RaceEnabled = raceEnabled

// HoldsRun reports whether the owner here of job id's partition holds run
// runID among the runs it hands out (its active runs), or whether no
// partition here holds the job (nothing to wait for). A run is in etcd
// before its owner adds it to those, when the write's answer arrives:
// tests that poll without waiting look here first.
func (d *Dispatcher) HoldsRun(id, runID string) bool {
	pt, err := d.partitionFor(id)
	if err != nil {
		return true
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.active[runID] != nil
}

// PollsInProgress is the number of polls waiting or looking here.
func (d *Dispatcher) PollsInProgress() int {
	d.pollsMu.Lock()
	defer d.pollsMu.Unlock()
	return len(d.polls)
}

// EndedMarks is the number of workers whose ended polls are held here.
func (d *Dispatcher) EndedMarks() int {
	d.pollsMu.Lock()
	defer d.pollsMu.Unlock()
	return len(d.ended)
}
