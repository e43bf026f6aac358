package dispatch

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file has the partition's handling of runs made of items: which
// worker may take which item, hand-outs, and the loop's expiry of
// items. The decisions are items.go's pure functions.

// pinnedToLocked reports whether item it may go to worker: it is pinned
// to none, or to worker under the registration it had at the fire. The
// caller holds mu.
func (pt *partition) pinnedToLocked(it api.Item, worker string) bool {
	if it.Worker == "" {
		return true
	}
	gone, _ := pt.pinnedGoneLocked(it)
	return it.Worker == worker && !gone
}

// startItemsLocked returns ar's run with attempts of up to room of its
// dispatchable items started by poll p's worker, and those items; none if
// the worker may take none of them. An item goes only to a worker that
// speaks items (api.FeatureItems) and may take the job's runs (poll.may:
// executor type, scope, labels), and a broadcast item only to the worker
// it is pinned to, while the registration it had at the fire lives. The
// items of a sharded run are passed over for a rival poll with more free
// slots (partition.passOver); a broadcast item, pinned, never is. The
// caller holds mu.
func (pt *partition) startItemsLocked(e *jobEntry, ar *activeRun, p *poll, rivals []*poll, left map[*poll]int, room int, now time.Time) (api.Run, []int) {
	req := p.req
	if room <= 0 || !req.HasFeature(api.FeatureItems) || !p.may(e, ar.run.JobID) {
		return api.Run{}, nil
	}
	steps := len(ar.run.Steps) > 0
	items := DispatchableItems(ar.run, ar.notBefores(), now, func(i int) bool {
		if steps {
			return p.mayStep(e, e.spec.stepOf(&ar.run, i))
		}
		return pt.pinnedToLocked(ar.run.Items[i], req.Worker)
	}, room)
	if len(items) == 0 {
		return api.Run{}, nil
	}
	if !ar.run.Broadcast && !steps && pt.passOver(p, rivals, left, len(items), e, ar, now) {
		return api.Run{}, nil
	}
	return StartItems(ar.run, items, req.Worker, req.Credential, now), items
}

// expireItemsLocked decides the end of ar's items that are lost at now:
// an attempt whose lease ran out, that ran past its timeout or whose
// worker's registration ended is finished as failed (retried, or dead
// without attempts left); a broadcast item whose worker's registration
// of the fire ended is dead, running or not. It returns the update, and
// false if no item is lost. The caller holds mu.
func (pt *partition) expireItemsLocked(j *api.Job, ar *activeRun, now time.Time) (runUpdate, bool) {
	u := runUpdate{ar: ar, next: ar.run, items: map[int]time.Time{}}
	for i := range ar.run.Items {
		if u.next.Status.Final() {
			break
		}
		it := u.next.Items[i]
		if it.Status.Final() {
			continue
		}
		c, _ := chainOf(u.next, i, ar.itemRT(i))
		attempt := 0
		if _, ok := c.current(); ok {
			attempt = len(c.attempts)
		}
		gone, reason := pt.pinnedGoneLocked(it)
		if len(u.next.Steps) > 0 && stepJobFor(j, &u.next, i) == nil {
			gone, reason = true, fmt.Sprintf("step %q is no longer in the job", it.Step)
		}
		if gone {
			var cancelled []int
			u.next, cancelled = KillItem(u.next, i, reason, now)
			u.cancelled = append(u.cancelled, cancelled...)
			u.ended = append(u.ended, chainEnd{item: i, attempt: attempt, reason: reason})
			continue
		}
		lost, reason := ItemLeaseExpired(j, u.next, i, c.rt.leaseUntil, now, pt.d.cfg.RunLease)
		if !lost {
			lost, reason = pt.workerLostLocked(ar, c)
		}
		if !lost {
			continue
		}
		var nb time.Time
		var cancelled []int
		u.next, nb, cancelled = FinishItem(j, u.next, i, Outcome{Error: reason}, now, jitter())
		u.items[i] = nb
		u.cancelled = append(u.cancelled, cancelled...)
		u.ended = append(u.ended, chainEnd{item: i, attempt: attempt, reason: reason})
	}
	return u, len(u.ended) > 0
}

// broadcastLocked gives the pending runs of broadcast job e's plan their
// items: one per live worker that may run the job at the fire
// (BroadcastItems, from the registry's copy). A run that no worker may
// take is recorded skipped, with the reason. The caller holds mu.
func (pt *partition) broadcastLocked(e *jobEntry, plan *FirePlan) {
	if pl := e.spec.Placement(); pl == nil || !pl.Broadcast {
		return
	}
	var live []LiveWorker
	synced := false
	if reg := pt.d.cfg.Workers; reg != nil {
		live, synced = reg.Live()
	}
	j := e.spec.job()
	items, reason := BroadcastItems(&j, live)
	if !synced {
		reason = "broadcast: this member has not read the worker registrations yet"
	}
	for i := range plan.Runs {
		r := &plan.Runs[i]
		if r.Status != api.RunPending || !r.Broadcast {
			continue
		}
		if len(items) == 0 {
			r.Status, r.Reason = api.RunSkipped, joinReason(r.Reason, reason)
			plan.State.Fired--
			plan.State.Skipped++
			continue
		}
		r.Items = make([]api.Item, len(items))
		for k, it := range items {
			it.Attempts = []api.Attempt{}
			r.Items[k] = it
		}
		r.Reason = joinReason(r.Reason, reason)
	}
}
