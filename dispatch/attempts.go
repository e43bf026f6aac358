package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// chainEnd is an attempt chain's end decided by the loop (expire) or a
// report (complete), for the logs and metrics once written.
type chainEnd struct {
	item    int
	attempt int    // the attempt that ended, 0 if none (a pending item killed)
	reason  string // why, when the owner decided it
}

// runUpdate is a rewrite of an active run the partition decided: the
// run as it is to be written, when its own chain is retried (notBefore),
// when its retried items are (items), and the items its decision ended
// while running (cancelled: their workers are told at their next
// heartbeat).
type runUpdate struct {
	ar        *activeRun
	next      api.Run
	notBefore time.Time
	items     map[int]time.Time
	cancelled []int
	ended     []chainEnd
	// reported are the attempts whose results the update records, as
	// their workers reported them: their slots of limit keys are given
	// back with the write.
	reported []chainAttempt
}

// expire ends attempts whose lease ran out, that ran past their timeout,
// or whose worker's registration ended (workerLostLocked), and the items
// of broadcast runs whose worker's registration ended (expireItemsLocked),
// scheduling retries or marking runs and items dead. The caller holds wmu.
func (pt *partition) expire(ctx context.Context, now time.Time) {
	var lost []runUpdate
	pt.mu.Lock()
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			continue
		}
		j := e.spec.job()
		if len(ar.run.Items) > 0 {
			if u, ok := pt.expireItemsLocked(&j, ar, now); ok {
				lost = append(lost, u)
			}
			continue
		}
		expired, reason := LeaseExpired(&j, ar.run, ar.leaseUntil, now, pt.d.cfg.RunLease)
		if !expired {
			c, _ := ar.chain(noItem)
			expired, reason = pt.workerLostLocked(ar, c)
		}
		if !expired {
			continue
		}
		r, notBefore := FinishAttempt(&j, ar.run, Outcome{Error: reason}, now, jitter())
		lost = append(lost, runUpdate{ar: ar, next: r, notBefore: notBefore, ended: []chainEnd{{item: noItem, attempt: len(r.Attempts), reason: reason}}})
	}
	pt.mu.Unlock()
	for _, u := range lost {
		r, err := pt.writeUpdate(ctx, u, now)
		if err != nil {
			continue
		}
		for _, end := range u.ended {
			status := r.Status
			if end.item != noItem {
				status = r.Items[end.item].Status
			}
			if end.attempt > 0 {
				pt.d.cfg.Metrics.attemptLost()
				pt.d.cfg.Metrics.finishedRun(string(status))
			}
			pt.lg.Warn("attempt lost", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), itemField(end.item),
				zap.Int("attempt", end.attempt), zap.String("reason", end.reason), zap.String("status", string(status)),
				zap.String("run_status", string(r.Status)))
		}
	}
}

// writeUpdate writes u (writeRun) and applies what memory keeps beside
// the document (updateApplied). The caller holds wmu and not mu.
func (pt *partition) writeUpdate(ctx context.Context, u runUpdate, now time.Time) (api.Run, error) {
	prev := u.ar.run
	r, err := pt.writeRunAlso(ctx, u.ar, u.next, u.notBefore, pt.releaseOps(u)...)
	if err != nil {
		return r, err
	}
	pt.updateApplied(u, prev, r, now)
	return r, nil
}

// updateApplied applies what memory keeps beside the document of u,
// written over prev as r: the retried items' times and the cancelled
// attempts. The caller holds wmu and not mu.
func (pt *partition) updateApplied(u runUpdate, prev, r api.Run, now time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if !r.Status.Final() {
		for i, t := range u.items {
			u.ar.itemRT(i).notBefore = t
		}
	}
	for _, i := range u.cancelled {
		if c, ok := chainOf(prev, i, nil); ok {
			if a, ok := c.current(); ok {
				pt.cancelLocked(r, i, a, now)
			}
		}
	}
}

// sizeOf returns the bytes of ar's stored document as last written.
func (pt *partition) sizeOf(ar *activeRun) int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return ar.size
}

// itemField is the log field of an item's index; none for a run's own
// chain.
func itemField(item int) zap.Field {
	if item == noItem {
		return zap.Skip()
	}
	return zap.Int("item", item)
}

// withoutOutputs returns r without its attempts' outputs and errors, its
// items' included.
func withoutOutputs(r api.Run) api.Run {
	strip := func(as []api.Attempt) []api.Attempt {
		as = slices.Clone(as)
		for i := range as {
			a := &as[i]
			a.DroppedBytes += len(a.Output) + len(a.Error)
			a.Output, a.Error = "", ""
		}
		return as
	}
	r.Attempts = strip(r.Attempts)
	r.Items = slices.Clone(r.Items)
	for i := range r.Items {
		r.Items[i].Attempts = strip(r.Items[i].Attempts)
	}
	return r
}

// currentLocked returns the active run whose chain item's current
// attempt is (attempt, worker), taken by credential, with that chain;
// ErrForbidden if the attempt is current but was taken by another
// credential (whatever worker ID the report names), else ErrStaleAttempt.
func (pt *partition) currentLocked(runID string, item *int, attempt int, worker, credential string) (*activeRun, chain, error) {
	k := keyOf(runID, item)
	ar := pt.active[runID]
	var c chain
	ok := false
	if ar != nil {
		c, ok = ar.chain(k.item)
	}
	a, running := c.current()
	if ok && running && len(c.attempts) == attempt && a.Credential != credential {
		pt.d.cfg.Metrics.forbiddenReport()
		pt.lg.Warn("report from another credential refused", zap.String("run_id", runID), itemField(k.item), zap.Int("attempt", attempt),
			zap.String("credential", credential), zap.String("worker", worker))
		return nil, chain{}, fmt.Errorf("%w: run %s attempt %d", ErrForbidden, runID, attempt)
	}
	if !ok || !c.holds(attempt, worker) {
		pt.d.cfg.Metrics.staleReport()
		return nil, chain{}, fmt.Errorf("%w: run %s%s attempt %d by %s", ErrStaleAttempt, runID, itemSuffix(k.item), attempt, worker)
	}
	return ar, c, nil
}

// itemSuffix names an item in messages: " item 3", "" for a run's own
// chain.
func itemSuffix(item int) string {
	if item == noItem {
		return ""
	}
	return fmt.Sprintf(" item %d", item)
}

func (pt *partition) notOwned() error {
	owner, addr := pt.d.cfg.Lookup(pt.p)
	if owner == pt.own.Member {
		owner, addr = "", ""
	}
	return &NotOwnerError{Partition: pt.p, Owner: owner, OwnerAddr: addr}
}

// heartbeat extends a running attempt's lease. It is a reader: it takes
// only mu, so it answers while a write of the partition waits for etcd.
func (pt *partition) heartbeat(req HeartbeatRequest) (HeartbeatResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return HeartbeatResponse{}, pt.notOwned()
	}
	if _, ok := pt.cancelledLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential); ok {
		return HeartbeatResponse{RunLease: api.Duration(pt.d.cfg.RunLease), Cancel: true}, nil
	}
	_, c, err := pt.currentLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	c.rt.leaseUntil = pt.now().Add(pt.d.cfg.RunLease)
	return HeartbeatResponse{RunLease: api.Duration(pt.d.cfg.RunLease)}, nil
}
