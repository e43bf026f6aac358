package dispatch

import (
	"fmt"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// LateAfter is how long a run waits for a worker before Late lists it.
const LateAfter = 5 * time.Second

// Late returns up to limit of the runs of the partitions owned here that
// are late, the most late first, and whether there were more: runs
// waiting for a worker since more than LateAfter (pending, or failed
// with their retry due), and running runs with an attempt whose
// heartbeat is overdue (its lease has less than a third of the run
// lease left; a worker heartbeats every third). Each says why: the limit
// key without room it waits for, why no live worker may take it, that
// the workers that may are busy, or that the attempt's heartbeats are
// late. Member is left empty. Safe for concurrent use.
func (d *Dispatcher) Late(limit int) (runs []api.LateRun, truncated bool) {
	parts, _ := d.snapshot()
	now := d.cfg.Clock.Now()
	lease := d.cfg.RunLease
	for _, pt := range parts {
		pt.mu.Lock()
		for _, ar := range pt.active {
			if lr, ok := pt.lateLocked(ar, now, lease); ok {
				runs = append(runs, lr)
			}
		}
		pt.mu.Unlock()
	}
	slices.SortFunc(runs, func(a, b api.LateRun) int { return a.Since.Compare(b.Since) })
	if len(runs) > limit {
		return runs[:limit], true
	}
	return runs, false
}

// lateLocked says whether ar is late at now, and why. The caller holds
// mu.
func (pt *partition) lateLocked(ar *activeRun, now time.Time, lease time.Duration) (api.LateRun, bool) {
	r := ar.run
	lr := api.LateRun{RunID: r.ID, JobID: r.JobID, Status: r.Status, ScheduledAt: r.ScheduledAt.UTC()}
	// A running attempt whose heartbeat is overdue, of the run or of an
	// item.
	for _, c := range ar.chains() {
		a, ok := c.current()
		if !ok || c.rt == nil || c.rt.leaseUntil.IsZero() {
			continue
		}
		if left := c.rt.leaseUntil.Sub(now); left < lease/3 {
			lr.Since = c.rt.leaseUntil.Add(-lease).Add(lease / 3).UTC()
			what := "its attempt"
			if c.item != noItem {
				what = fmt.Sprintf("item %d's attempt", c.item)
			}
			lr.Reason = fmt.Sprintf("%s %d on worker %s has not sent a heartbeat for %v: it is lost in %v unless one arrives, then retried",
				what, a.Attempt, a.Worker, (lease - left).Round(100*time.Millisecond), max(left, 0).Round(100*time.Millisecond))
			return lr, true
		}
	}
	waiting := len(r.Items) == 0 && Dispatchable(r, ar.notBefore, now) ||
		len(r.Items) > 0 && len(DispatchableItems(r, ar.notBefores(), now, func(int) bool { return true }, 1)) > 0
	if !waiting {
		return api.LateRun{}, false
	}
	since := r.FiredAt
	if ar.notBefore.After(since) {
		since = ar.notBefore
	}
	if now.Sub(since) < LateAfter {
		return api.LateRun{}, false
	}
	lr.Since = since.UTC()
	e := pt.jobs[r.JobID]
	var ex, why string
	if e != nil {
		ex = e.spec.Executor.Type // "" for a run of steps: each step has its own
	}
	if e != nil && ex != "" && pt.d.cfg.Workers != nil {
		why = pt.d.cfg.Workers.WhyPending(r.JobID, ex, e.spec.Placed().selector(), "")
	}
	switch k := pt.limitWaitingLocked(ar, now); {
	case e == nil:
		lr.Reason = "its job is being loaded or deleted"
	case k != "":
		lr.Reason = fmt.Sprintf("waiting for limit key %q: no room (GET /v1/limits/%s)", k, k)
	case why != "":
		lr.Reason = why
	case ex == "":
		lr.Reason = "waiting for a free slot on a live worker for its next steps"
	default:
		lr.Reason = fmt.Sprintf("waiting for a free slot: the live workers that may run %s executors are busy", ex)
	}
	return lr, true
}
