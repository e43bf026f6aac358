package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// Items are the checker's figures of sharded and broadcast runs.
type Items struct {
	Runs          int `json:"runs"`           // runs of items checked
	BroadcastRuns int `json:"broadcast_runs"` // of them, broadcast
	Items         int `json:"items"`          // their items
	ItemsRetried  int `json:"items_retried"`  // items with more than one attempt
	// ItemsRepeated counts items the recorder saw succeed more than once
	// (at least once delivery, as RunsRepeated for runs).
	ItemsRepeated int `json:"items_executed_repeated"`
	// BroadcastWorkerLost counts broadcast items dead because their
	// worker's registration ended, when its process had ended or a fault
	// had cut it off: what the product promises for a worker that dies.
	BroadcastWorkerLost int `json:"broadcast_items_worker_lost"`
	// BroadcastWorkersMissed counts workers that lived through a
	// broadcast fire (from 5s before to 1s after it), with labels its
	// job's selector matches, without an item of it; a violation outside
	// fault windows.
	BroadcastWorkersMissed int `json:"broadcast_workers_missed"`
	// The must-be-zero counts.
	// ItemsSucceededTwice: an item with two successful attempts, or
	// whose success was undone.
	ItemsSucceededTwice int `json:"items_succeeded_twice"`
	// ItemsLost: an item of a final run that did not end, a dead item of
	// a sharded run, or a dead broadcast item whose worker lived on
	// uncut.
	ItemsLost int `json:"items_lost"`
	// ItemStatusMismatch: a run whose status is not what its items make
	// it, or whose items changed in number, index or pin.
	ItemStatusMismatch int `json:"item_status_mismatch"`
	// BroadcastMisplaced: a broadcast item run by another worker than the
	// one it is pinned to, two items pinned to one worker, or an item
	// pinned to a worker that had not started at the fire or whose labels
	// its job's selector does not match.
	BroadcastMisplaced int `json:"broadcast_misplaced"`
}

// broadcastLeadIn and broadcastLeadOut bound the workers a broadcast fire
// must reach: those that started this long before it (they have
// registered) and lived this long after it.
const (
	broadcastLeadIn  = 5 * time.Second
	broadcastLeadOut = time.Second
)

// checkItemRun checks a run of items: each item's attempt chain as a
// run's own is checked (checkAttempts); an item succeeds at most once
// and its success is never undone; the items keep their number, indexes
// and pins; a broadcast run pins its items to distinct workers that had
// started at the fire, runs each on its worker only and reaches every
// worker that lived through the fire; at the end every item of a final
// run has ended, the run's status is what its items make it, and a dead
// run is one whose dead items are broadcast items of workers that died
// or were cut off. deleted: the run went with its job.
func (c *checker) checkItemRun(h *RunHistory, runID string, k Kind, execs map[execKey][]Execution, deleted bool) {
	g := &c.res.Global.Items
	s := c.stat(k)
	last := h.Last()
	g.Runs++
	g.Items += len(last.Items)
	if last.Broadcast {
		g.BroadcastRuns++
	}
	for i := range last.Items {
		c.checkAttempts(h, runID, i, k, execs)
	}
	mismatch := func(detail string) {
		g.ItemStatusMismatch++
		c.violate("item_status_mismatch", k, fmt.Sprintf("run %s: %s", runID, detail))
	}
	flagged := map[int]bool{} // items reported as succeeding twice: once each
	twice := func(i int, detail string) {
		if flagged[i] {
			return
		}
		flagged[i] = true
		g.ItemsSucceededTwice++
		c.violate("items_succeeded_twice", k, fmt.Sprintf("run %s: %s", runID, detail))
	}
	// Over the versions: the item set is fixed at the fire, and a success
	// stays.
	succeededAt := map[int]int64{}
	var first api.Run
	for n, v := range h.Versions {
		r := v.Run
		if n == 0 {
			first = r
		} else if len(r.Items) != len(first.Items) {
			mismatch(fmt.Sprintf("revision %d has %d items, the first version %d", v.Rev, len(r.Items), len(first.Items)))
			continue
		}
		for i, it := range r.Items {
			if it.Index != i {
				mismatch(fmt.Sprintf("revision %d has item %d at position %d", v.Rev, it.Index, i))
			}
			if n > 0 && it.Worker != first.Items[i].Worker {
				mismatch(fmt.Sprintf("revision %d pins item %d to %q, the fire to %q", v.Rev, i, it.Worker, first.Items[i].Worker))
			}
			wins := 0
			for _, a := range it.Attempts {
				if !a.FinishedAt.IsZero() && a.Error == "" {
					wins++
				}
			}
			if wins > 1 {
				twice(i, fmt.Sprintf("item %d has %d successful attempts at revision %d", i, wins, v.Rev))
			}
			if rev, ok := succeededAt[i]; ok && it.Status != api.RunSucceeded {
				twice(i, fmt.Sprintf("item %d succeeded at revision %d, %s at revision %d", i, rev, it.Status, v.Rev))
			}
			if _, ok := succeededAt[i]; !ok && it.Status == api.RunSucceeded {
				succeededAt[i] = v.Rev
			}
		}
	}
	created := time.Time{}
	if len(h.Creates) > 0 {
		created = h.Creates[0].Seen
	}
	if last.Broadcast {
		c.checkBroadcast(h, runID, k, last, created)
	}
	executed := 0
	for i, it := range last.Items {
		if len(it.Attempts) > 1 {
			g.ItemsRetried++
		}
		wins := 0
		for a := 1; a <= len(it.Attempts); a++ {
			for _, e := range execs[execKey{runID, i, a}] {
				if e.Succeeded() {
					wins++
				}
			}
		}
		if wins > 0 {
			executed++
		}
		if wins > 1 {
			g.ItemsRepeated++
		}
	}
	if len(last.Steps) > 0 {
		c.checkStepRun(last, k, execs, deleted)
		if last.Status.Final() || deleted {
			return
		}
	}
	if deleted || last.Status == api.RunSkipped || last.Status == api.RunCancelled {
		return // a cancelled run's items do not decide its status
	}
	need, n := last.Required(), len(last.Items)
	cnt := last.Count()
	want := api.RunRunning
	switch {
	case cnt.Succeeded >= need:
		want = api.RunSucceeded
	case cnt.Dead+cnt.Skipped > n-need:
		want = api.RunDead
	}
	if last.Status.Final() && want != last.Status {
		mismatch(fmt.Sprintf("status %s, but its items make it %s (%d of %d succeeded, %d dead, %d skipped, %d required)", last.Status, want, cnt.Succeeded, n, cnt.Dead, cnt.Skipped, need))
	}
	if !last.Status.Final() {
		c.res.Global.RunsUnfinished++
		c.violate("runs_unfinished", k, fmt.Sprintf("run %s still %s at the end (items: %+v)", runID, last.Status, cnt))
		return
	}
	if last.Status == api.RunSucceeded && executed >= need {
		s.FiresExecuted++
	}
	for i, it := range last.Items {
		switch {
		case !it.Status.Final():
			g.ItemsLost++
			c.violate("items_lost", k, fmt.Sprintf("run %s is %s with item %d still %s", runID, last.Status, i, it.Status))
		case it.Status == api.RunDead && !c.workerLost(last, it, created):
			g.ItemsLost++
			c.violate("items_lost", k, fmt.Sprintf("run %s item %d dead (%q; %s)", runID, i, it.Reason, attemptSummary(it.Attempts)))
		case it.Status == api.RunDead:
			g.BroadcastWorkerLost++
		}
	}
}

