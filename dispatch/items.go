package dispatch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// This file is the decision logic of runs made of items (sharded and
// broadcast runs): pure functions of the job, the run, the workers and
// the time, as plan.go's are for a run of one item. Each item is an
// attempt chain with a run's rules (FinishAttempt, LeaseExpired): an
// item's chain is handed to those functions as a run of its own
// (itemChain), so the two cannot drift apart; the run's status follows
// from its items' (Settle).

// NewItems returns n pending items, indexed 0 to n-1.
func NewItems(n int) []api.Item {
	items := make([]api.Item, n)
	for i := range items {
		items[i] = api.Item{Index: i, Status: api.RunPending, Attempts: []api.Attempt{}}
	}
	return items
}

// LiveWorker is a live worker registration as the scheduler sees it: the
// document, and its etcd create revision, which identifies the
// registration (a worker that expires and registers again gets a new
// one).
type LiveWorker struct {
	api.Worker
	Registration int64
}

// MayRun reports whether live worker w may run attempts of job j: it
// runs the job's executor type, its credential's scope covers the job's
// ID, and its registered labels match the job's placement selector. It
// chooses a broadcast's targets; a hand-out checks the same for the
// polling worker (poll.may) and, for an item pinned to a worker, the pin.
func MayRun(j *api.Job, w LiveWorker) bool {
	return slices.Contains(w.Executors, j.Executor.Type) && strings.HasPrefix(j.ID, w.Prefix) && placement.Allows(j.Selector(), w.Labels)
}

// BroadcastItems returns the items of a broadcast fire of job j: one per
// live worker that may run it (MayRun), by worker ID, each pinned to its
// worker's registration; at most api.MaxBroadcastWorkers. reason is set
// when there are none ("" otherwise), or when workers were left out.
func BroadcastItems(j *api.Job, live []LiveWorker) (items []api.Item, reason string) {
	ws := slices.Clone(live)
	slices.SortFunc(ws, func(a, b LiveWorker) int { return strings.Compare(a.ID, b.ID) })
	for _, w := range ws {
		if !MayRun(j, w) {
			continue
		}
		if len(items) == api.MaxBroadcastWorkers {
			reason = fmt.Sprintf("broadcast to the first %d matching workers only (the limit of one fire)", api.MaxBroadcastWorkers)
			break
		}
		items = append(items, api.Item{Index: len(items), Status: api.RunPending, Worker: w.ID, Registration: w.Registration, Attempts: []api.Attempt{}})
	}
	if len(items) == 0 {
		reason = fmt.Sprintf("broadcast: no live worker runs executor %q for this job", j.Executor.Type)
		if sel := j.Selector(); sel != "" {
			reason = fmt.Sprintf("broadcast: no live worker runs executor %q for this job with labels matching %q", j.Executor.Type, sel)
		}
	}
	return items, reason
}

// itemChain returns item it as a run of one item, for the rules of
// attempt chains (FinishAttempt, LeaseExpired, Dispatchable).
func itemChain(r api.Run, it api.Item) api.Run {
	r.Items, r.Status, r.Attempts, r.Reason = nil, it.Status, it.Attempts, it.Reason
	return r
}

// withItem returns r with item i replaced by it (r's items are copied).
func withItem(r api.Run, i int, it api.Item) api.Run {
	r.Items = slices.Clone(r.Items)
	r.Items[i] = it
	return r
}

// StartItems returns r with a new attempt of each of items by worker,
// taken by credential, at now: the items running, and the run too.
func StartItems(r api.Run, items []int, worker, credential string, now time.Time) api.Run {
	r.Items = slices.Clone(r.Items)
	for _, i := range items {
		it := &r.Items[i]
		c := StartAttempt(itemChain(r, *it), worker, api.ItemTime(now))
		c.Attempts[len(c.Attempts)-1].Credential = credential
		it.Status, it.Attempts = c.Status, c.Attempts
	}
	if len(items) > 0 {
		r.Status = api.RunRunning
	}
	return r
}

