package dispatch

import (
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file has the partition's view of a run's attempt chains: a run of
// one item is one chain (the run's own status and attempts), a sharded or
// broadcast run has one per item. Expiry, hand-outs, reports and
// take-backs work on chains, so that an item is handled as a run of one
// item is.

// chainRT is what the owner keeps in memory of one attempt chain, beside
// the stored document.
type chainRT struct {
	notBefore  time.Time // pending/failed: not dispatched before
	leaseUntil time.Time // running: lost after; extended by heartbeats (under mu only)
	worker     workerReg // running: the registration its worker held (workers.go)
}

// noItem is the item index of a run's own chain (a run of one item).
const noItem = -1

// chainKey names one attempt chain: run's own (item noItem) or one of its
// items.
type chainKey struct {
	run  string
	item int
}

// keyOf returns the chain key of item (nil: the run's own chain).
func keyOf(runID string, item *int) chainKey {
	if item == nil {
		return chainKey{run: runID, item: noItem}
	}
	return chainKey{run: runID, item: *item}
}

// chain is one attempt chain of an active run as a value: its status and
// attempts, and a pointer to its memory in the active run.
type chain struct {
	item     int // noItem: the run's own
	status   api.RunStatus
	attempts []api.Attempt
	rt       *chainRT
}

// current returns the chain's running attempt, if it is running.
func (c chain) current() (api.Attempt, bool) {
	if c.status != api.RunRunning || len(c.attempts) == 0 {
		return api.Attempt{}, false
	}
	return c.attempts[len(c.attempts)-1], true
}

// holds reports whether the chain's current attempt is number attempt by
// worker.
func (c chain) holds(attempt int, worker string) bool {
	a, ok := c.current()
	return ok && len(c.attempts) == attempt && a.Worker == worker
}

// chainOf returns chain item of r with rt as its memory; ok is false if
// r has no such chain.
func chainOf(r api.Run, item int, rt *chainRT) (chain, bool) {
	if item == noItem {
		if len(r.Items) > 0 {
			return chain{}, false
		}
		return chain{item: noItem, status: r.Status, attempts: r.Attempts, rt: rt}, true
	}
	if item < 0 || item >= len(r.Items) {
		return chain{}, false
	}
	it := r.Items[item]
	return chain{item: item, status: it.Status, attempts: it.Attempts, rt: rt}, true
}

// chain returns ar's chain item.
func (ar *activeRun) chain(item int) (chain, bool) {
	if item == noItem {
		return chainOf(ar.run, noItem, &ar.chainRT)
	}
	if item < 0 || item >= len(ar.run.Items) {
		return chain{}, false
	}
	return chainOf(ar.run, item, ar.itemRT(item))
}

// chains returns ar's chains: its own, or its items', by index.
func (ar *activeRun) chains() []chain {
	if len(ar.run.Items) == 0 {
		c, _ := ar.chain(noItem)
		return []chain{c}
	}
	out := make([]chain, len(ar.run.Items))
	for i := range ar.run.Items {
		out[i], _ = ar.chain(i)
	}
	return out
}

// itemRT returns the memory of item i, growing ar.items as needed.
func (ar *activeRun) itemRT(i int) *chainRT {
	if n := len(ar.run.Items); len(ar.items) < n {
		ar.items = append(ar.items, make([]chainRT, n-len(ar.items))...)
	}
	return &ar.items[i]
}

// notBefores returns the items' retry times, by index.
func (ar *activeRun) notBefores() []time.Time {
	out := make([]time.Time, len(ar.run.Items))
	for i := range out {
		out[i] = ar.itemRT(i).notBefore
	}
	return out
}

// newActiveRun returns the memory of run taken in at now (loaded, or read
// again): dispatchable at once, and every running chain given a full run
// lease (attempts in flight keep running; their workers heartbeat here).
func newActiveRun(run api.Run, modRev int64, size int, now time.Time, lease time.Duration) *activeRun {
	ar := &activeRun{run: run, modRev: modRev, size: size}
	ar.notBefore, ar.leaseUntil = now, now.Add(lease)
	for i := range run.Items {
		rt := ar.itemRT(i)
		rt.notBefore, rt.leaseUntil = now, now.Add(lease)
	}
	return ar
}