// workerLost reports whether dead item it of run r is a broadcast item
// whose worker's registration ended for a reason the product allows: its
// process ended, or a fault cut it off, between the fire and the end.
func (c *checker) workerLost(r api.Run, it api.Item, created time.Time) bool {
	if !r.Broadcast || it.Worker == "" || !strings.Contains(it.Reason, "registration") {
		return false
	}
	if life, ok := c.in.Workers[it.Worker]; ok && !life.Ended.IsZero() {
		return true
	}
	_, cut := c.cutOff(it.Worker, created.Add(-broadcastLeadIn), c.in.End)
	return cut
}

// checkBroadcast checks the pins of broadcast run r (of history h)
// created at created: distinct workers, each started before the fire and
// with labels its job's placement selector matches, every attempt of an
// item by its worker; and that every worker that lived through the fire
// and whose labels the selector matches got an item (a violation only
// outside fault windows).
func (c *checker) checkBroadcast(h *RunHistory, runID string, k Kind, r api.Run, created time.Time) {
	g := &c.res.Global.Items
	misplaced := func(detail string) {
		g.BroadcastMisplaced++
		c.violate("broadcast_misplaced", k, fmt.Sprintf("run %s: %s", runID, detail))
	}
	// The selectors the fire may have been decided with: those current
	// when the run was created (checkPlacement's rule).
	sels := []string{""}
	if len(h.Creates) > 0 {
		if s := c.selectors(h.JobID, h.Creates[0].Rev, h.Creates[0].Rev); len(s) > 0 {
			sels = s
		}
	}
	pinned := map[string]int{}
	for i, it := range r.Items {
		if j, dup := pinned[it.Worker]; dup {
			misplaced(fmt.Sprintf("items %d and %d are both pinned to %s", j, i, it.Worker))
		}
		pinned[it.Worker] = i
		life, ok := c.in.Workers[it.Worker]
		if !ok || (!created.IsZero() && life.Started.After(created)) {
			misplaced(fmt.Sprintf("item %d pinned to %s, which had not started at the fire (%s)", i, it.Worker, ts(created)))
		} else if !matchesAny(sels, life.Labels) {
			misplaced(fmt.Sprintf("item %d pinned to %s, whose labels %s match none of its job's selectors %q", i, it.Worker, placement.FormatLabels(life.Labels), sels))
		}
		for _, a := range it.Attempts {
			if a.Worker != it.Worker {
				misplaced(fmt.Sprintf("item %d, pinned to %s, attempt %d ran on %s", i, it.Worker, a.Attempt, a.Worker))
			}
		}
	}
	if created.IsZero() {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(c.in.Workers)) {
		life := c.in.Workers[id]
		if _, ok := pinned[id]; ok || life.Started.After(created.Add(-broadcastLeadIn)) || (!life.Ended.IsZero() && life.Ended.Before(created.Add(broadcastLeadOut))) {
			continue
		}
		if !matchesAll(sels, life.Labels) {
			continue // not a worker the broadcast is for
		}
		g.BroadcastWorkersMissed++
		if _, cut := c.cutOff(id, created.Add(-broadcastLeadIn), created.Add(broadcastLeadOut)); !cut && k == Steady {
			c.violate("broadcast_workers_missed", k, fmt.Sprintf("run %s fired at %s without an item for worker %s (started %s)", runID, ts(created), id, ts(life.Started)))
		}
	}
}