// FinishItem records the end of item i's current attempt at now with
// outcome o and decides what follows for the item by FinishAttempt's
// rules (succeeded; failed, with a retry not before the returned time;
// dead when j.Retry.MaxAttempts attempts were made), then settles the
// run (Settle). cancelled are the items Settle ended while running.
//
// In a run made of steps, item i's step's retry applies (stepJobFor), and
// a success records the item's result, within the limits of stepResult.
func FinishItem(j *api.Job, r api.Run, i int, o Outcome, now time.Time, rnd float64) (next api.Run, notBefore time.Time, cancelled []int) {
	if sj := stepJobFor(j, &r, i); sj != nil {
		j = sj
	}
	o = stepResult(&r, i, o)
	it := r.Items[i]
	c, notBefore := FinishAttempt(j, itemChain(r, it), o, api.ItemTime(now), rnd)
	it.Status, it.Attempts = c.Status, c.Attempts
	if it.Status == api.RunSucceeded && len(o.Result) > 0 {
		it.Result = o.Result
	}
	next, cancelled = Settle(withItem(r, i, it), now)
	return next, notBefore, cancelled
}

// KillItem ends item i at now, dead with reason and no retry, closing
// its running attempt, if any, with the reason as its error (a
// broadcast item whose worker's registration ended); then settles the
// run.
func KillItem(r api.Run, i int, reason string, now time.Time) (next api.Run, cancelled []int) {
	it := r.Items[i]
	it.Attempts = slices.Clone(it.Attempts)
	if n := len(it.Attempts); it.Status == api.RunRunning && n > 0 {
		a := &it.Attempts[n-1]
		a.FinishedAt, a.Error = api.ItemTime(now), reason
	}
	it.Status, it.Reason = api.RunDead, reason
	return Settle(withItem(r, i, it), now)
}

// Settle derives run r's status from its items at now. The run has
// succeeded once r.Required() items have; it is dead once that can no
// longer happen (more items dead or skipped than r's item count less
// the required). A decided run's items that have not ended are ended
// then: skipped, with a reason, a running one's attempt closed as
// cancelled (those are returned, for their workers to be told). An
// undecided run is running once any item has an attempt, else pending. A
// cancelled run (CancelRun) stays cancelled: a cancel request decided it,
// not its items.
//
// A run made of steps is settled by its steps instead (settleSteps).
func Settle(r api.Run, now time.Time) (api.Run, []int) {
	if len(r.Items) == 0 || r.Status == api.RunCancelled {
		return r, nil
	}
	if len(r.Steps) > 0 {
		return settleSteps(r, now)
	}
	c := r.Count()
	need, n := r.Required(), len(r.Items)
	switch {
	case c.Succeeded >= need:
		r.Status = api.RunSucceeded
	case c.Dead+c.Skipped > n-need:
		r.Status = api.RunDead
	default:
		r.Status = api.RunPending
		for _, it := range r.Items {
			if len(it.Attempts) > 0 {
				r.Status = api.RunRunning
				break
			}
		}
		return r, nil
	}
	r.Reason = joinReason(r.Reason, itemsReason(r, need))
	why := "the run succeeded without it (min_succeeded reached)"
	if r.Status == api.RunDead {
		why = "the run is dead without it (too few items can still succeed)"
	}
	return EndItems(r, why, now)
}

