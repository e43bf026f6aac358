package dispatch

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file orders the candidates a poll is handed: the active runs of a
// partition (assign) and the partitions of a member (Poll), highest
// effective priority first (api.EffectivePriority: the job's or step's
// priority plus one for each PriorityAging the run has waited), the run
// waiting longest first among equals. Priority only orders what is
// handed out; what may start (a worker's slots, a limit key's room) is
// decided as before.

// priorityOf returns the priority of run r's attempts: the job's; in a
// run made of steps, the highest of the steps that may start now
// (readySteps), each the step's priority or the job's.
func (s *jobSpec) priorityOf(r *api.Run) int {
	c := s.controls()
	p := api.PriorityOf(c.Priority)
	if len(r.Steps) == 0 || len(c.Steps) == 0 {
		return p
	}
	best := -1
	for k, ready := range readySteps(r) {
		if !ready {
			continue
		}
		sp := p
		for n := range c.Steps {
			if c.Steps[n].ID == r.Steps[k].ID && c.Steps[n].Priority != nil {
				sp = *c.Steps[n].Priority
			}
		}
		best = max(best, sp)
	}
	if best < 0 {
		return p
	}
	return best
}

// waitSince returns when run ar started waiting for its next attempt:
// when it fired, or when its retry became due if later.
func waitSince(ar *activeRun) time.Time {
	if ar.notBefore.After(ar.run.FiredAt) {
		return ar.notBefore
	}
	return ar.run.FiredAt
}

// ranked is a candidate run in priority order.
type ranked struct {
	id    string
	eff   int // effective priority
	since time.Time
}

// compareRanked orders a before b when a has the higher effective
// priority, then the longer wait, then the smaller run ID.
func compareRanked(a, b ranked) int {
	return cmp.Or(cmp.Compare(b.eff, a.eff), a.since.Compare(b.since), strings.Compare(a.id, b.id))
}

// rankLocked returns the ranking of active run ar at now. The caller
// holds mu.
func (pt *partition) rankLocked(ar *activeRun, now time.Time) ranked {
	p := api.DefaultPriority
	if e := pt.jobs[ar.run.JobID]; e != nil {
		p = e.spec.priorityOf(&ar.run)
	}
	since := waitSince(ar)
	return ranked{id: ar.run.ID, eff: api.EffectivePriority(p, since, now, pt.d.cfg.PriorityAging), since: since}
}

// byPriorityLocked returns the IDs of the partition's active runs in
// priority order (compareRanked) at now. The caller holds mu.
func (pt *partition) byPriorityLocked(now time.Time) []string {
	rs := make([]ranked, 0, len(pt.active))
	for _, ar := range pt.active {
		rs = append(rs, pt.rankLocked(ar, now))
	}
	slices.SortFunc(rs, compareRanked)
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.id
	}
	return ids
}

// bestWaiting returns the ranking of the partition's run that may be
// handed out at now with the highest effective priority; false if none
// may. It is a reader.
func (pt *partition) bestWaiting(now time.Time) (ranked, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var best ranked
	found := false
	for _, ar := range pt.active {
		if !pt.waitingLocked(ar, now) {
			continue
		}
		if r := pt.rankLocked(ar, now); !found || compareRanked(r, best) < 0 {
			best, found = r, true
		}
	}
	return best, found
}

// waitingLocked reports whether run ar has an attempt that may be handed
// out at now (to some worker). The caller holds mu.
func (pt *partition) waitingLocked(ar *activeRun, now time.Time) bool {
	if len(ar.run.Items) == 0 {
		return Dispatchable(ar.run, ar.notBefore, now)
	}
	return len(DispatchableItems(ar.run, ar.notBefores(), now, nil, 1)) > 0
}

// byBestWaiting orders parts so that the partition whose best waiting
// run ranks first (bestWaiting) comes first; partitions with none keep
// their order, last.
func byBestWaiting(parts []*partition, now time.Time) {
	type pr struct {
		pt   *partition
		best ranked
		ok   bool
	}
	ps := make([]pr, len(parts))
	for i, pt := range parts {
		b, ok := pt.bestWaiting(now)
		ps[i] = pr{pt, b, ok}
	}
	slices.SortStableFunc(ps, func(a, b pr) int {
		switch {
		case a.ok && b.ok:
			return compareRanked(a.best, b.best)
		case a.ok:
			return -1
		case b.ok:
			return 1
		}
		return 0
	})
	for i := range ps {
		parts[i] = ps[i].pt
	}
}