// itemsReason says how a decided run's items ended: "" for a run all of
// whose items succeeded; else the counts and the first items that did
// not succeed (with their workers on a broadcast run).
func itemsReason(r api.Run, need int) string {
	c := r.Count()
	if c.Succeeded == len(r.Items) {
		return ""
	}
	var failed []string
	more := 0
	for _, it := range r.Items {
		if it.Status != api.RunDead {
			continue
		}
		if len(failed) == 10 {
			more++
			continue
		}
		s := strconv.Itoa(it.Index)
		if it.Worker != "" {
			s += " (worker " + strconv.Quote(it.Worker) + ")"
		}
		failed = append(failed, s)
	}
	msg := fmt.Sprintf("%d of %d items succeeded (%d required)", c.Succeeded, len(r.Items), need)
	if len(failed) > 0 {
		msg += "; dead: " + strings.Join(failed, ", ")
		if more > 0 {
			msg += fmt.Sprintf(" and %d more", more)
		}
	}
	if c.Skipped > 0 {
		msg += fmt.Sprintf("; %d not run to their end", c.Skipped)
	}
	return msg
}

// EndItems returns r's items ended at now by a decision about the whole
// run (concurrency_policy "replace", a cancel request, enough items
// decided it): those not ended are skipped with why as their reason, a
// running one's attempt closed with "cancelled: " + why as its error. It
// returns the indexes of the items it ended while running.
func EndItems(r api.Run, why string, now time.Time) (api.Run, []int) {
	var cancelled []int
	r.Items = slices.Clone(r.Items)
	for i := range r.Items {
		it := &r.Items[i]
		if it.Status.Final() {
			continue
		}
		it.Attempts = slices.Clone(it.Attempts)
		if k := len(it.Attempts); it.Status == api.RunRunning && k > 0 {
			a := &it.Attempts[k-1]
			a.FinishedAt, a.Error = api.ItemTime(now), "cancelled: "+why
			cancelled = append(cancelled, i)
		}
		it.Status, it.Reason = api.RunSkipped, why
	}
	if len(r.Steps) > 0 {
		r = endSteps(r, why)
	}
	return r, cancelled
}

// DispatchableItems returns up to limit items of r that may be handed
// out at now and that take accepts (nil: any), in index order: pending,
// or failed with their retry due (not before notBefore[i]), as long as
// fewer than r.MaxParallel items run (no bound if 0). It returns none
// for a run that is final. In a run made of steps, only the items of
// steps that may start are (readySteps), within their steps'
// max_parallel.
func DispatchableItems(r api.Run, notBefore []time.Time, now time.Time, take func(i int) bool, limit int) []int {
	if r.Status.Final() {
		return nil
	}
	room := limit
	if r.MaxParallel > 0 {
		room = min(room, r.MaxParallel-r.Count().Running)
	}
	var ready []bool
	var stepRoom []int
	if len(r.Steps) > 0 {
		ready = readySteps(&r)
		stepRoom = make([]int, len(r.Steps))
		for k, s := range r.Steps {
			stepRoom[k] = limit
			if s.MaxParallel > 0 {
				c, _ := stepCounts(&r, s)
				stepRoom[k] = s.MaxParallel - c.Running
			}
		}
	}
	var out []int
	k := -1
	for i, it := range r.Items {
		if len(out) >= room {
			break
		}
		if ready != nil {
			for k < 0 || i >= r.Steps[k].First+r.Steps[k].Items {
				k++
			}
			if !ready[k] || stepRoom[k] <= 0 {
				continue
			}
		}
		var nb time.Time
		if i < len(notBefore) {
			nb = notBefore[i]
		}
		if Dispatchable(itemChain(r, it), nb, now) && (take == nil || take(i)) {
			out = append(out, i)
			if ready != nil {
				stepRoom[k]--
			}
		}
	}
	return out
}

// ItemLeaseExpired is LeaseExpired for item i of r.
// In a run made of steps, item i's step's timeout applies.
func ItemLeaseExpired(j *api.Job, r api.Run, i int, leaseUntil, now time.Time, lease time.Duration) (bool, string) {
	if sj := stepJobFor(j, &r, i); sj != nil {
		j = sj
	}
	return LeaseExpired(j, itemChain(r, r.Items[i]), leaseUntil, now, lease)
}

// joinReason returns a and b joined with "; ", either alone if the other
// is empty.
func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
